package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A preemptor whose victim is still going waits for it at PreEnqueue, and binds as soon as it
// is gone. Tried while the victim went, it would be refused again on every event of a busy
// cluster and build up backoff. On one node of 4 units, a low-priority pod of the queue holds
// all 4, with a finalizer that keeps it terminating once evicted; a high-priority pod of the same
// queue preempts it, and pods of another queue on a node of their own are deleted one by one for
// 10 s while the victim goes.
func TestAPreemptorWaitsForItsVictimsToGoThenBindsAtOnce(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-victims"
	pool := units(t, env, gpu, 1, 4)
	framework.CreateQueue(t, env, "victims-q", nil)
	framework.CreateQueue(t, env, "victims-noise", nil)
	framework.PriorityClass(t, env, "e2e-victims-high", 1000)
	const noiseRes corev1.ResourceName = "e2e.tephra.dev/gpu-victims-noise"
	const noisePods = 20
	noise := units(t, env, noiseRes, 1, noisePods)
	submit(t, env, ns, noisePods, "noise", workPod{queue: "victims-noise", res: noiseRes, amount: 1, pool: noise})
	submit(t, env, ns, 1, "low", workPod{queue: "victims-q", res: gpu, amount: 4, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"victims-q": 1, "victims-noise": noisePods}, time.Minute)
	release := keepTerminating(t, env, ns, "low-0")

	submit(t, env, ns, 1, "high", workPod{queue: "victims-q", res: gpu, amount: 4, pool: pool, priorityClass: "e2e-victims-high"})
	env.WaitPod(t, ns, "low-0", 30*time.Second, "evicted", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	waiting := "tephra_queue_preemptors_waiting_for_victims"
	framework.Eventually(t, 10*time.Second, "the preemptor to wait for its victim", func() (bool, string) {
		n := framework.SchedulerMetric(t, env, waiting)
		return n == 1, fmt.Sprintf("%s %v", waiting, n)
	})

	unschedulable := `scheduler_schedule_attempts_total{profile="tephra-scheduler",result="unschedulable"}`
	attempts := framework.SchedulerMetric(t, env, unschedulable)
	deleteSteadily(t, env, ns, "noise", noisePods, 10*time.Second)
	high, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "high-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, high.Spec.NodeName, "the preemptor cannot bind while its victim holds the room")
	assert.Equal(t, 0.0, framework.SchedulerMetric(t, env, unschedulable)-attempts,
		"the preemptor was not tried while its victim went, through the deletion of other pods")

	release()
	gone := time.Now()
	env.WaitPod(t, ns, "high-0", 15*time.Second, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	assert.Less(t, time.Since(gone), 2*time.Second, "the preemptor binds within 2 s of its victim going")
	assert.Equal(t, 0.0, framework.SchedulerMetric(t, env, waiting), "and waits no more")
}
