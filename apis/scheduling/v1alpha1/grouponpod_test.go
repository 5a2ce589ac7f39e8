package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func carrier(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-worker-0", Namespace: "ns", UID: "pod-uid",
			Labels:      map[string]string{PodGroupLabel: "train", QueueLabel: "team"},
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{PriorityClassName: "high"},
	}
}

// A pod that carries its group stands for a PodGroup of one of it, in its queue at its priority
// class, with the annotations a group reads; a pod that does not carries none.
func TestAPodCarriesAGroupOfOne(t *testing.T) {
	pod := carrier(map[string]string{GroupOnPodAnnotation: "true", SLAWaitingTimeAnnotation: "1m", "other": "x"})
	group, ok := GroupOnPod(pod)
	require.True(t, ok)
	assert.Equal(t, "ns", group.Namespace)
	assert.Equal(t, "train", group.Name)
	assert.Equal(t, PodGroupSpec{MinMember: 1, Queue: "team", PriorityClassName: "high"}, group.Spec)
	assert.Equal(t, map[string]string{GroupOnPodAnnotation: "train-worker-0", SLAWaitingTimeAnnotation: "1m"}, group.Annotations)
	assert.Equal(t, "train-worker-0", CarriedBy(group))
	assert.Equal(t, PodGroupPending, group.Status.Phase)
	assert.False(t, meta.IsStatusConditionTrue(group.Status.Conditions, PodGroupScheduled))

	pod.Spec.NodeName, pod.Status.Phase = "n1", corev1.PodRunning
	group, _ = GroupOnPod(pod)
	assert.Equal(t, PodGroupRunning, group.Status.Phase)
	assert.Equal(t, int32(1), group.Status.Running)
	assert.True(t, meta.IsStatusConditionTrue(group.Status.Conditions, PodGroupScheduled), "bound: its minimum has run")

	delete(pod.Labels, QueueLabel)
	group, _ = GroupOnPod(pod)
	assert.Equal(t, DefaultQueue, group.Spec.Queue)

	for name, p := range map[string]*corev1.Pod{
		"no annotation":    carrier(nil),
		"annotation false": carrier(map[string]string{GroupOnPodAnnotation: "false"}),
		"no group label": func() *corev1.Pod {
			p := carrier(map[string]string{GroupOnPodAnnotation: "true"})
			delete(p.Labels, PodGroupLabel)
			return p
		}(),
	} {
		_, ok := GroupOnPod(p)
		assert.False(t, ok, name)
		assert.False(t, CarriesGroup(p), name)
	}
	assert.Empty(t, CarriedBy(&PodGroup{}))
}
