// Package chaos checks end to end, on a real control plane, that Tephra's work survives faults of
// the infrastructure it runs on: kube-apiserver, etcd and kube-controller-manager restarted in
// turn, and tephra-scheduler cut off from the apiserver, while gangs bind, a queue reclaims from
// another, a JobFlow runs its Jobs and a CronJob its runs. After each fault, once things settle:
// no gang is left partly bound, nothing was created twice, every queue's status equals a recount
// from the pods, and every component works again without anyone starting it by hand.
//
// The cluster audits every request of Tephra's service accounts (Options.AuditTephra): that log,
// not the components' own word, says what they created and deleted. The scheduler reaches the
// apiserver through a proxy the tests can cut (Options.SchedulerThroughProxy), and Tephra's
// processes are started again when they exit, as the kubelet restarts their pods
// (Options.RestartTephraOnExit; docs/operations.md says why they exit).
package chaos

import (
	"context"
	"os"
	"testing"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		AuditTephra:           true,
		SchedulerThroughProxy: true,
		RestartTephraOnExit:   true,
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}
