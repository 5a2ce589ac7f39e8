package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A pod resized in place counts as its node counts it: the larger of its new spec and what is
// allocated while the resize is in progress, what is allocated when the resize is infeasible.
func TestResizedPodCountsAsItsNodeDoes(t *testing.T) {
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("4")}}}},
	}
	assert.Equal(t, Amounts{corev1.ResourceCPU: 4000}, PodRequests(pod), "pending: its spec")

	pod.Spec.NodeName = "n"
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", AllocatedResources: cpu("2"), Resources: &corev1.ResourceRequirements{Requests: cpu("2")}}}
	assert.Equal(t, Amounts{corev1.ResourceCPU: 4000}, PodRequests(pod), "grown from 2 to 4 CPUs, in progress: the larger")

	pod.Spec.Containers[0].Resources.Requests = cpu("1")
	assert.Equal(t, Amounts{corev1.ResourceCPU: 2000}, PodRequests(pod), "shrinking from 2 to 1 CPU, in progress: still 2")

	pod.Spec.Containers[0].Resources.Requests = cpu("16")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
	assert.Equal(t, Amounts{corev1.ResourceCPU: 2000}, PodRequests(pod), "an infeasible resize: what is allocated")
}
