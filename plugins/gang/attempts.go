package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// fail ends a group's attempt (0: the current one): its waiting members are released, what it
// bound is rolled back while the group's minimum is not bound, the group backs off, and it moves
// behind the groups that have not failed since.
func (g *groupManager) fail(logger klog.Logger, key groupKey, pg *v1alpha1.PodGroup, msg, reason string, attempt uint64) {
	now := g.now()
	var waiting []types.UID
	var rollback, leftover []*corev1.Pod
	alreadyFailed := false
	g.groups.with(key, func(s *groupState) {
		alreadyFailed = !s.lastFailure.IsZero() && s.backoffUntil.After(now)
		if attempt == 0 {
			attempt = s.attempt
		}
		// The attempt ends: its members still reserved or allowed can no longer be let through
		// (Permit, PreBind), and those it bound are rolled back while the minimum is not bound.
		s.markFailed(attempt)
		// The next attempt chooses its domain again, from what is free then, and starts with a
		// pilot.
		s.domain, s.subGroupDomains, s.subGroupsLeft = nil, nil, nil
		s.pilot, s.pilotName, s.admitted, s.piloted = "", "", false, true
		if attempt == s.attempt {
			for uid := range s.waiting {
				waiting = append(waiting, uid)
			}
			clear(s.waiting)
			s.attempt++
		}
		if c := g.countMembersLocked(s, key, pg, nil); !c.minimumBound(pg) {
			rollback = g.boundInAttempt(s, key, attempt)
			// A minimum this scheduler saw bound counts as run before tephra-controllers says so.
			if !minimumHasRun(pg) && !s.fullObserved {
				leftover = g.boundLeftover(s, key, attempt)
			}
		}
		if alreadyFailed {
			return
		}
		s.lastFailure = now
		s.failures++
		backoff := time.Duration(*g.args.GroupBackoffSeconds) * time.Second << min(s.failures-1, 10)
		backoff = min(backoff, time.Duration(*g.args.MaxGroupBackoffSeconds)*time.Second)
		s.backoffUntil = now.Add(backoff)
	})
	for _, uid := range waiting {
		if w := g.handle.GetWaitingPod(uid); w != nil {
			w.Reject(Name, msg)
		}
	}
	waitingPods.Set(float64(g.groups.waitingCount()))
	if len(rollback) > 0 {
		g.rollBack(logger, key, pg, rollback, msg)
	}
	if len(leftover) > 0 {
		g.rollBack(logger, key, pg, leftover, msg+"; these members, bound by an earlier attempt that could not roll them back, before this scheduler started, or by binds whose answer was lost, do not make up the minimum")
	}
	if alreadyFailed {
		return
	}
	groupsRejected.WithLabelValues(reason).Inc()
	g.releaseElastic(logger)
	logger.V(3).Info("Gang attempt failed", "podGroup", key.String(), "reason", reason, "released", len(waiting), "message", msg)
	g.groupEvent(pg, corev1.EventTypeWarning, strings.SplitN(msg, ":", 2)[0], msg)
	// Bring the group back once its backoff is over, whatever events happened meanwhile.
	backoff := time.Duration(0)
	g.groups.with(key, func(s *groupState) { backoff = s.backoffUntil.Sub(now) })
	g.groups.after(key, backoff, func() { g.handle.Activate(logger, g.pendingMembers(key, "")) })
}

// boundLeftover lists the members bound and alive that the given attempt did not bind, under the
// group's lock: an earlier attempt's, whose rollback failed (the apiserver was away: the
// deletions are not tried again by that attempt), a predecessor's (it lost its lease, say, in the
// middle of an attempt), or binds whose answer was lost (a reset connection, a 504) although the
// apiserver committed them. While the group's minimum has never run, they can only be the remains
// of attempts that did not bind the minimum, and they hold capacity the rest of the gang may
// need: with every failed attempt they are rolled back too, until they are gone.
func (g *groupManager) boundLeftover(s *groupState, key groupKey, attempt uint64) []*corev1.Pod {
	objs, _ := g.members.ByIndex(podGroupIndex, key.String())
	var out []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		a, ours := s.bound[pod.UID]
		_, binding := s.allowed[pod.UID] // bound by this scheduler, its PostBind still to come
		if (ours && a == attempt) || binding || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, pod)
	}
	return out
}

// minimumHasRun says whether the group's minimum has ever been bound (the Scheduled condition
// tephra-controllers sets): members of such a group that are bound while it is short are what is
// left of a gang that ran, not of an attempt.
func minimumHasRun(pg *v1alpha1.PodGroup) bool {
	return meta.IsStatusConditionTrue(pg.Status.Conditions, v1alpha1.PodGroupScheduled) ||
		pg.Status.Phase == v1alpha1.PodGroupRunning || pg.Status.Phase == v1alpha1.PodGroupCompleted
}

// boundInAttempt lists the members this scheduler bound in the given attempt that are still
// bound and alive, under the group's lock.
func (g *groupManager) boundInAttempt(s *groupState, key groupKey, attempt uint64) []*corev1.Pod {
	objs, _ := g.members.ByIndex(podGroupIndex, key.String())
	var out []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if a, ok := s.bound[pod.UID]; ok && a == attempt && pod.DeletionTimestamp == nil &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			out = append(out, pod)
		}
	}
	return out
}

// ReasonRollback is the reason of the event on a PodGroup whose failed attempt had bound members,
// and of the DisruptionTarget condition of those members, which are deleted.
const ReasonRollback = "GangAttemptRolledBack"

// rollBack deletes members bound in a group's failed attempt, so that no partial gang stays
// bound: a bind or PreBind of a sibling failed after Permit let them all through. Each gets a
// DisruptionTarget condition first, as preemption victims do; their controllers create them
// again, and the group is tried whole after its backoff. The API calls run in the background:
// binding cycles do not wait on them.
func (g *groupManager) rollBack(logger klog.Logger, key groupKey, pg *v1alpha1.PodGroup, pods []*corev1.Pod, why string) {
	names := make([]string, len(pods))
	for i, pod := range pods {
		names[i] = pod.Name
	}
	sort.Strings(names)
	msg := fmt.Sprintf("%s: %s; deleting the %d members it had bound (%s) so that no partial gang stays bound", ReasonRollback, why, len(pods), strings.Join(names, ", "))
	logger.V(2).Info("Rolling back a failed gang attempt", "podGroup", key.String(), "pods", names)
	g.groups.with(key, func(s *groupState) {
		if s.rolledBack == nil {
			s.rolledBack = map[types.UID]struct{}{}
		}
		for _, pod := range pods {
			s.rolledBack[pod.UID] = struct{}{}
		}
	})
	g.groupEvent(pg, corev1.EventTypeWarning, ReasonRollback, msg)
	groupsRolledBack.Inc()
	client := g.handle.ClientSet()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, pod := range pods {
			condition := &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonRollback,
				Message: fmt.Sprintf("%s: pod group %s did not bind its minimum in this attempt", pod.Spec.SchedulerName, key)}
			status := pod.Status.DeepCopy()
			if apipod.UpdatePodCondition(status, condition) {
				if err := schedutil.PatchPodStatus(ctx, client, pod.Name, pod.Namespace, &pod.Status, status); err != nil && !apierrors.IsNotFound(err) {
					logger.Error(err, "Marking a pod of a failed gang attempt", "pod", klog.KObj(pod))
				}
			}
			if err := schedutil.DeletePod(ctx, client, pod); err != nil && !apierrors.IsNotFound(err) {
				logger.Error(err, "Deleting a pod of a failed gang attempt", "pod", klog.KObj(pod))
			}
		}
	}()
}

// forgetGroup drops a deleted PodGroup: its members waiting at Permit are rejected at once, those
// held at PreEnqueue are brought back (to wait for the group again), its reservation is given
// back, and its state and timers go.
func (g *groupManager) forgetGroup(logger klog.Logger, key groupKey) {
	g.releaseReservation(logger, key)
	g.narrowed.take(key)
	g.attained.forget(groupWorkload(key))
	for _, uid := range g.groups.forget(key) {
		if w := g.handle.GetWaitingPod(uid); w != nil {
			w.Reject(Name, fmt.Sprintf("%s: pod group %s was deleted", v1alpha1.ReasonPodGroupNotFound, key))
		}
	}
	waitingPods.Set(float64(g.groups.waitingCount()))
	// Members held at PreEnqueue for the group (waiting for its pilot, say) get no other event:
	// brought back, they learn that the group is gone (PodGroupNotFound) and wait for it.
	pending := g.pendingMembers(key, "")
	for _, pod := range pending {
		g.reportMissingGroup(pod)
	}
	if g.queueRunning.Load() {
		g.handle.Activate(logger, pending)
	}
}

// backoffVerdict says why the group's members wait ("" if they need not): a backoff after a
// failed attempt, or after its bound pods were evicted for missing its ready timeout. The first
// arms a timer in fail; the second, read from the PodGroup's status, arms one here.
func (g *groupManager) backoffVerdict(logger klog.Logger, key groupKey, pg *v1alpha1.PodGroup, now time.Time) string {
	if wait := g.unreadyBackoff(pg, now); wait > 0 {
		g.activateAfterUnreadyBackoff(logger, key, now.Add(wait))
		return fmt.Sprintf("%s: pod group %s is backing off for %v: its bound pods were evicted %d times in a row for missing its ready timeout",
			v1alpha1.ReasonBackingOff, key, wait.Round(time.Millisecond), pg.Status.UnreadyEvictions)
	}
	var backoff time.Duration
	g.groups.with(key, func(s *groupState) { backoff = s.backoffUntil.Sub(now) })
	if backoff > 0 {
		return fmt.Sprintf("%s: pod group %s is backing off for %v after a failed attempt", v1alpha1.ReasonNotEnoughResources, key, backoff.Round(time.Millisecond))
	}
	return ""
}

// unreadyBackoff is how long a group whose bound pods tephra-controllers evicted for missing its
// ready timeout (status.unreadyEvictions in a row, the last at lastUnreadyEvictionTime) still
// waits before it is placed again: the group backoff doubled per eviction, capped as failed
// attempts are. 0: it need not wait.
func (g *groupManager) unreadyBackoff(pg *v1alpha1.PodGroup, now time.Time) time.Duration {
	n := pg.Status.UnreadyEvictions
	if n <= 0 || pg.Status.LastUnreadyEvictionTime == nil {
		return 0
	}
	backoff := time.Duration(*g.args.GroupBackoffSeconds) * time.Second << min(n-1, 10)
	backoff = min(backoff, time.Duration(*g.args.MaxGroupBackoffSeconds)*time.Second)
	return pg.Status.LastUnreadyEvictionTime.Add(backoff).Sub(now)
}

// activateAfterUnreadyBackoff brings the group's pending members back when its unready backoff
// ends, once per backoff: no event may come to retry them.
func (g *groupManager) activateAfterUnreadyBackoff(logger klog.Logger, key groupKey, until time.Time) {
	armed := false
	g.groups.with(key, func(s *groupState) {
		armed = !s.unreadyUntil.Before(until)
		s.unreadyUntil = until
	})
	if !armed {
		g.groups.after(key, until.Sub(g.now())+50*time.Millisecond, func() { g.handle.Activate(logger, g.pendingMembers(key, "")) })
	}
}
