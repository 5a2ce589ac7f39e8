// Package helm checks the Helm chart charts/tephra: rendered with default values it installs what
// manifests/ installs, and installed on a local control plane with values a Volcano user would
// set, Tephra's components run from its Deployments, as its ServiceAccounts, and place gangs.
package helm

import (
	"context"
	"os"
	"testing"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

// chartArgs are the values the package's cluster is installed with: Tephra also serves pods
// written for Volcano.
var chartArgs = []string{"--set", "compatibleSchedulerNames={volcano}"}

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{Manifests: localcluster.HelmManifests(chartArgs...)}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}
