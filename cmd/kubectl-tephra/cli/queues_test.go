package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// `queues` shows a queue below a closed one as closed, by whom; `why` says which queue to open.
func TestQueuesBelowAClosedParentShowAsClosed(t *testing.T) {
	parent := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "org"},
		Spec: schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1, State: schedulingv1alpha1.QueueClosed}}
	child := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Spec: schedulingv1alpha1.QueueSpec{Parent: "org", Weight: 1, State: schedulingv1alpha1.QueueOpen}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.QueueLabel: "team"}},
		Spec:       corev1.PodSpec{SchedulerName: schedulingv1alpha1.SchedulerName},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: `QueueUnavailable: parent queue "org" is closed; the pod waits`,
		}}},
	}
	o, _ := testOptions([]runtime.Object{pod}, parent, child)
	rows, err := o.queueRows()
	require.NoError(t, err)
	states := map[string]string{}
	for _, r := range rows {
		states[r.Name] = r.State
	}
	assert.Equal(t, map[string]string{"root": "Open", "org": "Closed", "team": "Closed (parent org)"}, states)

	v, err := o.why("pod/train")
	require.NoError(t, err)
	assert.Equal(t, schedulingv1alpha1.ReasonQueueUnavailable, v.Blocker)
	assert.Equal(t, `parent queue "org" is closed`, v.Reason)
	assert.Equal(t, "open queue org (spec.state: Open)", v.Unblock)
}
