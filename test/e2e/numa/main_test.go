// Package numa checks NUMA-aware placement end to end: TephraNUMA sends pods only to nodes where
// kubelet's Topology Manager would admit them, from the nodes' NodeResourceTopology objects.
package numa

import (
	"fmt"
	"os"
	"testing"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

func TestMain(m *testing.M) {
	config, err := framework.SchedulerConfigWithVanillaProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m, localcluster.Options{SchedulerConfig: config}, nil))
}
