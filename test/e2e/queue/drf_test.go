package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Inside a queue, jobs of equal priority go by their dominant share: when a node with two GPUs
// joins, the job that runs nothing gets both, although the job that already runs two GPUs is
// older and waited longer.
func TestJobsInAQueueGoByDominantShare(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-drf"
	pool := units(t, env, gpu, 1, 2)
	framework.CreateQueue(t, env, "drf", nil)
	// Neither job preempts (the older job's pods above its minimum would be the newer one's
	// victims): both wait for room.
	never := corev1.PreemptNever
	_, err := env.Kube.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingapi.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-drf-never-preempt"}, Value: 0, PreemptionPolicy: &never,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), "e2e-drf-never-preempt", metav1.DeleteOptions{})
	})

	createGroup(t, env, ns, "older", "drf", 1, nil)
	submit(t, env, ns, 4, "older", workPod{group: "older", queue: "drf-older", res: gpu, amount: 1, pool: pool, priorityClass: "e2e-drf-never-preempt"})
	framework.WaitBound(t, env, ns, map[string]int{"drf-older": 2}, time.Minute)
	createGroup(t, env, ns, "newer", "drf", 1, nil)
	submit(t, env, ns, 2, "newer", workPod{group: "newer", queue: "drf-newer", res: gpu, amount: 1, pool: pool, priorityClass: "e2e-drf-never-preempt"})
	// The room comes as a node, outside the test's pool until both jobs have waited past the
	// scheduler's longest pod backoff (10 s) and the node is Ready: labelled into the pool in one
	// update, it brings all their pods to the active queue at once, and only the queue's order
	// decides.
	node := localcluster.SimulatedNode("e2e.tephra.dev-gpu-drf-extra", localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Extended: map[corev1.ResourceName]int64{gpu: 2},
	})
	_, err = env.Kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	require.NoError(t, env.Cluster.WaitNodesReady(context.Background(), node.Name))
	framework.HoldBound(t, env, ns, map[string]int{"drf-newer": 0, "drf-older": 2}, 11*time.Second)
	patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e.tephra.dev/pool":%q}}}`, pool["e2e.tephra.dev/pool"])
	_, err = env.Kube.CoreV1().Nodes().Patch(context.Background(), node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	framework.WaitBound(t, env, ns, map[string]int{"drf-newer": 2, "drf-older": 2}, time.Minute)
	framework.HoldBound(t, env, ns, map[string]int{"drf-newer": 2, "drf-older": 2}, 3*time.Second)
}
