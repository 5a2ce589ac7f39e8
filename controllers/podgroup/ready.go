package podgroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groupstatus"
)

// Reasons of the PodsReady condition, and of the event and pod condition of an eviction.
const (
	// ReasonMinimumReady: PodsReady is True, the group's minimum has been bound and Running.
	ReasonMinimumReady = "MinimumReady"
	// ReasonWaitingForPodsReady: PodsReady is False, members are bound and the minimum is not
	// Running yet; the message says how long it has left.
	ReasonWaitingForPodsReady = "WaitingForPodsReady"
	// ReasonUnready: PodsReady is False, the minimum missed its ready timeout and the group's
	// bound members were evicted.
	ReasonUnready = "Unready"
)

// readyVerdict is what the ready timeout decides for a group now.
type readyVerdict struct {
	// timeout is the group's ready timeout; 0 when it has none.
	timeout time.Duration
	// ready: the minimum (minMember, each task's minTaskMember, and minSubGroups sub-groups
	// whole) is Running or succeeded now,
	// or was once since the group last missed its timeout (PodsReady True): the timeout covers a
	// group's start, and lost pods of a group that has run are its Job's policies' business.
	ready bool
	// since is when the earliest live bound member was bound (zero: none is): the clock of the
	// timeout starts then.
	since time.Time
	// evict holds the live bound members once since+timeout has passed without the minimum ready.
	evict []*corev1.Pod
	// placed counts the minimum's members Running or succeeded, for messages.
	placed int32
}

// readyTimeoutOf is the group's spec.readyTimeoutSeconds, else the controller's default.
func readyTimeoutOf(group *schedulingv1alpha1.PodGroup, defaultTimeout time.Duration) time.Duration {
	if group.Spec.ReadyTimeoutSeconds != nil {
		return time.Duration(*group.Spec.ReadyTimeoutSeconds) * time.Second
	}
	return defaultTimeout
}

// decideReady applies the ready timeout to a group and its members at now.
func decideReady(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod, defaultTimeout time.Duration, now time.Time) readyVerdict {
	v := readyVerdict{timeout: readyTimeoutOf(group, defaultTimeout)}
	if v.timeout <= 0 {
		return v
	}
	minMember := groupstatus.MinMemberOf(group)
	byTask, bySubGroup := map[string]int32{}, map[string]int32{}
	var bound []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded {
			v.placed++
			byTask[schedulingv1alpha1.TaskOf(pod)]++
			bySubGroup[schedulingv1alpha1.SubGroupOf(pod)]++
		}
		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded {
			continue
		}
		bound = append(bound, pod)
		if t := boundAt(pod); v.since.IsZero() || t.Before(v.since) {
			v.since = t
		}
	}
	ready := v.placed >= minMember
	for task, want := range group.Spec.MinTaskMember {
		if byTask[task] < want {
			ready = false
		}
	}
	// With sub-groups, the minimum is that many of them whole (minSubGroups, else all): minMember
	// pods Running across more sub-groups, none whole, run nothing a job can use.
	whole := 0
	for _, sub := range group.Spec.SubGroups {
		if bySubGroup[sub.Name] >= sub.MinMember {
			whole++
		}
	}
	if whole < schedulingv1alpha1.MinSubGroupsOf(&group.Spec) {
		ready = false
	}
	// A group that had no PodsReady condition yet but has run (Scheduled True: the timeout was
	// configured while it ran) has started too.
	cond := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupPodsReady)
	wasReady := (cond != nil && cond.Status == metav1.ConditionTrue) ||
		(cond == nil && meta.IsStatusConditionTrue(group.Status.Conditions, schedulingv1alpha1.PodGroupScheduled))
	v.ready = ready || wasReady
	if !v.ready && !v.since.IsZero() && !now.Before(v.since.Add(v.timeout)) {
		v.evict = bound
	}
	return v
}

// boundAt is when a pod was bound: its PodScheduled condition's transition to True, which the
// apiserver sets on binding.
//
// That condition can be written over after the bind. kube-scheduler, failing a cycle that began
// before someone else bound the pod, still patches PodScheduled False onto it, keeping the time
// of the False it had before the bind. Creation, or that time, would start the clock before the
// pod was bound and evict it early, so without a True condition the latest time the pod records
// bounds the bind from above: its start (the kubelet's, or kwok's, which come after the bind),
// a later PodScheduled transition, else its creation. The timeout may then run a little long,
// never short.
func boundAt(pod *corev1.Pod) time.Time {
	latest := pod.CreationTimestamp.Time
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.LastTransitionTime.IsZero() {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
		if c.LastTransitionTime.After(latest) {
			latest = c.LastTransitionTime.Time
		}
	}
	if start := pod.Status.StartTime; start != nil && start.After(latest) {
		latest = start.Time
	}
	return latest
}

// applyReady writes the verdict into status: the PodsReady condition, and for an eviction the
// count and time. It returns when the controller must look again (0: no need). The condition is
// only kept for groups with a ready timeout, or that had one.
func applyReady(group *schedulingv1alpha1.PodGroup, status *schedulingv1alpha1.PodGroupStatus, v readyVerdict, now time.Time) time.Duration {
	had := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupPodsReady) != nil
	if v.timeout <= 0 && !had {
		return 0
	}
	cond := metav1.Condition{Type: schedulingv1alpha1.PodGroupPodsReady, ObservedGeneration: group.Generation}
	minMember := groupstatus.MinMemberOf(group)
	var recheck time.Duration
	switch {
	case v.ready:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonMinimumReady
		cond.Message = fmt.Sprintf("%d of %d pods of the minimum were bound and Running", min(v.placed, minMember), minMember)
		status.UnreadyEvictions, status.LastUnreadyEvictionTime = 0, nil
	case len(v.evict) > 0:
		// A retry of the same eviction (its pods not gone yet, or the controller restarted after
		// the status write) counts once, and keeps the first verdict's message: it was recorded
		// after these pods were bound.
		if last := status.LastUnreadyEvictionTime; last != nil && !last.Time.Before(v.since) && had {
			return 0
		}
		status.UnreadyEvictions++
		status.LastUnreadyEvictionTime = &metav1.Time{Time: now}
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonUnready
		cond.Message = fmt.Sprintf("%d of %d pods of the minimum were bound and Running %v after the first was bound (readyTimeoutSeconds %d); evicted the %d bound pods, and the group is placed again after a backoff",
			v.placed, minMember, v.timeout, int64(v.timeout/time.Second), len(v.evict))
	case !v.since.IsZero():
		left := v.since.Add(v.timeout).Sub(now)
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonWaitingForPodsReady
		cond.Message = fmt.Sprintf("%d of %d pods of the minimum are bound and Running; the rest have until %s (readyTimeoutSeconds %d)",
			v.placed, minMember, v.since.Add(v.timeout).UTC().Format(time.RFC3339), int64(v.timeout/time.Second))
		recheck = left
	default:
		if existing := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupPodsReady); existing != nil && existing.Reason == ReasonUnready {
			return 0 // keep saying why the group was evicted until its members are bound again
		}
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonWaitingForPodsReady
		cond.Message = "no pod of the group is bound yet"
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	return recheck
}

// evictUnready evicts the bound members of a group that missed its ready timeout, as
// kube-scheduler evicts preemption victims: each gets a DisruptionTarget condition saying why,
// then is deleted (its controller creates it again). A pod already gone is skipped.
func (r *Reconciler) evictUnready(ctx context.Context, group *schedulingv1alpha1.PodGroup, pods []*corev1.Pod) error {
	for _, pod := range pods {
		patch := client.StrategicMergeFrom(pod.DeepCopy())
		updated := pod.DeepCopy()
		setPodCondition(updated, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: schedulingv1alpha1.ReasonPodGroupUnready,
			Message:            fmt.Sprintf("tephra-controllers: pod group %s did not have its minimum bound and Running within its ready timeout", group.Name),
			LastTransitionTime: metav1.Now(),
		})
		if err := r.Status().Patch(ctx, updated, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mark pod %s/%s for eviction: %w", pod.Namespace, pod.Name, err)
		}
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

func setPodCondition(pod *corev1.Pod, cond corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}
