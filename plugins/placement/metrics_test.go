package placement

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Free GPUs count on whole nodes where none is used, else as scattered on partly used ones; an
// ended pod holds none, and a cordoned node offers none.
func TestFreeAcceleratorsAreCountedOnWholeAndPartlyUsedNodes(t *testing.T) {
	const gpu corev1.ResourceName = "nvidia.com/gpu"
	node := func(name string, gpus int64, cordoned bool) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("64")}}}
	}
	pod := func(node string, gpus int64, phase corev1.PodPhase) *corev1.Pod {
		requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		if gpus > 0 {
			requests[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	nodes := []*corev1.Node{node("a", 8, false), node("b", 8, false), node("c", 8, false), node("cordoned", 8, true), node("cpu", 0, false)}
	pods := []*corev1.Pod{
		pod("a", 3, corev1.PodRunning), pod("a", 2, corev1.PodRunning),
		pod("b", 8, corev1.PodSucceeded), pod("b", 0, corev1.PodRunning),
		pod("c", 1, corev1.PodRunning), pod("", 4, corev1.PodPending),
	}
	whole, partly := countFreeAccelerators(nodes, pods, []corev1.ResourceName{gpu})
	assert.Equal(t, int64(8), whole[gpu], "b: its GPU pod ended, its other pod asks for none")
	assert.Equal(t, int64(3+7), partly[gpu], "3 left on a, 7 on c")
}
