package gang

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// ReasonOpensSharedClaim is the reason of the event on a PodGroup whose member binds ahead of
// its minimum to allocate a claim the other members share.
const ReasonOpensSharedClaim = "OpensSharedClaim"

// opensSharedClaim returns a ResourceClaim that the pod names directly, whose allocation this
// scheduler holds in flight for it, and that other members of its group, not placed yet, name
// too ("" if none). kube-scheduler lets other pods use a claim while its allocation is in flight
// only within one of its own pod-group cycles; to any other pod it answers "in the process of
// being allocated" until the allocation is written, which happens when the pod holding it binds.
// A gang whose members share such a claim (one interconnect channel for all) would wait at
// Permit for members that can never be placed: so the member holding the claim binds ahead of
// the minimum, and its attempt is rolled back as a whole if the minimum then fails.
func (g *groupManager) opensSharedClaim(pod *corev1.Pod, key groupKey) string {
	if g.devices == nil {
		return ""
	}
	dra := g.handle.SharedDRAManager()
	if dra == nil {
		return ""
	}
	for _, ref := range pod.Spec.ResourceClaims {
		if ref.ResourceClaimName == nil {
			continue
		}
		claim := g.devices.ResourceClaim(pod.Namespace, *ref.ResourceClaimName)
		if claim == nil || claim.Status.Allocation != nil || dra.ResourceClaims().GetPendingAllocation(claim.UID) == nil {
			continue
		}
		objs, _ := g.members.ByIndex(podGroupIndex, key.String())
		for _, obj := range objs {
			member := obj.(*corev1.Pod)
			if member.UID == pod.UID || member.Spec.NodeName != "" || member.DeletionTimestamp != nil {
				continue
			}
			for _, other := range member.Spec.ResourceClaims {
				if other.ResourceClaimName != nil && *other.ResourceClaimName == claim.Name {
					return claim.Name
				}
			}
		}
	}
	return ""
}

// permitOpener lets a member that opens a shared claim through Permit at once (permit marked it
// allowed in its attempt): if the attempt fails, it is rolled back with it (fail, PostBind). Since
// it does not wait at Permit, no timeout of its own ends the attempt: a timer does, if the
// minimum is not placed within the group's timeout.
func (g *groupManager) permitOpener(ctx context.Context, pod *corev1.Pod, key groupKey, pg *v1alpha1.PodGroup, claim string, attempt uint64) {
	logger := klog.FromContext(ctx)
	msg := fmt.Sprintf("pod %s binds ahead of the group's minimum: it allocates ResourceClaim %s, which the other members share, and kube-scheduler lets them use it only once it is allocated; if the minimum is not placed within %v, the pod is rolled back", pod.Name, claim, g.timeout(pg))
	g.groupEvent(pg, corev1.EventTypeNormal, ReasonOpensSharedClaim, msg)
	logger.V(3).Info("Gang member opens a shared claim", "podGroup", key.String(), "pod", klog.KObj(pod), "claim", claim)
	g.handle.Activate(logger, g.pendingMembers(key, pod.UID))
	g.groups.after(key, g.timeout(pg), func() {
		open := false
		g.groups.with(key, func(s *groupState) { open = s.attempt == attempt && !s.hasFailed(attempt) })
		if !open {
			return // the minimum was placed, or the attempt failed already
		}
		current, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
		if err != nil {
			return
		}
		g.fail(logger, key, current, fmt.Sprintf("%s: the minimum of pod group %s was not placed within %v of pod %s opening ResourceClaim %s; releasing them", v1alpha1.ReasonTimeout, key, g.timeout(pg), pod.Name, claim), "timeout", attempt)
	})
}

// inFlightClaim is DynamicResources' refusal of a pod whose claim's allocation is in flight.
const inFlightClaim = "is in the process of being allocated"

// waitsForSharedClaim returns a claim the pod names directly that kube-scheduler refused it for
// while another pod's allocation of it was in flight, or whose allocation is in flight now (""
// if none): the pod is refused only until the allocation is written. The refusal is read from
// the cycle's statuses: by PostFilter, the opener may have written the allocation already.
func (g *groupManager) waitsForSharedClaim(pod *corev1.Pod, m fwk.NodeToStatusReader) string {
	if g.devices == nil {
		return ""
	}
	if m != nil {
		if s := m.Get(""); s != nil && s.Plugin() == names.DynamicResources {
			for _, reason := range s.Reasons() {
				if strings.Contains(reason, inFlightClaim) {
					for _, ref := range pod.Spec.ResourceClaims {
						if ref.ResourceClaimName != nil && strings.Contains(reason, "/"+*ref.ResourceClaimName+" ") {
							return *ref.ResourceClaimName
						}
					}
				}
			}
		}
	}
	dra := g.handle.SharedDRAManager()
	if dra == nil {
		return ""
	}
	for _, ref := range pod.Spec.ResourceClaims {
		if ref.ResourceClaimName == nil {
			continue
		}
		if claim := g.devices.ResourceClaim(pod.Namespace, *ref.ResourceClaimName); claim != nil && dra.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
			return claim.Name
		}
	}
	return ""
}
