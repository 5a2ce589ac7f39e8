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
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
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

// kube-apiserver, etcd and kube-controller-manager restarted in turn while gangs bind, queue B
// reclaims its share from queue A, a JobFlow runs its steps and a CronJob its runs. After each
// restart, once things settle: two of the round's three gangs run whole and the third has nothing
// bound, no PodGroup is partly bound, B's pods all ran, A is back on the whole pool having lost at
// least B's share to reclaim and only to it, every queue's status equals a recount from the pods,
// no Job restarted or has a pod beyond its replicas, the objects written before are still there,
// and every component is healthy without a hand starting it. At the end the JobFlow succeeded with
// one Job per step, each created after the step before ended, the CronJob ran after the faults too,
// one Job per scheduled minute and never two at once, no Job or PodGroup was created twice, Tephra
// deleted nothing but reclaim's victims and gang members, and its components exited only when they
// lost their leases.
func TestControlPlaneRestartsWhileWorkIsInFlight(t *testing.T) {
	env := framework.Shared(t)
	w := startWorkload(t, env, "restart", true)
	for _, f := range []fault{
		// Stopped as for an upgrade: it drains its requests, so the audit log records every one.
		{"kube-apiserver restarted", restart(env, localcluster.APIServer, localcluster.RestartOptions{})},
		// Killed: etcd's data folder is all that must survive.
		{"etcd killed and started again", restart(env, localcluster.Etcd, localcluster.RestartOptions{Kill: true})},
		{"kube-controller-manager restarted", restart(env, localcluster.ControllerManager, localcluster.RestartOptions{})},
	} {
		t.Run(f.name, func(t *testing.T) { w.round(t, f) })
	}
	w.finish(t)
}

// tephra-scheduler cut off from the apiserver for 30 s while gangs bind and queue B reclaims: its
// connections reset and new ones blackholed, as when its node loses the network, while the
// controllers and everything else still reach the apiserver. Once healed it ends as the restarts
// do.
func TestSchedulerPartitionedFromTheAPIServer(t *testing.T) {
	env := framework.Shared(t)
	w := startWorkload(t, env, "partition", false)
	w.round(t, fault{"tephra-scheduler partitioned from the apiserver for 30s", func(t *testing.T, ctx context.Context) {
		require.NoError(t, env.Cluster.PartitionScheduler(localcluster.Blackhole))
		// Healing twice does nothing: this one only matters if the test stops first.
		defer func() { _ = env.Cluster.HealScheduler() }()
		forwarding, err := env.Cluster.SchedulerProxyConnections()
		require.NoError(t, err)
		require.Zero(t, forwarding, "connections of the scheduler still forwarded while it is cut off")
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(30 * time.Second):
		}
		require.NoError(t, env.Cluster.HealScheduler())
	}})
	w.finish(t)
}

func restart(env *framework.Env, component string, opts localcluster.RestartOptions) func(*testing.T, context.Context) {
	return func(t *testing.T, ctx context.Context) {
		require.NoError(t, env.Cluster.RestartComponent(ctx, component, opts))
	}
}
