// Package jobvalidation checks the Job CRD on a real apiserver: the apiserver accepts its schema
// and CEL rules within their cost limits, rejects each malformed Job with a message that says
// what is wrong, applies the Job's defaults, and accepts Job manifests written for Volcano once
// their apiVersion is changed. It needs only etcd and the apiserver: no nodes, scheduler or
// controllers.
package jobvalidation

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		WithoutScheduler:         true,
		WithoutControllers:       true,
		WithoutControllerManager: true,
		Binaries:                 upstreamBinaries(),
	}, nil))
}

// upstreamBinaries returns the already built etcd, kube-apiserver and kwok of bin/, so that the
// test does not build Tephra's own programs, which it does not run. It returns nil, and the
// cluster builds everything, if one of them is missing.
func upstreamBinaries() *localcluster.Binaries {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil
	}
	out, err := exec.CommandContext(context.Background(), "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3").Output()
	versions := strings.Fields(string(out))
	if err != nil || len(versions) != 2 {
		return nil
	}
	bin := filepath.Join(root, "bin")
	b := &localcluster.Binaries{
		Etcd:              filepath.Join(bin, "etcd-"+versions[1]),
		APIServer:         filepath.Join(bin, "kube-apiserver-"+versions[0]),
		ControllerManager: filepath.Join(bin, "kube-controller-manager-"+versions[0]),
		Kwok:              filepath.Join(bin, "kwok-"+localcluster.KwokVersion),
	}
	for _, path := range []string{b.Etcd, b.APIServer, b.Kwok} {
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	return b
}
