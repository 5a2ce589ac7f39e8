package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A pod its queue's share holds back is tried once and then waits at PreEnqueue: the events of a
// busy cluster (pods of other queues bound and deleted, Queue status written, a node added) do
// not bring it back to be refused again, and so build it no backoff; when the workload it yields
// to no longer waits, it binds at once. On one node of 4 units, queue wait-a's 3-unit pod is
// deleted and kept terminating (a finalizer); wait-b's 2-unit pod waits for that room, and
// wait-a's 1-unit pod, past wait-a's share, yields to it beside the free unit.
func TestAPodHeldByItsShareIsNotTriedUntilWhatItYieldsToEnds(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-wait"
	pool := units(t, env, gpu, 1, 4)
	framework.CreateQueue(t, env, "wait-a", func(s *schedulingv1alpha1.QueueSpec) { s.Reclaimable = new(false) })
	framework.CreateQueue(t, env, "wait-b", nil)
	framework.CreateQueue(t, env, "wait-noise", nil)

	submit(t, env, ns, 1, "big", workPod{queue: "wait-a", res: gpu, amount: 3, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"wait-a": 1}, time.Minute)
	release := deleteSlowly(t, env, ns, "big-0")

	submit(t, env, ns, 1, "waiting", workPod{queue: "wait-b", res: gpu, amount: 2, pool: pool})
	framework.Eventually(t, 30*time.Second, "wait-b's pod to be tried", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "wait-b")
		return ok, msg
	})
	refused := fmt.Sprintf(`tephra_queue_refusals_total{queue="wait-a",reason="%s"}`, schedulingv1alpha1.ReasonQueueOverShare)
	before := framework.SchedulerMetric(t, env, refused)
	submit(t, env, ns, 1, "held", workPod{queue: "wait-a", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, 30*time.Second, "wait-a's pod to name the pod it yields to", func() (bool, string) {
		msg, _ := pendingMessage(env, ns, "wait-a")
		return strings.Contains(msg, fmt.Sprintf(`it yields to pod %s/waiting-0 of queue "wait-b"`, ns)), msg
	})

	// A busy cluster: pods of another queue bound and deleted, one at a time, and a node added.
	noise := units(t, env, "e2e.tephra.dev/gpu-wait-noise", 1, 1)
	for i := range 8 {
		name := fmt.Sprintf("noise-%d", i)
		submit(t, env, ns, 1, name, workPod{queue: "wait-noise", res: "e2e.tephra.dev/gpu-wait-noise", amount: 1, pool: noise})
		framework.WaitBound(t, env, ns, map[string]int{"wait-noise": 1}, 30*time.Second)
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, name+"-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		framework.Eventually(t, 30*time.Second, name+" to be gone", func() (bool, string) {
			n := livePods(t, env, ns, "wait-noise")
			return n == 0, fmt.Sprintf("%d live", n)
		})
	}
	units(t, env, "e2e.tephra.dev/gpu-wait-added", 1, 1)
	framework.HoldBound(t, env, ns, map[string]int{"wait-a": 0, "wait-b": 0}, 2*time.Second)
	assert.Equal(t, 1.0, framework.SchedulerMetric(t, env, refused)-before,
		"the held pod was refused once, and not tried again through 16 binds and deletions of other pods and a node added")

	// What it yields to ends: it binds on the free unit at once.
	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, "waiting-0", metav1.DeleteOptions{}))
	ended := time.Now()
	framework.WaitBound(t, env, ns, map[string]int{"wait-a": 1}, 10*time.Second)
	assert.Less(t, time.Since(ended), 2*time.Second, "the held pod binds within 2 s of the pod it yields to ending")
	assert.Equal(t, 1.0, framework.SchedulerMetric(t, env, refused)-before, "and is not refused on its way")
	release()
}

// A pod of a queue below its share that found no room is tried again on every pod deleted
// anywhere, and its backoff grows; a backlog of another queue's pods past their share waits
// beside it. When room that fits it frees, it binds at once: the backlog, held, keeps no
// scheduling queue busy, so the pod need not sit its backoff out. On one node of 4 units, queue
// room-a (never reclaimed) runs 4 one-unit pods, one of them deleted and kept terminating (a
// finalizer); room-b's one-unit pod waits for that room, and room-a's backlog of 100 yields to it;
// pods of a third queue on a node of their own are deleted one by one for 30 s.
func TestAFreedRoomGoesAtOnceToAPodWhoseBackoffGrew(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-room"
	pool := units(t, env, gpu, 1, 4)
	framework.CreateQueue(t, env, "room-a", func(s *schedulingv1alpha1.QueueSpec) { s.Reclaimable = new(false) })
	framework.CreateQueue(t, env, "room-b", nil)
	framework.CreateQueue(t, env, "room-noise", nil)
	submit(t, env, ns, 4, "full", workPod{queue: "room-a", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"room-a": 4}, time.Minute)
	const noiseRes corev1.ResourceName = "e2e.tephra.dev/gpu-room-noise"
	const noisePods = 80
	noise := units(t, env, noiseRes, 1, noisePods)
	submit(t, env, ns, noisePods, "noise", workPod{queue: "room-noise", res: noiseRes, amount: 1, pool: noise})
	framework.WaitBound(t, env, ns, map[string]int{"room-noise": noisePods}, time.Minute)

	release := deleteSlowly(t, env, ns, "full-0")
	submit(t, env, ns, 1, "waiting", workPod{queue: "room-b", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, 30*time.Second, "room-b's pod to be refused for room", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "room-b")
		return ok && strings.Contains(msg, "Insufficient "+string(gpu)), msg
	})
	refused := fmt.Sprintf(`tephra_queue_refusals_total{queue="room-a",reason="%s"}`, schedulingv1alpha1.ReasonQueueOverShare)
	backlogRefusals := framework.SchedulerMetric(t, env, refused)
	const backlog = 100
	submit(t, env, ns, backlog, "backlog", workPod{queue: "room-a", res: gpu, amount: 1, pool: pool})

	// A pod deleted every half second for 30 s brings the waiting pod back each time its
	// backoff allows (1, 2, 4, 8, then 10 s), and it is refused again.
	unschedulable := `scheduler_schedule_attempts_total{profile="tephra-scheduler",result="unschedulable"}`
	attempts := framework.SchedulerMetric(t, env, unschedulable)
	deleteSteadily(t, env, ns, "noise", noisePods, 30*time.Second)
	require.GreaterOrEqual(t, framework.SchedulerMetric(t, env, unschedulable)-attempts, 4.0,
		"the waiting pod was refused at least 4 times more: its backoff is 8 s or more")
	assert.Equal(t, float64(backlog), framework.SchedulerMetric(t, env, refused)-backlogRefusals,
		"each pod of room-a's backlog was refused by its share once, and then held")

	release()
	freed := time.Now()
	framework.WaitBound(t, env, ns, map[string]int{"room-b": 1}, 15*time.Second)
	assert.Less(t, time.Since(freed), 2*time.Second, "room-b's pod binds within 2 s of its room freeing, not at the end of its backoff")
}
