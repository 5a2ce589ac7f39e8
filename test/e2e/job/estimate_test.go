package job

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A Job that runs past its runtime estimate is not stopped: its PodGroup's
// RuntimeEstimateExceeded condition and a Warning event say so, and it completes. A Job that
// ends within its estimate is not reported.
func TestRuntimeEstimateOverrunIsReported(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	over := newJob("overruns", simTask("worker", 2, "12s", 0))
	over.Spec.RuntimeEstimateSeconds = ptr.To[int32](3)
	env.CreateJob(t, ns, over)
	within := newJob("within", simTask("worker", 2, "2s", 0))
	within.Spec.RuntimeEstimateSeconds = ptr.To[int32](600)
	env.CreateJob(t, ns, within)

	framework.Eventually(t, time.Minute, "overruns' PodGroup reports the overrun while it runs", func() (bool, string) {
		group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "overruns", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded)
		if c == nil {
			return false, "no condition: " + string(group.Status.Phase)
		}
		return c.Status == metav1.ConditionTrue && group.Status.Phase == schedulingv1alpha1.PodGroupRunning,
			string(group.Status.Phase) + " " + string(c.Status) + " " + c.Message
	})
	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "overruns", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ptr.To[int32](3), group.Spec.RuntimeEstimateSeconds, "the Job's estimate is its PodGroup's")
	assert.Contains(t, meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded).Message,
		"past its runtime estimate of 3s; it goes on")
	framework.Eventually(t, 30*time.Second, "a Warning event on the PodGroup", func() (bool, string) {
		events := env.Events(ns, "overruns")
		return strings.Contains(events, "RuntimeEstimateExceeded"), events
	})

	waitPhase(t, env, ns, "overruns", 2*time.Minute, batchv1alpha1.JobCompleted)
	waitPhase(t, env, ns, "within", 2*time.Minute, batchv1alpha1.JobCompleted)
	group, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "within", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, meta.IsStatusConditionTrue(group.Status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded), "within its estimate")
	assert.NotContains(t, env.Events(ns, "within"), "RuntimeEstimateExceeded")
}
