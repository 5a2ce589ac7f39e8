package dra

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Under scoringStrategy Fragmentation (docs/placement.md), a 1-GPU pod goes where it leaves room
// for the shapes the cluster has been running. Two nodes of 8 GPUs hold 3 and 4 GPUs in pods
// placed by hand; the scheduler has seen two pods of 4 GPUs (on a third node). A 1-GPU pod then
// goes to the node with 5 free, leaving 4 on each node, so two 4-GPU pods both run. MostAllocated
// would fill the fuller node (3 and 5 free left), and the second 4-GPU pod would wait.
func TestFragmentationLeavesRoomForTheShapesThatCome(t *testing.T) {
	env := framework.Shared(t)
	framework.WithSchedulerPluginArgs(t, env, "TephraPlacement", map[string]any{"scoringStrategy": "Fragmentation"})
	ns := env.Namespace(t)
	pool := map[string]string{framework.PoolLabel: "frag"}
	nodes, err := env.Cluster.CreateNodes(context.Background(), "frag", 2, localcluster.NodeShape{
		CPU: "64", Memory: "256Gi", Pods: 110, GPUs: 8, Labels: pool,
	})
	t.Cleanup(func() { deleteNodes(env, nodes) })
	require.NoError(t, err)
	mixPool := map[string]string{framework.PoolLabel: "frag-mix"}
	mixNodes, err := env.Cluster.CreateNodes(context.Background(), "frag-mix", 1, localcluster.NodeShape{
		CPU: "64", Memory: "256Gi", Pods: 110, GPUs: 8, Labels: mixPool,
	})
	t.Cleanup(func() { deleteNodes(env, mixNodes) })
	require.NoError(t, err)
	framework.CreateQueue(t, env, "frag", nil)

	gpus := func(n int64, pool map[string]string) devicePod {
		return devicePod{queue: "frag", pool: pool, requests: corev1.ResourceList{localcluster.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	// The pods placed by hand bypass the scheduler: it neither places them nor learns their shapes.
	for i, used := range []int64{3, 4} {
		pod := gpus(used, pool).build(ns, fmt.Sprintf("by-hand-%d", i))
		pod.Spec.NodeName = nodes[i]
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	placeOneByOne(t, env, ns, 2, "mix", gpus(4, mixPool))

	placeOneByOne(t, env, ns, 1, "small", gpus(1, pool))
	perNode := boundPerNode(t, env, ns)
	require.ElementsMatch(t, []string{"by-hand-0", "small-0"}, perNode[nodes[0]],
		"the 1-GPU pod goes to the node with 5 GPUs free, leaving 4 there, and not to the fuller one, whose 4 free a 4-GPU pod can use:\n%s", podStates(env, ns))

	submit(t, env, ns, 2, "four", gpus(4, pool))
	framework.Eventually(t, time.Minute, "both 4-GPU pods to be bound", func() (bool, string) {
		perNode := boundPerNode(t, env, ns)
		return len(perNode[nodes[0]]) == 3 && len(perNode[nodes[1]]) == 2, podStates(env, ns)
	})
}
