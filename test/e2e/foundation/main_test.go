// Package foundation checks the local control plane itself: Tephra's scheduler places pods on
// simulated nodes, simulated pods follow their run-time annotations, and the apiserver rejects
// malformed Tephra objects with messages that say what is wrong.
package foundation

import (
	"context"
	"os"
	"testing"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		ctx := context.Background()
		if _, err := env.Cluster.CreateNodes(ctx, "foundation", 2, localcluster.DefaultNodeShape); err != nil {
			return err
		}
		return localcluster.WaitDefaultQueues(ctx, env.Cluster.Config)
	}))
}
