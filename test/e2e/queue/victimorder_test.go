package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Reclaim takes what loses least first (docs/queues.md): pods of an elastic job above its
// minimum, then the youngest jobs. Queue a holds 4 nodes of one GPU: an elastic job of minimum 1
// running 2 pods (started first, the oldest), then an old pod, then a young one. Queue b, of the
// same weight, then asks for its 2: it takes the elastic job's extra pod, though that job is the
// oldest, and the young pod; the elastic job keeps its minimum and the old pod runs on.
func TestReclaimTakesElasticPodsAndYoungJobsBeforeOldOnes(t *testing.T) {
	env := framework.Shared(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-victims"
	pool := units(t, env, gpu, 4, 1)
	framework.CreateQueue(t, env, "victims-a", nil)
	framework.CreateQueue(t, env, "victims-b", nil)

	createGroup(t, env, ns, "elastic", "victims-a", 1, nil)
	submit(t, env, ns, 2, "elastic", workPod{group: "elastic", queue: "victims-a", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"victims-a": 2}, time.Minute)
	// Start times are kept to the second: a second and more between them orders them.
	time.Sleep(1500 * time.Millisecond)
	submit(t, env, ns, 1, "old", workPod{queue: "victims-a", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"victims-a": 3}, time.Minute)
	time.Sleep(1500 * time.Millisecond)
	submit(t, env, ns, 1, "young", workPod{queue: "victims-a", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"victims-a": 4}, time.Minute)
	started := func(name string) time.Time {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, pod.Status.StartTime, "pod %s has started", name)
		return pod.Status.StartTime.Time
	}
	require.True(t, started("elastic-0").Before(started("old-0")) && started("old-0").Before(started("young-0")),
		"the elastic job started first, the young pod last")

	submit(t, env, ns, 2, "waiting", workPod{queue: "victims-b", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"victims-a": 2, "victims-b": 2}, time.Minute)

	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	running := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
			running[p.Name] = true
		}
	}
	assert.True(t, running["old-0"], "the old pod runs on: %v", running)
	assert.False(t, running["young-0"], "the young pod was reclaimed: %v", running)
	assert.True(t, running["elastic-0"] != running["elastic-1"], "the elastic job keeps its minimum of one pod and loses the other: %v", running)
	assert.Equal(t, 2, waitEvents(t, env, ns, "Reclaimed", 2), "two pods were reclaimed")
}
