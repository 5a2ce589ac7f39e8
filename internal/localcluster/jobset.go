package localcluster

import (
	"context"
	"io"
	"path/filepath"
)

// JobSet (sigs.k8s.io/jobset) runs beside Tephra where a test needs it (Options.JobSet), as a
// peer (peers.go): built with `go build` in its module's folder (the module proxy serves no
// version list for it, so `go install @version` is refused), installed from the kustomization its
// module ships (config/default, which its release manifests are built from).
//
// JobSet's certificate rotator keeps its certificate in a fixed folder
// (/tmp/k8s-webhook-server/serving-certs, whatever its configuration says), so on one host one
// cluster at a time runs JobSet: the others wait for it (a file lock).

const (
	// JobSetVersion is the JobSet release that runs beside Tephra where a test needs it.
	JobSetVersion = "v0.10.1"
	// JobSet names JobSet's controller manager: its process and log file.
	JobSet = "jobset"

	jobSetModule = "sigs.k8s.io/jobset"
)

// JobSetOptions runs JobSet beside Tephra (Options.JobSet).
type JobSetOptions struct{}

// BuildJobSet builds JobSet's controller manager under root/bin (once per version, kept) and
// returns it with its module's folder, which holds its manifests.
func BuildJobSet(ctx context.Context, root string, log io.Writer) (bin, module string, err error) {
	return buildPeer(ctx, root, log, JobSet, jobSetModule, JobSetVersion, func(out string) error {
		return buildInModule(ctx, jobSetModule, JobSetVersion, ".", out, log)
	})
}

// jobSetPeer is JobSet as the local cluster runs it.
var jobSetPeer = &peer{
	name:           JobSet,
	namespace:      "jobset-system",
	configMap:      "jobset-manager-config",
	configKey:      "controller_manager_config.yaml",
	certSecret:     "jobset-webhook-server-cert",
	webhookService: "jobset-webhook-service",
	defaultCertDir: "/tmp/k8s-webhook-server/serving-certs",
	// Its rotator's folder (pkg/util/cert): see above.
	fixedCertDir: "/tmp/k8s-webhook-server/serving-certs",
	container:    "manager",
	binary:       func(b *Binaries) string { return b.JobSet },
	render: func(ctx context.Context, c *Cluster) ([]byte, error) {
		return KustomizeManifests(filepath.Join(c.bins.JobSetModule, "config", "default"))(ctx, "")
	},
}

// JobSetCRD is the path of the JobSet CRD in JobSet's module, for a cluster that serves the API
// without running JobSet (ApplyFile), e.g. to exercise tephra-controllers' JobSet adapter.
func JobSetCRD(ctx context.Context) (string, error) {
	module, err := moduleDir(ctx, jobSetModule, JobSetVersion)
	if err != nil {
		return "", err
	}
	return filepath.Join(module, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"), nil
}
