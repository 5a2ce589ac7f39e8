package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
)

// With kube-scheduler's GenericWorkload feature gate on, the pods of an upstream PodGroup (those
// naming it in spec.schedulingGroup) are scheduled together, in pod-group cycles of
// kube-scheduler's own: its GangScheduling plugin holds them until the group's minCount exists
// (PreEnqueue), and the cycle places all of them or none (GangScheduling is the only plugin
// kube-scheduler asks whether a placement meets the group's constraint, PlacementFeasible). A
// group the cycle cannot place preempts through TephraQueue's PodGroupPostFilter, for the whole
// group at once.
//
// TephraGang then steps aside for those pods: gating them again at PreEnqueue, or holding them
// again at Permit, would stack a second gang on the first (measured: gangs of 1000 timed out at
// TephraGang's Permit). It still orders the queue, keeps them off nodes reserved for other
// groups, and counts them in their jobs' shares. With the gate off, kube-scheduler has no pod-group
// cycle, and TephraGang gangs those pods like any other group's. The pods of Tephra's own and of
// foreign PodGroups go through TephraGang with the gate on or off: kube-scheduler knows no group
// but spec.schedulingGroup's.

// inPodGroupCycles says whether kube-scheduler schedules the pod in pod-group cycles of its own,
// which gang it: TephraGang then neither gates nor holds it.
func (g *groupManager) inPodGroupCycles(pod *corev1.Pod) bool {
	return g.podGroupCycles && pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil
}

// reportMissingGroup tells, in an event, why a pod that kube-scheduler schedules in pod-group
// cycles waits while its upstream PodGroup does not exist: kube-scheduler's queue parks such a pod
// before any plugin's PreEnqueue, without a word, where TephraGang says PodGroupNotFound for the
// pods it gates.
func (g *groupManager) reportMissingGroup(pod *corev1.Pod) {
	if g.upstreamGroups == nil || !g.inPodGroupCycles(pod) || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != g.handle.ProfileName() {
		return
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	if _, err := g.upstreamGroups.PodGroups(pod.Namespace).Get(name); !apierrors.IsNotFound(err) {
		return
	}
	g.podEvent(pod, corev1.EventTypeWarning, v1alpha1.ReasonPodGroupNotFound, fmt.Sprintf("%s: pod group %q does not exist in namespace %q; the pod waits for it",
		v1alpha1.ReasonPodGroupNotFound, name, pod.Namespace))
}

// An upstream PodGroup that waits past its SLA (the sla-waiting-time annotation, which its mirror
// carries, or the plugin's default) reserves nodes as Tephra's groups do (reservation.go), with
// the gate on too: its pods in a pod-group cycle are sent to the reserved nodes, and Filter keeps
// other pods of its priority or lower off them. The group's minimum is placed whole by the cycle,
// so the reservation ends when the cycle's pods reach Permit (placedInPodGroupCycle): Reserve runs
// for each pod the cycle tries, and is undone when the cycle fails; Permit only for the pods of a
// cycle that placed the group.

// cycleDecisionKey holds, in a pod-group cycle's state, what its first pod found for the group:
// the members are counted once per cycle, not once per pod.
const cycleDecisionKey fwk.StateKey = Name + "/cycleDecision"

// cycleDecision is TephraGang's word on a group in a pod-group cycle: the nodes reserved for it,
// or, for pods above its placed minimum, the other group whose minimum they wait for.
type cycleDecision struct {
	reserved []string
	waitFor  string
}

func (c *cycleDecision) Clone() fwk.StateData { return c }

// preFilterInPodGroupCycle sends a pod of a group past its SLA to its group's reserved nodes, and
// holds pods above a placed minimum back while another group's minimum may take the room (the
// rule for elastic pods, docs/elastic.md).
func (g *groupManager) preFilterInPodGroupCycle(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	var groupState fwk.PodGroupCycleState
	if state != nil && state.IsPodGroupSchedulingCycle() {
		groupState = state.GetPodGroupSchedulingCycle()
	}
	d, err := readCycle(groupState)
	if _, refused := admission.Refused(state); refused {
		// Its queue turned it away: no nodes are held for its group meanwhile (as in preFilter).
		if key, ok := groupOf(pod); ok {
			g.releaseReservation(klog.FromContext(ctx), key)
		}
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if err != nil {
		d = g.decideInPodGroupCycle(ctx, pod, nodes)
		if groupState != nil {
			groupState.Write(cycleDecisionKey, d)
		}
	}
	if d.waitFor != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: pod %s is above the minimum of its group and waits while the minimum of pod group %s is being placed", v1alpha1.ReasonElasticWaiting, pod.Name, refusal.Volatile(d.waitFor)))
	}
	if d.reserved != nil {
		result := onReserved(d.reserved)
		if state != nil {
			state.Write(allowedNodesKey, &allowedNodes{result.NodeNames})
		}
		return result, nil
	}
	if g.groups.reservationCount() > 0 {
		return nil, nil // Filter keeps it off nodes reserved for other groups
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

func readCycle(state fwk.PodGroupCycleState) (*cycleDecision, error) {
	if state == nil {
		return nil, fwk.ErrNotFound
	}
	data, err := state.Read(cycleDecisionKey)
	if err != nil {
		return nil, err
	}
	return data.(*cycleDecision), nil
}

// decideInPodGroupCycle is preFilterInPodGroupCycle's decision for the pod's group.
func (g *groupManager) decideInPodGroupCycle(ctx context.Context, pod *corev1.Pod, nodes []fwk.NodeInfo) *cycleDecision {
	key, ok := groupOf(pod)
	if !ok {
		return &cycleDecision{}
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return &cycleDecision{}
	}
	if g.minimumScheduled(pod, pg) {
		// Its pods are elastic: they wait while another group's minimum may take the room.
		if other := g.pendingMinimum(key); other != "" {
			g.groups.with(key, func(s *groupState) { s.elasticWaiting = true })
			return &cycleDecision{waitFor: other}
		}
		return &cycleDecision{}
	}
	// Its minimum heads for the nodes: elastic pods of other groups wait for it.
	now := g.now()
	g.groups.with(key, func(s *groupState) { s.wantsMinimum, s.stalled, s.lastActive = true, false, now })
	return &cycleDecision{reserved: g.cycleReservationFor(ctx, key, pg, pod, nodes)}
}

// minimumScheduled says whether kube-scheduler has the group's minimum scheduled (assumed or
// bound), by its own count of the group's pods.
func (g *groupManager) minimumScheduled(pod *corev1.Pod, pg *v1alpha1.PodGroup) bool {
	st, err := g.handle.SnapshotSharedLister().PodGroupStates().Get(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	return err == nil && st.ScheduledPodsCount() >= int(pg.Spec.MinMember)
}

// podGroupPostFilter runs when a group's pod-group cycle could not place it and TephraQueue
// evicted nothing for it: a minimum that cannot use the free room holds no elastic pod back.
func (g *groupManager) podGroupPostFilter(ctx context.Context, group fwk.PodGroupInfo) *fwk.Status {
	key := groupKey{group.GetNamespace(), group.GetName()}
	stalled := false
	g.groups.with(key, func(s *groupState) {
		stalled = s.wantsMinimum
		s.stalled = true
	})
	if stalled {
		g.releaseElastic(klog.FromContext(ctx))
	}
	return fwk.NewStatus(fwk.Unschedulable)
}

// cycleReservationFor returns the nodes reserved for the pod's group, reserving them first if the
// group waits past its SLA and its minimum is not placed; nil when none are.
func (g *groupManager) cycleReservationFor(ctx context.Context, key groupKey, pg *v1alpha1.PodGroup, pod *corev1.Pod, nodes []fwk.NodeInfo) []string {
	var held []string
	armed := false
	g.groups.with(key, func(s *groupState) {
		held = s.reserved
		armed, s.slaArmed = s.slaArmed, true
	})
	if held != nil {
		return held
	}
	sla, _ := g.slaOf(pg)
	if sla <= 0 {
		return nil
	}
	if !armed {
		// Its members come back when the SLA ends, for the reservation to be made then.
		g.armSLA(klog.FromContext(ctx), key, pg)
	}
	if g.now().Sub(pg.CreationTimestamp.Time) < sla {
		return nil
	}
	count := g.countMembers(key, pg, nil)
	if count.placedMeets(pg) {
		return nil
	}
	need := g.minimumStillNeeded(pg, count, sortedRequests(count.unplaced))
	if constraint, problem := g.constraintOf(pg, pod); constraint != nil && problem == "" {
		// A reservation of a topology gang holds nodes of one domain only.
		nodes = reservationDomain(constraint, nodesFor(pod, nodes), need)
	}
	return g.reservationFor(ctx, key, pg, pod, need, nodes, nil)
}

// placedInPodGroupCycle ends the reservation of a group whose pod-group cycle placed it, and lets
// the elastic pods it held back go: a cycle's pods reach Permit only once it has placed the
// group's minimum.
func (g *groupManager) placedInPodGroupCycle(ctx context.Context, pod *corev1.Pod) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	held, wanted := false, false
	g.groups.with(key, func(s *groupState) {
		held, wanted = s.reserved != nil, s.wantsMinimum
		s.wantsMinimum = false
	})
	if held {
		g.releaseReservation(klog.FromContext(ctx), key)
	}
	if wanted {
		g.releaseElastic(klog.FromContext(ctx))
	}
}
