package localcluster

import (
	"context"
	"io"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kueue (sigs.k8s.io/kueue) runs beside Tephra where a test needs it (Options.Kueue), as a peer
// (peers.go): built with `go install` from its module, installed from the kustomization its
// module ships (config/default, which its release manifests are built from). The visibility API
// (an APIService that only the Service network reaches) is left out, with Kueue's
// VisibilityOnDemand gate off.

const (
	// KueueVersion is the Kueue release that runs beside Tephra where a test needs it. Kueue is
	// built in its own module graph (`go install`), so it is pinned here rather than in go.mod.
	KueueVersion = "v0.17.0"
	// Kueue names Kueue's controller manager: its process and log file.
	Kueue = "kueue"

	kueueModule         = "sigs.k8s.io/kueue"
	kueueNamespace      = "kueue-system"
	kueueConfigMap      = "kueue-manager-config"
	kueueConfigKey      = "controller_manager_config.yaml"
	kueueCertSecret     = "kueue-webhook-server-cert"
	kueueWebhookService = "kueue-webhook-service"
	// kueueDefaultCertDir is where Kueue reads its webhook certificate unless its configuration
	// says otherwise (webhook.certDir), and where its Deployment mounts the Secret.
	kueueDefaultCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// KueueOptions runs Kueue beside Tephra (Options.Kueue).
type KueueOptions struct {
	// ExternalFrameworks are added to integrations.externalFrameworks of Kueue's configuration
	// (Kind.version.group), e.g. "Job.v1alpha1.batch.tephra.dev".
	ExternalFrameworks []string
	// FeatureGates are added to Kueue's --feature-gates.
	FeatureGates string
	// Configuration is merged into Kueue's configuration (maps field by field, anything else
	// replaced), e.g. {"multiKueue": {"workerLostTimeout": "30s"}}; JSON values only (int64, not
	// int).
	Configuration map[string]any
}

// BuildKueue builds Kueue's controller manager under root/bin (once per version, kept) and
// returns it with its module's folder, which holds the manifests it ships.
func BuildKueue(ctx context.Context, root string, log io.Writer) (bin, module string, err error) {
	return buildPeer(ctx, root, log, Kueue, kueueModule, KueueVersion, func(out string) error {
		return goInstall(ctx, root, out, kueueModule+"/cmd/kueue@"+KueueVersion, log)
	})
}

// kueuePeer is Kueue as the local cluster runs it.
var kueuePeer = &peer{
	name:           Kueue,
	namespace:      kueueNamespace,
	configMap:      kueueConfigMap,
	configKey:      kueueConfigKey,
	certSecret:     kueueCertSecret,
	webhookService: kueueWebhookService,
	defaultCertDir: kueueDefaultCertDir,
	container:      "manager",
	drop:           []string{"APIService"}, // the visibility API: see above
	binary:         func(b *Binaries) string { return b.Kueue },
	render: func(ctx context.Context, c *Cluster) ([]byte, error) {
		return renderKueue(ctx, c.bins.KueueModule)
	},
	configure: func(c *Cluster, config map[string]any) error {
		if external := c.opts.Kueue.ExternalFrameworks; len(external) > 0 {
			existing, _, _ := unstructured.NestedStringSlice(config, "integrations", "externalFrameworks")
			if err := unstructured.SetNestedStringSlice(config, append(existing, external...), "integrations", "externalFrameworks"); err != nil {
				return err
			}
		}
		if c.opts.Kueue.Configuration != nil {
			mergeInto(config, runtime.DeepCopyJSON(c.opts.Kueue.Configuration))
		}
		return nil
	},
	args: func(c *Cluster) []string {
		gates := "VisibilityOnDemand=false"
		if c.opts.Kueue.FeatureGates != "" {
			gates += "," + c.opts.Kueue.FeatureGates
		}
		return []string{"--feature-gates=" + gates}
	},
}

// kueueManifests renders the kustomization Kueue's module ships (config/default), made local.
func kueueManifests(ctx context.Context, module, proxyURL string) (*peerInstall, error) {
	data, err := renderKueue(ctx, module)
	if err != nil {
		return nil, err
	}
	return peerManifests(data, kueuePeer, proxyURL)
}

// renderKueue renders the kustomization Kueue's module ships (config/default).
func renderKueue(ctx context.Context, module string) ([]byte, error) {
	return KustomizeManifests(filepath.Join(module, "config", "default"))(ctx, "")
}
