package localcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A running pod with a duration is left behind once its duration and the grace have passed since
// it started, or since its last nudge: kwok counts the duration again from a nudge.
func TestLeftBehindRunningPodCountsFromItsLastNudge(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-30 * time.Second))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simDuration: "20s"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started},
	}
	assert.True(t, leftBehind(pod, now, 5*time.Second), "30 s after it started, a pod of 20 s is late")
	pod.Annotations[SyncAnnotation] = now.Add(-10 * time.Second).Format(time.RFC3339Nano)
	assert.False(t, leftBehind(pod, now, 5*time.Second), "nudged 10 s ago: kwok ends it 20 s after the nudge")
	pod.Annotations[SyncAnnotation] = now.Add(-26 * time.Second).Format(time.RFC3339Nano)
	assert.True(t, leftBehind(pod, now, 5*time.Second), "nudged 26 s ago and still running")
}
