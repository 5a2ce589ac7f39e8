package groupstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/runtimeestimate"
)

// A group that runs past its runtime estimate is reported, once, and goes on; one within it, or
// without an estimate, is not.
func TestRuntimeEstimateOverrunIsReported(t *testing.T) {
	defer func(saved func() time.Time) { now = saved }(now)
	g := group(2, nil)
	g.Spec.RuntimeEstimateSeconds = ptr.To[int32](60)
	running := pods(corev1.PodRunning, corev1.PodRunning)

	now = func() time.Time { return t0.Time }
	status := Desired(g, running, Hold{}, "")
	since, ran := runtimeestimate.RunningSince(&status)
	require.True(t, ran)
	cond := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	g.Status = status
	assert.InDelta(t, float64(60*time.Second), float64(RuntimeRecheck(g, since)), float64(time.Second), "rechecked when the estimate ends")

	// 61 s after the minimum first ran.
	now = func() time.Time { return since.Add(61 * time.Second) }
	status = Desired(g, running, Hold{}, "")
	cond = meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, "RanPastEstimate", cond.Reason)
	assert.Contains(t, cond.Message, "has run 1m1s since its minimum first ran, past its runtime estimate of 1m0s")
	assert.Equal(t, schedulingv1alpha1.PodGroupRunning, status.Phase, "it goes on")
	_, first := OverranNow(g.Status, status)
	assert.True(t, first, "reported when it turns True")

	g.Status = status
	now = func() time.Time { return since.Add(2 * time.Minute) }
	again := Desired(g, pods(corev1.PodSucceeded, corev1.PodSucceeded), Hold{}, "")
	assert.True(t, meta.IsStatusConditionTrue(again.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded), "it stays True once it ended")
	_, first = OverranNow(g.Status, again)
	assert.False(t, first, "reported once")

	none := group(2, nil)
	status = Desired(none, running, Hold{}, "")
	assert.Nil(t, meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded), "no estimate, no condition")
}
