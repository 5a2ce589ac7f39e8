package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// withUsageHistory runs tephra-controllers with usage history of the given half-life until the
// test ends (the package runs without history: TestMain), which tephra-scheduler follows from
// Queue status, and the scheduler with reclaim at once; both are restarted with it, and started
// again as before afterwards.
func withUsageHistory(t *testing.T, env *framework.Env, halfLife string) {
	t.Helper()
	restart := func() {
		for _, name := range append(env.Cluster.ReplicaNames(localcluster.Controllers), env.Cluster.ReplicaNames(localcluster.Scheduler)...) {
			require.NoError(t, env.Cluster.RestartComponent(context.Background(), name, localcluster.RestartOptions{}))
		}
	}
	env.Cluster.SetUsageHalfLife(halfLife)
	// Reclaim at once: with the shipped patience, a queue's pods wait as long as the other queue's
	// had run (minutes here) before each reclaim. These tests are of the shares, not of patience
	// (reclaimcost_test.go).
	env.Cluster.SetSchedulerPluginArgs("TephraQueue", map[string]any{"reclaimPatience": false})
	restart()
	t.Cleanup(func() {
		env.Cluster.SetUsageHalfLife(packageUsageHalfLife)
		env.Cluster.SetSchedulerPluginArgs("TephraQueue", nil)
		restart()
	})
}

// usageOf is a queue's decayed usage of res in resource-seconds (0 without status.usage).
func usageOf(q *schedulingv1alpha1.Queue, res corev1.ResourceName) float64 {
	if q.Status.Usage == nil {
		return 0
	}
	v, ok := q.Status.Usage.ResourceSeconds[res]
	if !ok {
		return 0
	}
	return v.AsApproximateFloat64()
}

// waitBoundWhere waits until the bound pods per queue satisfy ok.
func waitBoundWhere(t *testing.T, env *framework.Env, ns string, timeout time.Duration, what string, ok func(map[string]int) bool) {
	t.Helper()
	var last map[string]int
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := framework.BoundByQueue(ctx, env, ns)
		if err != nil {
			return false, nil
		}
		last = got
		return ok(got), nil
	})
	require.NoError(t, err, "bound pods by queue: want %s, last seen %v\n%s", what, last, framework.QueueStatuses(env))
}

// Fair share over time, half-life 1 minute: queue busy runs the 10 GPUs alone for a while; queue
// idle, of the same weight, then asks for 10 too. With busy's average allocation near the whole
// cluster and idle's 0, idle deserves more than its weight's half and runs more than 5 pods; as
// its own usage grows, both come back to 5.
func TestAnIdleQueueGetsMoreThanItsWeightThenConverges(t *testing.T) {
	framework.GateOffOnly(t, "usage history is the Queue controller's and TephraQueue's deserved shares, which the gate does not touch; the test waits minutes of usage")
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-history"
	pool := units(t, env, gpu, 5, 2)
	framework.CreateQueue(t, env, "history-busy", nil)
	framework.CreateQueue(t, env, "history-idle", nil)
	withUsageHistory(t, env, "1m")

	submit(t, env, ns, 20, "busy", workPod{queue: "history-busy", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"history-busy": 10}, time.Minute)
	// Three minutes of the whole cluster: 10 GPUs tend to 866 GPU-seconds (10*60/ln 2); at 750,
	// busy's average allocation is 7.5 of the 10 GPUs root deserves (u = 0.87), its factor
	// 2^-(0.87/0.5) = 0.30 against idle's 1, so idle deserves 10/1.30, 7 GPUs.
	framework.WaitQueueStatus(t, env, "history-busy", 5*time.Minute, "three minutes' usage of the cluster", func(q *schedulingv1alpha1.Queue) bool {
		return usageOf(q, gpu) >= 750
	})

	submit(t, env, ns, 20, "idle", workPod{queue: "history-idle", res: gpu, amount: 1, pool: pool})
	framework.WaitQueueStatus(t, env, "history-idle", 30*time.Second, "deserves more than its weight's half (5)", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Deserved, gpu) >= 7
	})
	waitBoundWhere(t, env, ns, 2*time.Minute, "the idle queue running more than its weight's half", func(got map[string]int) bool {
		return got["history-idle"] > 5
	})

	for _, name := range []string{"history-busy", "history-idle"} {
		framework.WaitQueueStatus(t, env, name, 5*time.Minute, "deserves its weight's half within a GPU", func(q *schedulingv1alpha1.Queue) bool {
			d := framework.AmountOf(q.Status.Deserved, gpu)
			return d >= 4 && d <= 6
		})
	}
	waitBoundWhere(t, env, ns, 5*time.Minute, "each queue running its weight's half within a pod", func(got map[string]int) bool {
		return got["history-idle"] >= 4 && got["history-idle"] <= 6 && got["history-busy"] >= 4 && got["history-busy"] <= 6
	})
}

// Usage lives in Queue status, so a restarted tephra-scheduler still weighs it: queue old runs the
// 10 GPUs alone; the scheduler is stopped; queue new, of the same weight, asks for 10 meanwhile.
// The scheduler started again reads the history from status and gives new more than its weight's
// half; a scheduler that had forgotten it would stop new at 5.
func TestUsageSurvivesASchedulerRestart(t *testing.T) {
	framework.GateOffOnly(t, "usage history is the Queue controller's and TephraQueue's deserved shares, which the gate does not touch; the test waits minutes of usage")
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-history-restart"
	pool := units(t, env, gpu, 5, 2)
	framework.CreateQueue(t, env, "history-old", nil)
	framework.CreateQueue(t, env, "history-new", nil)
	withUsageHistory(t, env, "1m")

	submit(t, env, ns, 20, "old", workPod{queue: "history-old", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"history-old": 10}, time.Minute)
	// As in the test above: at 750 GPU-seconds a newcomer deserves 7 of the 10 GPUs. old keeps its
	// 10 while the scheduler is away, so its usage only grows meanwhile.
	framework.WaitQueueStatus(t, env, "history-old", 5*time.Minute, "three minutes' usage of the cluster", func(q *schedulingv1alpha1.Queue) bool {
		return usageOf(q, gpu) >= 750 && q.Status.Usage.HalfLife.Duration == time.Minute
	})

	for _, name := range env.Cluster.ReplicaNames(localcluster.Scheduler) {
		env.Cluster.StopComponent(name)
	}
	submit(t, env, ns, 20, "new", workPod{queue: "history-new", res: gpu, amount: 1, pool: pool})
	framework.WaitQueueStatus(t, env, "history-new", 30*time.Second, "deserves more than its weight's half (5)", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Deserved, gpu) >= 7
	})
	for _, name := range env.Cluster.ReplicaNames(localcluster.Scheduler) {
		require.NoError(t, env.Cluster.StartComponent(context.Background(), name))
	}

	waitBoundWhere(t, env, ns, 3*time.Minute, "the new queue running more than its weight's half", func(got map[string]int) bool {
		return got["history-new"] > 5
	})
	q := framework.WaitQueueStatus(t, env, "history-old", 30*time.Second, "usage kept", func(q *schedulingv1alpha1.Queue) bool {
		return usageOf(q, gpu) >= 400
	})
	require.Less(t, framework.AmountOf(q.Status.Deserved, gpu), int64(5), "the queue with the history deserves less than its weight's half")
}
