package placement

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// PreScore may skip a pod that asks for no accelerator without a look at the nodes only once the
// node informer has been listed and shows no node with one; a node given an accelerator, or a
// new one with it, ends that until it loses it or goes.
func TestAcceleratorNodesKnowsAClusterWithoutAccelerators(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const gpu corev1.ResourceName = "nvidia.com/gpu"
	node := func(name, gpus string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
		if gpus != "" {
			n.Status.Allocatable[gpu] = resource.MustParse(gpus)
		}
		return n
	}
	client := fake.NewClientset(node("cpu-1", ""), node("empty-gpu", "0"))
	factory := informers.NewSharedInformerFactory(client, 0)
	a := newAcceleratorNodes([]corev1.ResourceName{gpu})
	assert.False(t, a.noneKnown(), "not watched: look at the nodes")
	require.NoError(t, a.watch(factory.Core().V1().Nodes().Informer()))
	assert.False(t, a.noneKnown(), "not listed yet: look at the nodes")
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), a.synced))
	assert.True(t, a.noneKnown(), "no node offers a GPU (one offers 0)")

	_, err := client.CoreV1().Nodes().Create(ctx, node("gpu-1", "8"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !a.noneKnown() }, 5*time.Second, 10*time.Millisecond, "a node with GPUs came")
	_, err = client.CoreV1().Nodes().Update(ctx, node("gpu-1", "0"), metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, a.noneKnown, 5*time.Second, 10*time.Millisecond, "its GPUs went")
	_, err = client.CoreV1().Nodes().Update(ctx, node("cpu-1", "2"), metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !a.noneKnown() }, 5*time.Second, 10*time.Millisecond, "a node given GPUs")
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "cpu-1", metav1.DeleteOptions{}))
	assert.Eventually(t, a.noneKnown, 5*time.Second, 10*time.Millisecond, "the node with GPUs deleted")
}
