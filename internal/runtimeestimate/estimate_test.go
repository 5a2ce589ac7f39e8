package runtimeestimate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// A group's estimate counts from when its minimum first ran, or from now for a group still
// waiting; it is not trusted once reported overrunning, nor once past, before the report comes.
func TestGroupEndIsTrustedOnlyWithinTheEstimate(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	group := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{RuntimeEstimateSeconds: ptr.To[int32](600)}}

	end, ok := GroupEnd(group, now)
	assert.True(t, ok)
	assert.Equal(t, now.Add(10*time.Minute), end, "waiting: it would end 10 minutes after starting now")

	group.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-4 * time.Minute))}}
	end, ok = GroupEnd(group, now)
	assert.True(t, ok)
	assert.Equal(t, now.Add(6*time.Minute), end, "running for 4 minutes: 6 are left")

	_, ok = GroupEnd(group, now.Add(7*time.Minute))
	assert.False(t, ok, "past its estimate, before the controller reports it")

	group.Status.Conditions = append(group.Status.Conditions, metav1.Condition{Type: v1alpha1.PodGroupRuntimeEstimateExceeded, Status: metav1.ConditionTrue})
	_, ok = GroupEnd(group, now)
	assert.False(t, ok, "reported overrunning")

	_, ok = GroupEnd(&v1alpha1.PodGroup{}, now)
	assert.False(t, ok, "no estimate")
}

// A pod's activeDeadlineSeconds counts from its start, or from now for a pod not started.
func TestPodDeadline(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: ptr.To[int64](60)}}
	end, ok := PodDeadline(pod, now)
	assert.True(t, ok)
	assert.Equal(t, now.Add(time.Minute), end)

	pod.Status.StartTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
	end, _ = PodDeadline(pod, now)
	assert.Equal(t, now.Add(30*time.Second), end)

	_, ok = PodDeadline(&corev1.Pod{}, now)
	assert.False(t, ok)
}
