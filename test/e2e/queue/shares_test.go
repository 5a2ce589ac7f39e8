package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Queue A fills all 10 GPUs; queue B, of the same weight, then asks for 10: Tephra reclaims
// exactly 5 of A's pods, B runs 5, and nothing moves afterwards.
func TestReclaimSplitsEvenly(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-even"
	pool := units(t, env, gpu, 5, 2)
	framework.CreateQueue(t, env, "even-a", nil)
	framework.CreateQueue(t, env, "even-b", nil)

	submit(t, env, ns, 10, "a", workPod{queue: "even-a", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"even-a": 10}, time.Minute)
	submit(t, env, ns, 10, "b", workPod{queue: "even-b", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"even-a": 5, "even-b": 5}, time.Minute)
	framework.HoldBound(t, env, ns, map[string]int{"even-a": 5, "even-b": 5}, 10*time.Second)

	assert.Equal(t, 5, livePods(t, env, ns, "even-a"), "exactly 5 of A's pods were evicted")
	assert.Equal(t, 5, waitEvents(t, env, ns, "Reclaimed", 5), "one Reclaimed event per evicted pod")
	assert.Contains(t, env.Events(ns, "a-0")+env.Events(ns, "a-9")+eventsOfAll(t, env, ns, "Reclaimed"), `Reclaimed by queue "even-b"`)
	for _, name := range []string{"even-a", "even-b"} {
		framework.WaitQueueStatus(t, env, name, 30*time.Second, "allocated and deserved 5 GPUs", func(q *schedulingv1alpha1.Queue) bool {
			return framework.AmountOf(q.Status.Allocated, gpu) == 5 && framework.AmountOf(q.Status.Deserved, gpu) == 5
		})
	}
}

// Weights 3:1 on 12 GPUs, both queues asking for more than the cluster: 9 and 3.
func TestWeightedShares(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-weighted"
	pool := units(t, env, gpu, 6, 2)
	framework.CreateQueue(t, env, "weighted-a", func(s *schedulingv1alpha1.QueueSpec) { s.Weight = 3 })
	framework.CreateQueue(t, env, "weighted-b", nil)

	submit(t, env, ns, 20, "a", workPod{queue: "weighted-a", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 20, "b", workPod{queue: "weighted-b", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"weighted-a": 9, "weighted-b": 3}, 90*time.Second)
	framework.HoldBound(t, env, ns, map[string]int{"weighted-a": 9, "weighted-b": 3}, 5*time.Second)
	framework.WaitQueueStatus(t, env, "weighted-a", 30*time.Second, "deserves 9 GPUs", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Deserved, gpu) == 9 && framework.AmountOf(q.Status.Allocated, gpu) == 9
	})
}

// A tree root → eng (3) → {train (2), infer (1)}, research (1) on 12 GPUs: 6, 3, 3. A guarantee
// of 6 on research lifts it to 6, and eng's remaining 6 splits 4 and 2.
func TestHierarchicalShares(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-tree"
	pool := units(t, env, gpu, 6, 2)
	framework.CreateQueue(t, env, "tree-eng", func(s *schedulingv1alpha1.QueueSpec) { s.Weight = 3 })
	framework.CreateQueue(t, env, "tree-train", func(s *schedulingv1alpha1.QueueSpec) { s.Parent, s.Weight = "tree-eng", 2 })
	framework.CreateQueue(t, env, "tree-infer", func(s *schedulingv1alpha1.QueueSpec) { s.Parent = "tree-eng" })
	framework.CreateQueue(t, env, "tree-research", nil)

	for _, q := range []string{"tree-train", "tree-infer", "tree-research"} {
		submit(t, env, ns, 15, q, workPod{queue: q, res: gpu, amount: 1, pool: pool})
	}
	framework.WaitBound(t, env, ns, map[string]int{"tree-train": 6, "tree-infer": 3, "tree-research": 3}, 90*time.Second)
	framework.HoldBound(t, env, ns, map[string]int{"tree-train": 6, "tree-infer": 3, "tree-research": 3}, 5*time.Second)
	framework.WaitQueueStatus(t, env, "tree-eng", 30*time.Second, "eng allocated and deserves 9", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, gpu) == 9 && framework.AmountOf(q.Status.Deserved, gpu) == 9
	})

	reclaimedBefore := countEvents(t, env, ns, "Reclaimed")
	research, err := env.Tephra.SchedulingV1alpha1().Queues().Get(context.Background(), "tree-research", metav1.GetOptions{})
	require.NoError(t, err)
	research.Spec.Guarantee = corev1.ResourceList{gpu: resource.MustParse("6")}
	_, err = env.Tephra.SchedulingV1alpha1().Queues().Update(context.Background(), research, metav1.UpdateOptions{})
	require.NoError(t, err)
	framework.WaitBound(t, env, ns, map[string]int{"tree-train": 4, "tree-infer": 2, "tree-research": 6}, 90*time.Second)
	framework.HoldBound(t, env, ns, map[string]int{"tree-train": 4, "tree-infer": 2, "tree-research": 6}, 10*time.Second)
	assert.Equal(t, 3, waitEvents(t, env, ns, "Reclaimed", reclaimedBefore+3)-reclaimedBefore, "research reclaimed exactly the 3 GPUs it was owed")
}

// A queue with a guarantee is reclaimed down to it and no further; a non-reclaimable queue is
// never reclaimed from, even above its deserved share.
func TestGuaranteeAndNonReclaimable(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-guarantee"
	pool := units(t, env, gpu, 6, 2)
	framework.CreateQueue(t, env, "guard-a", func(s *schedulingv1alpha1.QueueSpec) {
		s.Guarantee = corev1.ResourceList{gpu: resource.MustParse("5")}
	})
	framework.CreateQueue(t, env, "guard-b", func(s *schedulingv1alpha1.QueueSpec) { s.Reclaimable = new(false) })
	framework.CreateQueue(t, env, "guard-c", nil)

	submit(t, env, ns, 6, "a", workPod{queue: "guard-a", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 6, "b", workPod{queue: "guard-b", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"guard-a": 6, "guard-b": 6}, time.Minute)
	// c deserves 3 (a keeps its guarantee of 5, b and c split the rest), but only 1 GPU may be
	// taken: from a, down to its guarantee; b does not lend.
	submit(t, env, ns, 12, "c", workPod{queue: "guard-c", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"guard-a": 5, "guard-b": 6, "guard-c": 1}, time.Minute)
	framework.HoldBound(t, env, ns, map[string]int{"guard-a": 5, "guard-b": 6, "guard-c": 1}, 10*time.Second)
	assert.Equal(t, 6, livePods(t, env, ns, "guard-b"), "no pod of the non-reclaimable queue was evicted")
	framework.WaitQueueStatus(t, env, "guard-c", 30*time.Second, "deserves 3 GPUs", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Deserved, gpu) == 3
	})
}

func eventsOfAll(t *testing.T, env *framework.Env, ns, reason string) string {
	t.Helper()
	events, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := ""
	for _, e := range events.Items {
		if e.Reason == reason {
			out += e.Note + "\n"
		}
	}
	return out
}
