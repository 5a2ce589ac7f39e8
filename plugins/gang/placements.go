package gang

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/domains"
)

// With kube-scheduler's TopologyAwareWorkloadScheduling gate (and GenericWorkload), a pod-group
// cycle first asks one PlacementGenerate plugin for the sets of nodes to try the group on, tries
// the group on each, and lets the PlacementScore plugins choose among those that hold it. Upstream's
// own generator offers every domain of the group's schedulingConstraints.topology key, and its
// scorer prefers the one that places the most pods: it evaluates the whole group once per domain
// (50 times per gang on upstream's 5000-node benchmark), and breaks ties at random.
//
// TephraGang offers its own topology choice there instead (chooseDomain, as for Tephra's
// PodGroups): only domains whose free capacity holds the minimum, the one whose nodes cache most
// of the group's data first (docs/io.md), then best fit, so that whole racks stay free for the
// next big gang; and when none does, it says why, level by level, and the group goes to
// PodGroupPostFilter. It offers the best-fit domain alone, which is the choice
// TephraGang would make; a group whose cycle then finds it infeasible (a port or an affinity the
// arithmetic does not see) is offered every domain that holds it in its next cycle.

// placementChoiceKey holds, in a pod-group cycle's state, what GeneratePlacements measured for
// the scorer.
const placementChoiceKey fwk.StateKey = Name + "/placements"

// placementChoice is what the generator measured of each domain offered, by placement name: how
// much of the group's data its nodes cache (more is better) and its free share (less is a better
// fit).
type placementChoice struct {
	data, free map[string]float64
}

func (c *placementChoice) Clone() fwk.StateData { return c }

// narrowedGroups are the upstream PodGroups offered only their best-fit domain whose cycle has not
// since found a feasible placement: their next cycle is offered every domain that holds them.
// A group's entry goes with its first feasible placement, or with its mirror (forgetGroup).
type narrowedGroups struct {
	mu     sync.Mutex
	groups map[groupKey]bool
}

func (n *narrowedGroups) take(key groupKey) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	was := n.groups[key]
	delete(n.groups, key)
	return was
}

func (n *narrowedGroups) mark(key groupKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.groups == nil {
		n.groups = map[groupKey]bool{}
	}
	n.groups[key] = true
}

// generatePlacements offers the domains of an upstream PodGroup's topology constraint that hold
// its minimum, the one that caches most of its data first, then best fit; parent unchanged for a
// group without one.
func (g *groupManager) generatePlacements(_ context.Context, state fwk.PodGroupCycleState, group fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	pg := group.GetPodGroup()
	if pg == nil || pg.Spec.SchedulingConstraints == nil || len(pg.Spec.SchedulingConstraints.Topology) == 0 {
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
	}
	// The API allows one constraint, required; its key is the level (topology.Resolve of a
	// required key alone).
	constraint := &topology.Constraint{Levels: []string{pg.Spec.SchedulingConstraints.Topology[0].Key}, Required: true}
	level := constraint.Levels[0]
	key := pg.Namespace + "/" + pg.Name

	var scheduled []*corev1.Pod
	if st, err := g.handle.SnapshotSharedLister().PodGroupStates().Get(pg.Namespace, pg.Name); err == nil {
		scheduled = st.ScheduledPods()
	}
	if len(scheduled) > 0 {
		// Members already placed fix the domain: the rest join them.
		return g.placementOfPlaced(level, key, scheduled, parent)
	}

	pods := group.GetUnscheduledPods()
	reserved := false
	g.groups.with(groupKey{pg.Namespace, pg.Name}, func(s *groupState) { reserved = s.reserved != nil })
	if len(pods) == 0 || reserved {
		// A group past its SLA goes to its reserved nodes, which are in one domain
		// (reservationDomain); PreFilter sends its pods there.
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
	}
	minCount := 1
	if pg.Spec.SchedulingPolicy.Gang != nil {
		minCount = int(pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
	requests := sortedRequests(pods)
	nodes := nodesFor(pods[0], parent.Nodes) // members share their template's node affinity
	if g.devices != nil && slices.ContainsFunc(pods, devices.UsesDevices) {
		requests = g.requestsWithDevices(pods)
		nodes = g.devices.WithDevices(nodes)
	}
	// Members share their template's declaration of their data, or the PodGroup's.
	minimum := minimumNeeds{need: corev1.ResourceList{}, missing: minCount, data: g.dataOf(pods[0], pg.Annotations)}
	for i := 0; i < minCount && i < len(requests); i++ {
		addTo(minimum.need, requests[i])
	}
	if len(requests) >= minCount {
		minimum.smallest = smallestRequests(requests)
	}

	total := map[corev1.ResourceName]int64{}
	for _, n := range nodes {
		for name := range minimum.need {
			a, _ := capacity.Of(n, name)
			total[name] += a
		}
	}
	values, byValue := domains.At(level, nodes)
	var candidates []domainCandidate
	for _, v := range values {
		if minimum.holds(byValue[v]) {
			candidates = append(candidates, domainCandidate{v, minimum.dataIn(byValue[v]), domains.FreeShare(byValue[v], total)})
		}
	}
	if len(candidates) == 0 {
		// chooseDomain words the reason as it does for Tephra's PodGroups.
		_, why := chooseDomain(constraint, nodes, minimum, nil, nil)
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the minimum of pod group %s needs %s: %s", v1alpha1.ReasonNotEnoughResources, key, formatRequests(minimum.need), why))
	}
	sort.SliceStable(candidates, func(i, j int) bool { return candidates[i].before(candidates[j]) })
	if !g.narrowed.take(groupKey{pg.Namespace, pg.Name}) {
		candidates = candidates[:1]
		g.narrowed.mark(groupKey{pg.Namespace, pg.Name})
	}

	// Placements hold the snapshot's own nodes (the pod-group cycle assumes pods on them), not
	// the copies that count devices.
	snapshot := map[string]fwk.NodeInfo{}
	for _, n := range parent.Nodes {
		snapshot[n.Node().Name] = n
	}
	choice := &placementChoice{data: map[string]float64{}, free: map[string]float64{}}
	placements := make([]*fwk.Placement, 0, len(candidates))
	for _, c := range candidates {
		name := level + "=" + c.value
		members := make([]fwk.NodeInfo, 0, len(byValue[c.value]))
		for _, n := range byValue[c.value] {
			members = append(members, snapshot[n.Node().Name])
		}
		placements = append(placements, &fwk.Placement{Name: name, Nodes: members})
		choice.data[name], choice.free[name] = c.data, c.free
	}
	state.Write(placementChoiceKey, choice)
	return &fwk.GeneratePlacementsResult{Placements: placements}, nil
}

// domainCandidate is a domain that holds a group's minimum: how much of the group's data its
// nodes cache, and its free share.
type domainCandidate struct {
	value      string
	data, free float64
}

// before says whether c is offered before o: more of the data cached, then the better fit.
func (c domainCandidate) before(o domainCandidate) bool {
	if c.data != o.data {
		return c.data > o.data
	}
	return c.free < o.free
}

// placementOfPlaced offers the one domain the group's placed members are in.
func (g *groupManager) placementOfPlaced(level, key string, scheduled []*corev1.Pod, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	nodes := g.handle.SnapshotSharedLister().NodeInfos()
	value := ""
	for _, pod := range scheduled {
		n, err := nodes.Get(pod.Spec.NodeName)
		if err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("node of placed member %s/%s: %w", pod.Namespace, pod.Name, err))
		}
		v, ok := n.Node().Labels[level]
		switch {
		case !ok:
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %s has member %s on node %s, which has no label %s", v1alpha1.ReasonInvalidPodGroup, key, pod.Name, n.Node().Name, level))
		case value != "" && v != value:
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %s has members in two %s domains, %s and %s", v1alpha1.ReasonInvalidPodGroup, key, level, value, v))
		}
		value = v
	}
	var members []fwk.NodeInfo
	for _, n := range parent.Nodes {
		if v, ok := n.Node().Labels[level]; ok && v == value {
			members = append(members, n)
		}
	}
	if len(members) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: pod group %s has members in %s=%s, which has no node left to place the rest", v1alpha1.ReasonNotEnoughResources, key, level, value))
	}
	return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{{Name: level + "=" + value, Nodes: members}}}, nil
}

// scorePlacement counts the group's pods a placement places (with those placed before it):
// normalizePlacementScores ranks by it first.
func (g *groupManager) scorePlacement(_ context.Context, _ fwk.PlacementCycleState, group fwk.PodGroupInfo, assignments *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	// A placement is feasible: the group's next cycle starts from its best fit again.
	g.narrowed.take(groupKey{group.GetNamespace(), group.GetName()})
	placed := int64(len(assignments.ProposedAssignments))
	if st, err := g.handle.SnapshotSharedLister().PodGroupStates().Get(group.GetNamespace(), group.GetName()); err == nil {
		placed += int64(st.ScheduledPodsCount())
	}
	return placed, nil
}

// normalizePlacementScores ranks the feasible placements: most pods placed, then most of the
// group's data cached, then the best fit (least free capacity left), both as measured when the
// placements were generated, then by name, so that the choice never depends on chance. The best
// gets MaxScore, the worst MinScore.
func (g *groupManager) normalizePlacementScores(_ context.Context, state fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	choice := &placementChoice{}
	if data, err := state.Read(placementChoiceKey); err == nil {
		choice = data.(*placementChoice)
	}
	cached, free := choice.data, choice.free
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := scores[order[a]], scores[order[b]]
		if x.Score != y.Score {
			return x.Score > y.Score
		}
		if cx, cy := cached[x.Placement.Name], cached[y.Placement.Name]; cx != cy {
			return cx > cy
		}
		if fx, fy := free[x.Placement.Name], free[y.Placement.Name]; fx != fy {
			return fx < fy
		}
		return x.Placement.Name < y.Placement.Name
	})
	n := int64(len(scores))
	for rank, i := range order {
		if n == 1 {
			scores[i].Score = fwk.MaxScore
			continue
		}
		scores[i].Score = fwk.MaxScore - int64(rank)*(fwk.MaxScore-fwk.MinScore)/(n-1)
	}
	return nil
}
