package gang

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/runtimeestimate"
)

// Backfill around reservations, as Slurm's backfill does: the nodes reserved for a group past its
// SLA (reservation.go) would stay idle until the pods on them end and the group's minimum fits.
// From the estimated ends of those pods (their groups' runtime estimates, their
// activeDeadlineSeconds), TephraGang works out when the reserved group could start at the earliest,
// its expected start. A workload of the group's priority or lower whose own estimate ends before
// then may run on the reserved nodes: it is gone by the time the group could start, so the group
// starts no later than it would have, unless an estimate was wrong (an overrun, which the PodGroup
// controller reports, after which that estimate is trusted no more). A workload without an
// estimate never backfills, and nothing backfills while the expected start cannot be told (a pod
// on the reserved nodes that the group needs gone has no trusted estimate).
//
// The expected start is the earliest time at which the reserved nodes, counted together, have the
// free capacity the group's minimum still needs, with each blocking pod's requests given back at
// its estimated end. Counted together, it may be earlier than the group really fits (one node's
// room cannot host another node's pod), which only makes backfill more careful.

// ReasonBackfilled is the event reason of a pod bound, by backfill, on nodes reserved for a group.
const ReasonBackfilled = "Backfilled"

// expectedStart is when a reserved group could start at the earliest; unknown says why it cannot
// be told, when it cannot.
type expectedStart struct {
	at      time.Time
	unknown string
}

// describe says it for people, in the group's events.
func (s expectedStart) describe() string {
	if s.unknown != "" {
		return "when it may start cannot be told (" + s.unknown + "), so nothing backfills its nodes"
	}
	return "it may start by " + s.at.UTC().Format(time.RFC3339) + ", from the runtime estimates of the pods on them; pods whose estimates end before then may backfill its nodes"
}

// expectedStartsKey holds, in a pod's scheduling cycle, the expected starts of the reserved groups
// whose nodes its Filter met: Filter runs for every node, in parallel.
const expectedStartsKey fwk.StateKey = Name + "/expectedStarts"

type expectedStarts struct {
	mu     sync.Mutex
	starts map[groupKey]expectedStart
}

func (e *expectedStarts) Clone() fwk.StateData { return e }

// expectedStartIn returns the group's expected start, worked out once per scheduling cycle.
func (g *groupManager) expectedStartIn(state fwk.CycleState, owner groupKey, r reservation, now time.Time) expectedStart {
	if state == nil {
		s := g.expectedStartOf(owner, r, now, g.inSnapshot)
		g.groups.with(owner, func(gs *groupState) { gs.expected = s })
		return s
	}
	data, err := state.Read(expectedStartsKey)
	if err != nil {
		data = &expectedStarts{starts: map[groupKey]expectedStart{}}
		state.Write(expectedStartsKey, data)
	}
	cache := data.(*expectedStarts)
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if s, ok := cache.starts[owner]; ok {
		return s
	}
	s := g.expectedStartOf(owner, r, now, g.inSnapshot)
	cache.starts[owner] = s
	g.groups.with(owner, func(gs *groupState) { gs.expected = s })
	return s
}

// nodeLookup finds a node's NodeInfo by name: the scheduler's snapshot, or the nodes a cycle has.
type nodeLookup func(name string) (fwk.NodeInfo, error)

// inSnapshot looks nodes up in the scheduler's snapshot of this cycle.
func (g *groupManager) inSnapshot(name string) (fwk.NodeInfo, error) {
	return g.handle.SnapshotSharedLister().NodeInfos().Get(name)
}

// amongNodes looks nodes up among those a cycle was given.
func amongNodes(nodes []fwk.NodeInfo) nodeLookup {
	byName := make(map[string]fwk.NodeInfo, len(nodes))
	for _, n := range nodes {
		byName[n.Node().Name] = n
	}
	return func(name string) (fwk.NodeInfo, error) {
		if n, ok := byName[name]; ok {
			return n, nil
		}
		return nil, fmt.Errorf("node %s is not among the cycle's nodes", name)
	}
}

// expectedStartOf works out when the reserved group could start: the earliest time at which its
// reserved nodes have the room its minimum still needs, the pods on them ending at their estimated
// ends.
func (g *groupManager) expectedStartOf(owner groupKey, r reservation, now time.Time, nodes nodeLookup) expectedStart {
	free := quota.Amounts{}
	need := quota.FromList(r.need)
	type ending struct {
		at       time.Time
		pod      string
		requests quota.Amounts
		unknown  bool
	}
	var endings []ending
	for _, name := range r.nodes {
		node, err := nodes(name)
		if err != nil {
			return expectedStart{unknown: fmt.Sprintf("reserved node %s is not in the scheduler's snapshot", name)}
		}
		for res := range need {
			alloc, used := capacity.Of(node, res)
			free[res] += max(alloc-used, 0)
		}
		for _, p := range node.GetPods() {
			pod := p.GetPod()
			if key, ok := groupOf(pod); ok && key == owner {
				continue
			}
			requests := quota.FromList(podRequests(pod))
			blocks := false
			for res := range need {
				if requests[res] > 0 {
					blocks = true
				}
			}
			if !blocks {
				continue
			}
			end, ok := g.estimatedEnd(pod, now)
			endings = append(endings, ending{at: end, pod: pod.Namespace + "/" + pod.Name, requests: requests, unknown: !ok})
		}
	}
	covers := func() bool {
		for res, v := range need {
			if free[res] < v {
				return false
			}
		}
		return true
	}
	if covers() {
		return expectedStart{at: now}
	}
	// Unknown ends last: the group may still be told to start before any of them must end.
	sort.SliceStable(endings, func(i, j int) bool {
		if endings[i].unknown != endings[j].unknown {
			return !endings[i].unknown
		}
		return endings[i].at.Before(endings[j].at)
	})
	for _, e := range endings {
		if e.unknown {
			return expectedStart{unknown: fmt.Sprintf("pod %s on its reserved nodes has no trusted runtime estimate", e.pod)}
		}
		free.Add(e.requests)
		if covers() {
			return expectedStart{at: maxTime(e.at, now)}
		}
	}
	return expectedStart{unknown: "its reserved nodes cannot hold its minimum even once every pod on them has ended"}
}

// estimatedEnd is when a pod is expected to end: the earlier of its activeDeadlineSeconds and its
// group's trusted runtime estimate. ok is false when it has neither.
func (g *groupManager) estimatedEnd(pod *corev1.Pod, now time.Time) (time.Time, bool) {
	end, ok := runtimeestimate.PodDeadline(pod, now)
	if key, grouped := groupOf(pod); grouped {
		if pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name); err == nil {
			if groupEnd, trusted := runtimeestimate.GroupEnd(pg, now); trusted && (!ok || groupEnd.Before(end)) {
				end, ok = groupEnd, true
			}
		}
	}
	return end, ok
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// backfillVerdict says why the pod may not run on nodes reserved for owner, or "" when it may
// backfill them: it outranks the group, or its estimate ends before the group's expected start.
func (g *groupManager) backfillVerdict(state fwk.CycleState, pod *corev1.Pod, owner groupKey, r reservation) string {
	if corev1helpers.PodPriority(pod) > r.priority {
		return ""
	}
	now := g.now()
	end, ok := g.estimatedEnd(pod, now)
	if !ok {
		return fmt.Sprintf("node is reserved for pod group %s, which %s; the pod has no runtime estimate, so it does not backfill the reservation", owner, r.waits())
	}
	start := g.expectedStartIn(state, owner, r, now)
	switch {
	case start.unknown != "":
		return fmt.Sprintf("node is reserved for pod group %s, which %s; its start cannot be told (%s), so nothing backfills it", owner, r.waits(), start.unknown)
	case end.After(start.at):
		return fmt.Sprintf("node is reserved for pod group %s, which %s and may start at %s; the pod's runtime estimate ends at %s, too late to backfill",
			owner, r.waits(), start.at.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	}
	return ""
}

// reportBackfill tells, once a pod is bound on a node reserved for another group, that it
// backfills the reservation: an event on the pod and on the group, which `kubectl tephra why`
// reads for the group.
func (g *groupManager) reportBackfill(logger klog.Logger, pod *corev1.Pod, nodeName string) {
	owner, r, held := g.groups.reservedFor(nodeName)
	if !held || v1alpha1.IsSystemPod(pod) || corev1helpers.PodPriority(pod) > r.priority {
		return
	}
	if key, grouped := groupOf(pod); grouped && key == owner {
		return
	}
	now := g.now()
	end, ok := g.estimatedEnd(pod, now)
	if !ok {
		return
	}
	// PostBind runs beside the next scheduling cycle, which updates the snapshot: the expected
	// start is the one Filter worked out.
	var start expectedStart
	g.groups.with(owner, func(gs *groupState) { start = gs.expected })
	when := "when the pods before it end"
	if start.unknown == "" && !start.at.IsZero() {
		when = "by " + start.at.UTC().Format(time.RFC3339)
	}
	backfilledPods.Inc()
	logger.V(2).Info("Pod backfills a reservation", "pod", klog.KObj(pod), "node", nodeName, "podGroup", owner.String(), "estimatedEnd", end)
	g.podEvent(pod, corev1.EventTypeNormal, ReasonBackfilled, fmt.Sprintf("%s: runs on node %s, reserved for pod group %s, until about %s (its runtime estimate); the group is expected to start %s",
		ReasonBackfilled, nodeName, owner, end.UTC().Format(time.RFC3339), when))
	if pg, err := g.podGroups.PodGroups(owner.namespace).Get(owner.name); err == nil {
		g.groupEvent(pg, corev1.EventTypeNormal, ReasonBackfilled, fmt.Sprintf("%s: pod %s/%s runs on reserved node %s until about %s (its runtime estimate); the group is expected to start %s",
			ReasonBackfilled, pod.Namespace, pod.Name, nodeName, end.UTC().Format(time.RFC3339), when))
	}
}
