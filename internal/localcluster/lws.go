package localcluster

import (
	"context"
	"io"
	"path/filepath"
)

// LeaderWorkerSet (sigs.k8s.io/lws) runs beside Tephra where a test needs it (Options.LWS), as a
// peer (peers.go): built with `go build` in its module's folder (the module proxy serves no
// version list for it, so `go install @version` is refused), installed from the Helm chart its
// module ships with gang scheduling on, as its install guide has it for a Volcano-compatible
// scheduler: `--set gangSchedulingManagement.schedulerProvider=volcano`. The chart then adds the
// provider to LWS's configuration and the RBAC rule for Volcano PodGroups; LWS creates a Volcano
// PodGroup per group (its leader and workers) and annotates the group's pods with its name, which
// Tephra mirrors and reads (docs/gang.md, "LeaderWorkerSet").

const (
	// LWSVersion is the LeaderWorkerSet release that runs beside Tephra where a test needs it.
	LWSVersion = "v0.7.0"
	// LWS names LeaderWorkerSet's controller manager: its process and log file.
	LWS = "lws"

	lwsModule = "sigs.k8s.io/lws"
	// lwsNamespace is where its install guide installs the chart (helm install lws … -n
	// lws-system).
	lwsNamespace = "lws-system"
)

// LWSOptions runs LeaderWorkerSet beside Tephra (Options.LWS).
type LWSOptions struct {
	// HelmValues are added to the chart's values, each as `--set` takes it.
	HelmValues []string
}

// BuildLWS builds LeaderWorkerSet's controller manager under root/bin (once per version, kept)
// and returns it with its module's folder, which holds its chart.
func BuildLWS(ctx context.Context, root string, log io.Writer) (bin, module string, err error) {
	return buildPeer(ctx, root, log, LWS, lwsModule, LWSVersion, func(out string) error {
		return buildInModule(ctx, lwsModule, LWSVersion, "./cmd", out, log)
	})
}

// lwsPeer is LeaderWorkerSet as the local cluster runs it.
var lwsPeer = &peer{
	name:           LWS,
	namespace:      lwsNamespace,
	configMap:      "lws-manager-config",
	configKey:      "controller_manager_config.yaml",
	certSecret:     "lws-webhook-server-cert",
	webhookService: "lws-webhook-service",
	defaultCertDir: "/tmp/k8s-webhook-server/serving-certs",
	container:      "manager",
	binary:         func(b *Binaries) string { return b.LWS },
	render: func(ctx context.Context, c *Cluster) ([]byte, error) {
		helm, err := BuildHelm(ctx, c.opts.Root, c.log)
		if err != nil {
			return nil, err
		}
		return renderLWS(ctx, helm, c.bins.LWSModule, c.opts.LWS.HelmValues...)
	},
}

// renderLWS renders the chart LeaderWorkerSet's module ships, as `helm install lws
// charts/lws -n lws-system --set gangSchedulingManagement.schedulerProvider=volcano` installs it.
func renderLWS(ctx context.Context, helm, module string, values ...string) ([]byte, error) {
	args := []string{"template", "lws", filepath.Join(module, "charts", "lws"),
		"--namespace", lwsNamespace, "--include-crds",
		"--set", "gangSchedulingManagement.schedulerProvider=volcano"}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return helmRender(ctx, helm, module, args...)
}
