package groupstatus

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/runtimeestimate"
)

// Runtime estimates: a group may say how long it runs once its minimum runs
// (spec.runtimeEstimateSeconds). A group that outlives its estimate is not stopped for it; it is
// reported, once, by its RuntimeEstimateExceeded condition, decided here, and by the PodGroup
// controller's event and metric when the condition turns True (OverranNow), so that whoever
// relies on estimates (backfill, a person planning the cluster) knows which were wrong.

// runtimeCondition says whether a group with a runtime estimate has run past it; ok is false for
// groups without one. Once True it stays True: the estimate was wrong, whatever the group does
// next.
func runtimeCondition(group *schedulingv1alpha1.PodGroup, status *schedulingv1alpha1.PodGroupStatus, at time.Time) (metav1.Condition, bool) {
	estimate := runtimeestimate.OfGroup(group)
	if estimate == 0 {
		return metav1.Condition{}, false
	}
	if old := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded); old != nil && old.Status == metav1.ConditionTrue {
		return *old, true
	}
	cond := metav1.Condition{Type: schedulingv1alpha1.PodGroupRuntimeEstimateExceeded, Status: metav1.ConditionFalse, Reason: "WithinEstimate",
		Message: fmt.Sprintf("the group's runtime estimate is %v", estimate)}
	since, ran := runtimeestimate.RunningSince(status)
	running := status.Phase == schedulingv1alpha1.PodGroupRunning || status.Phase == schedulingv1alpha1.PodGroupUnknown
	if ran && running && at.Sub(since) > estimate {
		cond.Status, cond.Reason = metav1.ConditionTrue, "RanPastEstimate"
		cond.Message = fmt.Sprintf("the group has run %v since its minimum first ran, past its runtime estimate of %v; it goes on, and its estimate is no longer trusted",
			at.Sub(since).Round(time.Second), estimate)
	}
	return cond, true
}

// RuntimeRecheck is when the group's runtime condition may change without any event: when its
// estimate ends while it runs. 0: never.
func RuntimeRecheck(group *schedulingv1alpha1.PodGroup, at time.Time) time.Duration {
	estimate := runtimeestimate.OfGroup(group)
	since, ran := runtimeestimate.RunningSince(&group.Status)
	if estimate == 0 || !ran || group.Status.Phase != schedulingv1alpha1.PodGroupRunning ||
		runtimeestimate.Overran(group) {
		return 0
	}
	if left := estimate - at.Sub(since); left > 0 {
		return left + 100*time.Millisecond
	}
	// Past it already: the condition is written on this reconcile, and nothing is left to wait for.
	return 0
}

// OverranNow says whether the status just turned the runtime condition True.
func OverranNow(previous, status schedulingv1alpha1.PodGroupStatus) (*metav1.Condition, bool) {
	now := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded)
	if now == nil || now.Status != metav1.ConditionTrue {
		return nil, false
	}
	return now, !meta.IsStatusConditionTrue(previous.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded)
}
