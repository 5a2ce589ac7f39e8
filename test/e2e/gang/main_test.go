// Package gang checks gang scheduling end to end: TephraGang binds a PodGroup's minimum all at
// once or not at all, gangs never deadlock each other, a scheduler restart leaves no partial gang,
// and the PodGroup controller reports what happened.
package gang

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

// vanillaScheduler places pods one by one, as the default scheduler does.
const vanillaScheduler = framework.VanillaScheduler

func TestMain(m *testing.M) {
	config, err := framework.SchedulerConfigWithVanillaProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m, localcluster.Options{SchedulerConfig: config}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}
