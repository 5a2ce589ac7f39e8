package gang

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// The binding cycle of a gang's members: Reserve records a member as assumed for its group's
// attempt, Permit holds it until the group's minimum is assumed (or times out), and PreBind and
// PostBind follow the members to their nodes.

// reserve records the member as assumed for its group's attempt.
func (g *groupManager) reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	if key, ok := groupOf(pod); ok {
		g.groups.with(key, func(s *groupState) {
			s.assumed[pod.UID] = v1alpha1.TaskOf(pod)
			s.attemptOf[pod.UID] = s.attempt
		})
	}
	return nil
}

// unreserve runs when a reserved member will not bind: Permit rejected it or timed out, or
// binding failed. If its group's minimum is not bound yet, the other waiting members are released
// too, so that no partial gang keeps holding resources.
func (g *groupManager) unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	wasWaiting, stale := false, false
	var left sets.Set[string]
	defer func() { g.retryLeftOut(klog.FromContext(ctx), key, left) }()
	var failing uint64
	var count memberCount
	g.groups.with(key, func(s *groupState) {
		_, wasWaiting = s.waiting[pod.UID]
		attempt, reserved := s.attemptOf[pod.UID]
		allowedIn, wasAllowed := s.allowed[pod.UID]
		switch {
		case wasAllowed:
			// Permit let it through and its bind or PreBind failed: the attempt that allowed
			// it fails, though a later one may have begun.
			failing, stale = allowedIn, s.hasFailed(allowedIn)
		case reserved && attempt == s.attempt:
			failing = attempt
		default:
			// A member of an attempt that has ended already must not end the next one.
			stale = true
		}
		delete(s.assumed, pod.UID)
		delete(s.waiting, pod.UID)
		delete(s.attemptOf, pod.UID)
		delete(s.allowed, pod.UID)
		left = s.takeLeftOutOnceSettled()
		if err == nil && !stale {
			count = g.countMembersLocked(s, key, pg, nil)
		}
	})
	waitingPods.Set(float64(g.groups.waitingCount()))
	if err != nil || stale {
		return
	}
	if count.minimumBound(pg) && ownSubGroupWhole(pg, pod, count.boundBySubGroup) {
		// The gang runs, and so does this member's sub-group: it retries on its own. A member of
		// a sub-group not bound whole (one above the group's minimum of sub-groups, placed as a
		// gang of its own) fails its sub-group's attempt.
		return
	}
	reason := "unreserve"
	msg := fmt.Sprintf("%s: %d of %d pods of pod group %s could be placed; releasing them", v1alpha1.ReasonNotEnoughResources, count.placed, pg.Spec.MinMember, key)
	if wasWaiting {
		reason = "timeout"
		msg = fmt.Sprintf("%s: %d of %d pods of pod group %s were placed within %v; releasing them", v1alpha1.ReasonTimeout, count.placed+1, pg.Spec.MinMember, key, g.timeout(pg))
	}
	g.fail(klog.FromContext(ctx), key, pg, msg, reason, failing)
}

// permit lets a member bind once its group's minimum, and every task's minimum, is placed; until
// then the member waits, at most the group's schedule timeout.
func (g *groupManager) permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key, ok := groupOf(pod)
	if !ok {
		return nil, 0
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %v", v1alpha1.ReasonPodGroupNotFound, err)), 0
	}
	// Counting the placed members and allowing the waiting ones happen under the group's lock, in
	// the member's own attempt: an Unreserve that ends the attempt meanwhile (a sibling timed
	// out) either comes first, and this member is refused, or after, and finds them allowed.
	var allowed []types.UID
	var count memberCount
	meets, stale, first := false, false, false
	opens := g.opensSharedClaim(pod, key)
	var openerAttempt uint64
	g.groups.with(key, func(s *groupState) {
		if attempt, ok := s.attemptOf[pod.UID]; ok && attempt != s.attempt {
			stale = true
			return
		}
		count = g.countMembersLocked(s, key, pg, nil)
		if meets = count.placedMeets(pg); meets {
			for uid := range s.waiting {
				allowed = append(allowed, uid)
				s.allowed[uid] = s.attempt
			}
			s.allowed[pod.UID] = s.attempt
			// The attempt has done its part; members placed from now on (elastic ones, or
			// replacements) belong to the next.
			s.attempt++
			clear(s.waiting)
			s.failures = 0
			s.backoffUntil = time.Time{}
			return
		}
		if opens != "" {
			// Let through as a member of the attempt that reserved it, under the lock: an
			// attempt failing meanwhile must see it allowed (PreBind refuses it then).
			openerAttempt = s.attempt
			if a, ok := s.attemptOf[pod.UID]; ok {
				openerAttempt = a
			}
			s.allowed[pod.UID] = openerAttempt
			return
		}
		first = len(s.waiting) == 0
		s.waiting[pod.UID] = struct{}{}
	})
	if stale {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the attempt of pod group %s that placed this pod has failed", v1alpha1.ReasonNotEnoughResources, key)), 0
	}
	if meets {
		for _, uid := range allowed {
			if waiting := g.handle.GetWaitingPod(uid); waiting != nil {
				waiting.Allow(Name)
			}
		}
		g.groups.with(key, func(s *groupState) { s.wantsMinimum = false })
		g.releaseReservation(klog.FromContext(ctx), key)
		waitingPods.Set(float64(g.groups.waitingCount()))
		klog.FromContext(ctx).V(4).Info("Gang minimum placed; allowing its members", "podGroup", key.String(), "placed", count.placed, "allowed", len(allowed)+1)
		g.releaseElastic(klog.FromContext(ctx))
		return nil, 0
	}
	if opens != "" {
		g.permitOpener(ctx, pod, key, pg, opens, openerAttempt)
		return nil, 0
	}
	waitingPods.Set(float64(g.groups.waitingCount()))
	if first {
		// The rest of the group may sit in backoff or among the unschedulable pods: bring them
		// forward so that the attempt completes within its timeout.
		g.handle.Activate(klog.FromContext(ctx), g.pendingMembers(key, pod.UID))
	}
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d of %d pods of pod group %s to be placed", count.placed, pg.Spec.MinMember, key)), g.timeout(pg)
}

// postBind measures the time from a group's first member created to its minimum bound.
func (g *groupManager) postBind(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	pg, _ := g.podGroups.PodGroups(key.namespace).Get(key.name)
	members, _ := g.members.ByIndex(podGroupIndex, key.String())
	var first time.Time
	var left sets.Set[string]
	observe, rollback := false, false
	g.shares.forget(pod.UID)
	defer func() { g.retryLeftOut(klog.FromContext(ctx), key, left) }()
	g.groups.with(key, func(s *groupState) {
		attempt, allowed := s.allowed[pod.UID]
		delete(s.assumed, pod.UID)
		delete(s.attemptOf, pod.UID)
		delete(s.allowed, pod.UID)
		s.bound[pod.UID] = attempt
		left = s.takeLeftOutOnceSettled()
		// Bound after its attempt failed (it was past PreBind when a sibling's bind failed): it
		// is rolled back unless the group's minimum is bound anyway.
		if allowed && s.hasFailed(attempt) && pg != nil && !g.countMembersLocked(s, key, pg, nil).minimumBound(pg) {
			rollback = true
		}
		if pg == nil || s.fullObserved {
			return
		}
		bound := 0
		for _, obj := range members {
			member := obj.(*corev1.Pod)
			if _, going := s.rolledBack[member.UID]; going {
				continue
			}
			// The pod informer may not show this scheduler's binds yet.
			if _, ours := s.bound[member.UID]; ours || member.Spec.NodeName != "" {
				bound++
			}
			if first.IsZero() || member.CreationTimestamp.Time.Before(first) {
				first = member.CreationTimestamp.Time
			}
		}
		observe = bound >= int(pg.Spec.MinMember) && !first.IsZero()
		s.fullObserved = observe
	})
	if observe {
		timeToFull.Observe(g.now().Sub(first).Seconds())
	}
	if rollback {
		g.rollBack(klog.FromContext(ctx), key, pg, []*corev1.Pod{pod}, fmt.Sprintf("pod %s was bound after its group's attempt failed", pod.Name))
	}
}

// preBind refuses a member whose attempt has failed since Permit let it through: a sibling's bind
// or PreBind failed, so the group's minimum will not be bound in this attempt.
func (g *groupManager) preBind(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	key, ok := groupOf(pod)
	if !ok {
		return nil
	}
	failed := false
	g.groups.with(key, func(s *groupState) {
		attempt, allowed := s.allowed[pod.UID]
		failed = allowed && s.hasFailed(attempt)
	})
	if failed {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the attempt of pod group %s failed before this pod was bound", v1alpha1.ReasonNotEnoughResources, key))
	}
	return nil
}

// preBindPreFlight skips PreBind for pods without a group.
func (g *groupManager) preBindPreFlight(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, ok := groupOf(pod); !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

func (g *groupManager) timeout(pg *v1alpha1.PodGroup) time.Duration {
	if pg.Spec.ScheduleTimeoutSeconds != nil {
		return time.Duration(*pg.Spec.ScheduleTimeoutSeconds) * time.Second
	}
	return time.Duration(*g.args.DefaultScheduleTimeoutSeconds) * time.Second
}
