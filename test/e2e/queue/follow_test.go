package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A running PodGroup moved to another queue (spec.queue changed) takes its usage along: both
// queues' status shows it within seconds.
func TestPodGroupMovedBetweenQueuesMovesItsUsage(t *testing.T) {
	env := framework.Shared(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-move"
	pool := units(t, env, gpu, 2, 2)
	framework.CreateQueue(t, env, "move-from", nil)
	framework.CreateQueue(t, env, "move-to", nil)
	createGroup(t, env, ns, "mover", "move-from", 3, nil)
	submit(t, env, ns, 3, "mover", workPod{group: "mover", queue: "move-from", res: gpu, amount: 1, pool: pool})
	waitGroupPhase(t, env, ns, "mover", schedulingv1alpha1.PodGroupRunning)
	framework.WaitQueueStatus(t, env, "move-from", 30*time.Second, "3 GPUs allocated", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, gpu) == 3
	})

	pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "mover", metav1.GetOptions{})
	require.NoError(t, err)
	pg.Spec.Queue = "move-to"
	_, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	framework.WaitQueueStatus(t, env, "move-to", 10*time.Second, "the group's 3 GPUs", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, gpu) == 3
	})
	framework.WaitQueueStatus(t, env, "move-from", 10*time.Second, "nothing left", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, gpu) == 0
	})
}
