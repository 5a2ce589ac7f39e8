// Package runtimeestimate reads how long workloads say they run: a PodGroup's (and so a Tephra
// Job's) spec.runtimeEstimateSeconds, counted from when its minimum first ran, and a pod's
// activeDeadlineSeconds, counted from its start, which the kubelet enforces. The PodGroup
// controller reports groups that outlive their estimate; TephraGang backfills reservations with
// the workloads whose estimate ends before the reserved group could start. Both read estimates
// here, so that they agree on what an estimate is and when it stops being trusted.
package runtimeestimate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// OfGroup is the group's runtime estimate, 0 for none.
func OfGroup(group *v1alpha1.PodGroup) time.Duration {
	if s := group.Spec.RuntimeEstimateSeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return 0
}

// RunningSince is when the group's minimum first ran: when its Scheduled condition turned True.
func RunningSince(status *v1alpha1.PodGroupStatus) (time.Time, bool) {
	scheduled := meta.FindStatusCondition(status.Conditions, v1alpha1.PodGroupScheduled)
	if scheduled == nil || scheduled.Status != metav1.ConditionTrue || scheduled.LastTransitionTime.IsZero() {
		return time.Time{}, false
	}
	return scheduled.LastTransitionTime.Time, true
}

// Overran says whether the group has been reported running past its estimate: its estimate is
// then no longer trusted.
func Overran(group *v1alpha1.PodGroup) bool {
	return meta.IsStatusConditionTrue(group.Status.Conditions, v1alpha1.PodGroupRuntimeEstimateExceeded)
}

// GroupEnd is when a group is expected to end, if it started now or, once its minimum has run,
// from then. ok is false when the group has no estimate or its estimate is not trusted: it was
// reported overrunning, or it has run past it already and the report is on its way.
func GroupEnd(group *v1alpha1.PodGroup, now time.Time) (end time.Time, ok bool) {
	estimate := OfGroup(group)
	if estimate == 0 || Overran(group) {
		return time.Time{}, false
	}
	start := now
	if since, ran := RunningSince(&group.Status); ran {
		start = since
	}
	end = start.Add(estimate)
	return end, !end.Before(now)
}

// PodDeadline is when the kubelet ends the pod for its activeDeadlineSeconds, counted from its
// start (or now, for a pod not started yet); ok is false for a pod without one.
func PodDeadline(pod *corev1.Pod, now time.Time) (time.Time, bool) {
	s := pod.Spec.ActiveDeadlineSeconds
	if s == nil || *s <= 0 {
		return time.Time{}, false
	}
	start := now
	if pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero() {
		start = pod.Status.StartTime.Time
	}
	return start.Add(time.Duration(*s) * time.Second), true
}
