package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
)

// ReasonReserved is the event reason when nodes are reserved for a group: past its SLA, or at the
// head of its queue while its minimum cannot fit.
const ReasonReserved = "Reserved"

// slaOf returns a group's SLA waiting time (0: none) and a problem with its annotation.
func (g *groupManager) slaOf(pg *v1alpha1.PodGroup) (time.Duration, string) {
	if value, ok := pg.Annotations[v1alpha1.SLAWaitingTimeAnnotation]; ok {
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return 0, fmt.Sprintf("annotation %s=%q is not a positive duration such as 30s or 10m; the group has no SLA", v1alpha1.SLAWaitingTimeAnnotation, value)
		}
		return d, ""
	}
	return time.Duration(*g.args.DefaultSLAWaitingTimeSeconds) * time.Second, ""
}

// reservationFor returns the nodes reserved for the group (held, as preFilter read them), reserving
// them first if the group has waited past its SLA. A reservation holds nodes whose allocatable
// capacity covers the minimum, those with the most free capacity first, among the nodes a member
// may run on. nil: none.
func (g *groupManager) reservationFor(ctx context.Context, key groupKey, pg *v1alpha1.PodGroup, member *corev1.Pod, need corev1.ResourceList, nodes []fwk.NodeInfo, held []string) []string {
	if held != nil {
		return held
	}
	sla, problem := g.slaOf(pg)
	if problem != "" {
		g.groupEvent(pg, corev1.EventTypeWarning, "InvalidSLAWaitingTime", problem)
		return nil
	}
	waited := g.now().Sub(pg.CreationTimestamp.Time)
	if sla <= 0 || waited < sla || len(need) == 0 {
		return nil
	}
	return g.reserveNodes(ctx, key, pg, member, need, nodes, reservation{},
		fmt.Sprintf("the group has waited %v, past its SLA waiting time of %v", waited.Round(time.Second), sla))
}

// reserveNodes reserves nodes for the group's minimum (r gives why: past its SLA, or at the head of
// its queue) and says so in an event, why being its first words; nil when the nodes the group may
// use could never hold its minimum. A reservation holds nodes whose allocatable capacity covers the
// minimum, those with the most free capacity first, among the nodes a member may run on.
func (g *groupManager) reserveNodes(ctx context.Context, key groupKey, pg *v1alpha1.PodGroup, member *corev1.Pod, need corev1.ResourceList, nodes []fwk.NodeInfo, r reservation, why string) []string {
	var reserved []string
	affinity := nodeaffinity.GetRequiredNodeAffinity(member)
	type candidate struct {
		name        string
		free, alloc map[corev1.ResourceName]int64
	}
	var candidates []candidate
	for _, node := range nodes {
		if ok, _ := affinity.Match(node.Node()); !ok {
			continue
		}
		// Never a node another group holds: two reservations never overlap.
		if owner, _, held := g.groups.reservedFor(node.Node().Name); held && owner != key {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.FromContext(ctx), node.Node().Spec.Taints, member.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			continue
		}
		c := candidate{name: node.Node().Name, free: map[corev1.ResourceName]int64{}, alloc: map[corev1.ResourceName]int64{}}
		for name := range need {
			a, u := capacity.Of(node, name)
			c.alloc[name], c.free[name] = a, max(a-u, 0)
		}
		candidates = append(candidates, c)
	}
	// Most free first: the group starts soonest on the nodes that are emptiest now.
	sort.SliceStable(candidates, func(i, j int) bool {
		for _, name := range sortedNames(need) {
			if candidates[i].free[name] != candidates[j].free[name] {
				return candidates[i].free[name] > candidates[j].free[name]
			}
		}
		return candidates[i].name < candidates[j].name
	})
	covered := map[corev1.ResourceName]int64{}
	for _, c := range candidates {
		if coversAll(covered, need) {
			break
		}
		reserved = append(reserved, c.name)
		for name, v := range c.alloc {
			covered[name] += v
		}
	}
	if !coversAll(covered, need) {
		klog.FromContext(ctx).V(2).Info("Pod group cannot be given a reservation: the nodes it may use could never hold its minimum", "podGroup", key.String(), "candidates", len(candidates), "why", why)
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Reserving nodes for a pod group", "podGroup", key.String(), "nodes", reserved, "why", why)
	r.priority, r.created, r.nodes, r.need = corev1helpers.PodPriority(member), pg.CreationTimestamp.Time, reserved, need
	if !g.groups.reserve(key, reserved, r) {
		return nil
	}
	reservations.Set(float64(g.groups.reservationCount()))
	g.groupEvent(pg, corev1.EventTypeNormal, ReasonReserved, fmt.Sprintf("%s: %s: nodes %s are reserved for it until its minimum runs; %s",
		ReasonReserved, why, strings.Join(reserved, ", "), g.expectedStartOf(key, r, g.now(), amongNodes(nodes)).describe()))
	return reserved
}

func coversAll(covered map[corev1.ResourceName]int64, need corev1.ResourceList) bool {
	for name, q := range need {
		if covered[name] < capacity.Amount(name, q) {
			return false
		}
	}
	return true
}

// filter keeps pods of other workloads off a group's reserved nodes unless they outrank it or
// backfill it (their runtime estimate ends before the group could start, backfill.go): a group
// past its SLA, or at the head of its queue, goes before every other pod of its priority or lower
// there, whatever their age (pods that keep failing are requeued behind it anyway). They may use other nodes. System pods
// are never kept off: PreFilter skips Filter for them, and this check keeps it so if that changes.
// It also keeps a group's member on the nodes PreFilter narrowed it to, which the framework does
// not when it tries a batching hint first (signPod).
func (g *groupManager) filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if outsideAllowed(state, nodeInfo.Node().Name) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is outside the nodes of the pod's group (its topology domain or reservation)")
	}
	owner, r, ok := g.groups.reservedFor(nodeInfo.Node().Name)
	if !ok || v1alpha1.IsSystemPod(pod) {
		return nil
	}
	if len(g.pendingMembers(owner, "")) == 0 {
		// The group waits no more (its Job suspended, its pods deleted): its nodes are free.
		g.releaseReservation(klog.FromContext(ctx), owner)
		return nil
	}
	if key, grouped := groupOf(pod); grouped && key == owner {
		return nil
	}
	if why := g.backfillVerdict(state, pod, owner, r); why != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	return nil
}

// reservation is what Filter needs to know of the group that holds a node.
type reservation struct {
	priority int32
	created  time.Time
	// nodes are the group's reserved nodes and need what its minimum still needed when they were
	// reserved: backfill works out from them when the group could start (backfill.go).
	nodes []string
	need  corev1.ResourceList
	// queueHead is the queue the group headed when the nodes were reserved for it, "" for a
	// reservation past the group's SLA or for consolidation: a queue-head reservation ends when
	// another group heads the queue (queuehead.go).
	queueHead string
	// consolidation: the nodes were made whole for the group by moving pods off them
	// (consolidate.go); the reservation keeps the moved pods' replacements off them.
	consolidation bool
}

// waits says why the group holds the reservation, as "which …" goes on in messages.
func (r reservation) waits() string {
	switch {
	case r.queueHead != "":
		return fmt.Sprintf("heads queue %q and cannot fit", r.queueHead)
	case r.consolidation:
		return "fits the free capacity but no set of nodes, and has pods moved off its reserved nodes to make them whole"
	}
	return "waits past its SLA"
}

// releaseReservation ends a group's reservation and brings back the pods that it kept off its
// nodes.
func (g *groupManager) releaseReservation(logger klog.Logger, key groupKey) {
	if !g.groups.unreserve(key) {
		return
	}
	reservations.Set(float64(g.groups.reservationCount()))
	pods := map[string]*corev1.Pod{}
	for _, obj := range g.members.List() {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			pods[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	g.handle.Activate(logger, pods)
}

// armSLA brings a group's pending members back when its SLA waiting time ends, so that its
// reservation is made then even if no other event retries them.
func (g *groupManager) armSLA(logger klog.Logger, key groupKey, pg *v1alpha1.PodGroup) {
	sla, _ := g.slaOf(pg)
	if sla <= 0 {
		return
	}
	wait := max(sla-g.now().Sub(pg.CreationTimestamp.Time), 0)
	g.groups.after(key, wait+100*time.Millisecond, func() {
		// The end of the SLA changes the group's decision (it reserves nodes now): a verdict kept
		// from before that the minimum cannot fit would refuse its members without reserving
		// anything, until some other event cleared it (the backfill e2e found it).
		g.groups.with(key, func(s *groupState) { s.unfit = "" })
		g.handle.Activate(logger, g.pendingMembers(key, ""))
	})
}
