package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// postFilter runs when a member fits no node and TephraQueue's PostFilter, which runs first,
// evicted nothing for it. If its group's minimum cannot be completed in this attempt, every
// waiting member is released, so the partial gang holds nothing, and the group backs off.
//
// It answers Unschedulable, not UnschedulableAndUnresolvable: the framework then keeps the
// reasons of every PostFilter plugin, where UnschedulableAndUnresolvable would keep only this
// one's, and the pod's event should also say why TephraQueue evicted nothing for it.
func (g *groupManager) postFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	result, status := g.decidePostFilter(ctx, state, pod, m)
	if key, ok := groupOf(pod); ok {
		g.holdForPilot(ctx, key, pod)
	}
	return result, status
}

// decidePostFilter is postFilter's decision.
func (g *groupManager) decidePostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := groupOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	now := g.now()
	if g.groups.backingOff(key, now) {
		// Refused by PreFilter for its group's backoff: the attempt that started the backoff has
		// failed already, and nothing of this one is placed. Failing it again also dropped the
		// group's pilot, so that holdForPilot sent this very member back to the scheduling queue,
		// which tried it again at once: every 10 ms while the backoff lasted.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	settled, left := false, false
	g.groups.with(key, func(s *groupState) {
		settled = s.stalled && len(s.assumed) == 0 && s.keptUnfit(now, g.groups.freed.Load()) != ""
		left = s.subGroupsLeft.Has(v1alpha1.SubGroupOf(pod))
	})
	if left {
		// Its sub-group is left out of the attempt under way (subgroups.go, leftOut): the
		// attempt places the others, and is not failed for it.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if settled {
		// The member was refused with its group's kept verdict, and the member that made it found
		// nothing of the group placed here: nothing has happened since (an event would have
		// cleared the verdict), so counting the members again would come to the same.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	count := g.countMembers(key, pg, nil)
	if count.placed >= int(pg.Spec.MinMember) && count.subGroupsPlaced(pg) {
		// The minimum is placed; this member is extra and simply waits for room.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	coming := 0
	g.groups.with(key, func(s *groupState) { coming = g.withRoomComing(s, key, now) })
	if count.placed+coming >= int(pg.Spec.MinMember) {
		// The minimum is placed or has room on its way (victims TephraQueue evicted for its
		// members, still going): this member waits for that room, or is above the minimum and
		// waits like an elastic one. Failing the attempt would release the members waiting at
		// Permit and drop their nominations, and calling the group stalled would let elastic
		// pods in: either way a pod of lower priority took the room made for the minimum.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the minimum of pod group %s is placed or has room on its way (%d placed, %d with room coming); pod %s waits for room",
			v1alpha1.ReasonNotEnoughResources, key, count.placed, coming, pod.Name))
	}
	if count.placed == 0 {
		// Nothing of the group is held (e.g. PreFilter found no room): nothing to release, and
		// the pods wait for capacity events. Meanwhile the minimum cannot use what is free, so
		// elastic pods may.
		g.groups.with(key, func(s *groupState) { s.stalled = true })
		g.releaseElastic(klog.FromContext(ctx))
		// The minimum fits the free capacity but no set of nodes: pods that may move are moved
		// to make whole nodes for it, which the group then holds reserved.
		if moved := g.consolidate(ctx, state, key, pg, pod); moved != "" {
			return nil, fwk.NewStatus(fwk.Unschedulable, moved)
		}
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if claim := g.waitsForSharedClaim(pod, m); claim != "" {
		// kube-scheduler refused the member only until the claim it shares with the member that
		// opens it is allocated (permitOpener); the claim's update brings it back.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: waiting for ResourceClaim %s, which another member of pod group %s is allocating", v1alpha1.ReasonWaitingForMembers, claim, key))
	}
	msg := fmt.Sprintf("%s: %d of %d pods of pod group %s could be placed; releasing them", v1alpha1.ReasonNotEnoughResources, count.placed, pg.Spec.MinMember, key)
	g.fail(klog.FromContext(ctx), key, pg, msg, "post-filter", 0)
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// pendingMembers are the group's members not yet bound, but the one being scheduled, keyed as
// Activate wants.
func (g *groupManager) pendingMembers(key groupKey, scheduling types.UID) map[string]*corev1.Pod {
	members, _ := g.members.ByIndex(podGroupIndex, key.String())
	pods := map[string]*corev1.Pod{}
	for _, obj := range members {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.UID != scheduling {
			pods[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	return pods
}
