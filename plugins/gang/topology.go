package gang

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/bandwidth"
	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/internal/domains"
)

// domain is where a group's minimum is placed: the nodes that share one value of a level's
// label (a rack, a block).
type domain = domains.Domain

// constraintOf resolves the group's topology (docs/topology.md), or else the Kueue topology
// annotations of the member; problem says why it cannot be met, and the group is then not placed.
func (g *groupManager) constraintOf(pg *v1alpha1.PodGroup, member *corev1.Pod) (*topology.Constraint, string) {
	var get func(string) (*v1alpha1.Topology, error)
	if g.topologies != nil {
		get = g.topologies.Get
	}
	return topology.ForGroup(pg, member, topology.ListerLookup(get))
}

// minimumNeeds is what a group's minimum still needs placed: in all (need), and member by member
// (missing members of at least smallest each), and the datasets its members read (docs/io.md).
type minimumNeeds struct {
	need     corev1.ResourceList
	smallest corev1.ResourceList
	missing  int
	data     datasets.Demand
	// bandwidth are the domains' limits of IO bandwidth (internal/bandwidth) and what the pods on
	// them request, when the minimum requests some.
	bandwidth []bandwidth.Limit
	use       bandwidth.Use
}

// carries says whether a domain's network carries the minimum's bandwidth beside what the pods
// on it request: the limits of the levels its nodes all share, its own and the wider ones it is
// in.
func (m minimumNeeds) carries(members []fwk.NodeInfo) bool {
	requests := bandwidth.RequestsOf(m.need)
	if len(m.bandwidth) == 0 || len(requests) == 0 || len(members) == 0 {
		return true
	}
	shared := map[string]string{}
	for _, l := range m.bandwidth {
		value, ok := members[0].Node().Labels[l.Level]
		for _, n := range members[1:] {
			ok = ok && n.Node().Labels[l.Level] == value
		}
		if ok {
			shared[l.Level] = value
		}
	}
	return m.use.Exceeded(m.bandwidth, shared, requests) == ""
}

// dataIn is how much of the members' data a domain's nodes cache: the part of the datasets each
// caches, summed over the nodes (0 for a group that declares none).
func (m minimumNeeds) dataIn(nodes []fwk.NodeInfo) float64 {
	if m.data.None() {
		return 0
	}
	sum := 0.0
	for _, n := range nodes {
		cached, _ := m.data.CachedOn(n.Node().Labels)
		sum += float64(cached) / float64(len(m.data.Datasets))
	}
	return sum
}

// holds says whether nodes' free capacity holds the minimum: in total, and member by member.
func (m minimumNeeds) holds(nodes []fwk.NodeInfo) bool {
	if lackingCapacity(m.need, nodes) != "" {
		return false
	}
	return m.missing <= 0 || m.smallest == nil || membersThatFit(m.smallest, nodes, m.missing) >= m.missing
}

// chooseDomain assigns a group's whole minimum to one domain before any member is placed: the
// narrowest level of the constraint with a domain that holds it, and among those the domain whose
// nodes cache most of the members' data (a job's data outweighs keeping a rack whole, as
// TephraIO's weight does on nodes), then the one left with the least free capacity (best fit, so
// that whole racks and blocks stay free for the next big gang), then the one with most of the
// group's placed pods, then by name. Without a
// domain that holds it, a required constraint answers why, level by level; a preferred one alone
// lets the group use the whole cluster (nil, "").
func chooseDomain(c *topology.Constraint, nodes []fwk.NodeInfo, m minimumNeeds, placedOn func(node string) int, previous *domain) (*domain, string) {
	if previous != nil && slices.Contains(c.Levels, previous.Level) {
		var members []fwk.NodeInfo
		for _, n := range nodes {
			if v, ok := n.Node().Labels[previous.Level]; ok && v == previous.Value {
				members = append(members, n)
			}
		}
		if len(members) > 0 && m.holds(members) {
			return domains.Of(previous.Level, previous.Value, members), ""
		}
	}
	total := map[corev1.ResourceName]int64{}
	for _, n := range nodes {
		for name := range m.need {
			a, _ := capacity.Of(n, name)
			total[name] += a
		}
	}
	var why []string
	for _, level := range c.Levels {
		values, byValue := domains.At(level, nodes)
		var best *domain
		var bestFree, bestData float64
		bestPlaced := -1
		var largest string
		var largestFree float64 = -1
		uplinkShort := 0
		for _, v := range values {
			members := byValue[v]
			free := domains.FreeShare(members, total)
			if free > largestFree {
				largest, largestFree = v, free
			}
			if !m.holds(members) {
				continue
			}
			if !m.carries(members) {
				uplinkShort++
				continue
			}
			placed := 0
			if placedOn != nil {
				for _, n := range members {
					placed += placedOn(n.Node().Name)
				}
			}
			data := m.dataIn(members)
			if best == nil || data > bestData || data == bestData && (free < bestFree || free == bestFree && placed > bestPlaced) {
				best, bestFree, bestPlaced, bestData = domains.Of(level, v, members), free, placed, data
			}
		}
		if best != nil {
			return best, ""
		}
		switch {
		case len(values) == 0:
			why = append(why, fmt.Sprintf("no node has the label %s", level))
		case uplinkShort > 0:
			why = append(why, fmt.Sprintf("no %s domain holds it (%d with room lack the network bandwidth it requests)", level, uplinkShort))
		default:
			why = append(why, fmt.Sprintf("no %s domain holds it (the most free: %s in %s=%s)", level, freeOf(byValue[largest], m.need), level, largest))
		}
	}
	if !c.Required {
		return nil, ""
	}
	return nil, strings.Join(why, "; ")
}

// reservationDomain is where a topology gang past its SLA may reserve nodes: of the constraint's
// levels, narrowest first, the first with a domain whose allocatable capacity could ever hold the
// minimum, and of those the one with the most free now (it fills soonest). Without one, no node
// (nil): a reservation across domains would hold capacity the gang can never use.
func reservationDomain(c *topology.Constraint, nodes []fwk.NodeInfo, need corev1.ResourceList) []fwk.NodeInfo {
	total := map[corev1.ResourceName]int64{}
	for _, n := range nodes {
		for name := range need {
			a, _ := capacity.Of(n, name)
			total[name] += a
		}
	}
	for _, level := range c.Levels {
		values, byValue := domains.At(level, nodes)
		var best []fwk.NodeInfo
		bestFree := -1.0
		for _, v := range values {
			alloc := map[corev1.ResourceName]int64{}
			for _, n := range byValue[v] {
				for name := range need {
					a, _ := capacity.Of(n, name)
					alloc[name] += a
				}
			}
			if !coversAll(alloc, need) {
				continue
			}
			if free := domains.FreeShare(byValue[v], total); free > bestFree {
				best, bestFree = byValue[v], free
			}
		}
		if best != nil {
			return best
		}
	}
	if !c.Required {
		return nodes
	}
	return nil
}

// elasticInDomain sends a member above its group's minimum to the group's domain when a node
// there has room for it; otherwise it may go anywhere (the domain binds the minimum only).
func elasticInDomain(pod *corev1.Pod, nodes []fwk.NodeInfo, d *domain) *fwk.PreFilterResult {
	requests := podRequests(pod)
	requests[corev1.ResourcePods] = resource.MustParse("1")
	if membersThatFit(requests, nodesOf(nodes, d), 1) >= 1 {
		return onDomain(nil, d)
	}
	return nil
}

// freeOf formats the nodes' free capacity of the needed resources, e.g. "cpu 16".
func freeOf(nodes []fwk.NodeInfo, need corev1.ResourceList) string {
	var parts []string
	for _, name := range sortedNames(need) {
		if name == corev1.ResourcePods {
			continue
		}
		var free int64
		for _, n := range nodes {
			if a, u := capacity.Of(n, name); a > u {
				free += a - u
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s", name, quota.Format(name, free)))
	}
	return strings.Join(parts, ", ")
}

// onDomain restricts the members of a group to its domain (and, within it, to its reserved
// nodes, if any).
func onDomain(reserved []string, d *domain) *fwk.PreFilterResult {
	if d == nil {
		return onReserved(reserved)
	}
	if reserved == nil {
		// The domain's set is never changed once made, and the framework copies what it merges.
		return &fwk.PreFilterResult{NodeNames: d.Nodes}
	}
	return &fwk.PreFilterResult{NodeNames: d.Nodes.Intersection(sets.New(reserved...))}
}

// nodesFor keeps the nodes the pod's node selector and required affinity allow: a domain of
// nodes the gang may not use would hold it in vain. (Its members share the pod's template.)
func nodesFor(pod *corev1.Pod, nodes []fwk.NodeInfo) []fwk.NodeInfo {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	out := make([]fwk.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		if ok, _ := affinity.Match(n.Node()); ok {
			out = append(out, n)
		}
	}
	return out
}

// nodesOf keeps the nodes of a domain.
func nodesOf(nodes []fwk.NodeInfo, d *domain) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range nodes {
		if d.Nodes.Has(n.Node().Name) {
			out = append(out, n)
		}
	}
	return out
}

// placedOn counts, per node, the group's pods placed there, for a domain that already holds some
// (elastic growth, a restart) to win a tie.
// minimumNeedsOf is what the rest of a topology gang's minimum needs of a domain: its requests,
// member by member, its members' data and the domains' bandwidth.
func (g *groupManager) minimumNeedsOf(c *minimumCheck) minimumNeeds {
	m := minimumNeeds{need: c.need, missing: int(c.pg.Spec.MinMember) - c.count.placed, data: g.dataOf(c.pod, c.pg.Annotations)}
	m.bandwidth, m.use = g.bandwidthOf(c.need, c.allowed)
	if m.missing > 0 && len(c.count.unplaced) >= m.missing {
		m.smallest = smallestRequests(c.unplacedRequests)
	}
	return m
}

// dataOf is the datasets a member declares, or its group (group: the group's annotations) for it
// (internal/datasets); none when the declaration is malformed, which TephraIO refuses with an
// event.
func (g *groupManager) dataOf(pod *corev1.Pod, group map[string]string) datasets.Demand {
	var claims datasets.ClaimLabels
	if g.claims != nil {
		claims = func(namespace, name string) map[string]string {
			claim, err := g.claims.PersistentVolumeClaims(namespace).Get(name)
			if err != nil {
				return nil
			}
			return claim.Labels
		}
	}
	d, err := datasets.Of(pod, group, claims)
	if err != nil {
		return datasets.Demand{}
	}
	return d
}

// bandwidthOf is what a gang's domain choice needs to keep the domains' IO bandwidth: their
// limits from the default Topology, and what the pods on the nodes request (none when the gang
// requests no bandwidth, or no level gives one).
func (g *groupManager) bandwidthOf(need corev1.ResourceList, nodes []fwk.NodeInfo) ([]bandwidth.Limit, bandwidth.Use) {
	if g.topologies == nil || len(bandwidth.RequestsOf(need)) == 0 {
		return nil, nil
	}
	t, err := g.topologies.Get(v1alpha1.DefaultTopology)
	if err != nil {
		return nil, nil
	}
	limits := bandwidth.LimitsOf(t)
	if len(limits) == 0 {
		return nil, nil
	}
	return limits, bandwidth.UseOf(limits, nodes)
}

func (g *groupManager) placedOn(key groupKey) func(node string) int {
	objs, _ := g.members.ByIndex(podGroupIndex, key.String())
	counts := map[string]int{}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			counts[pod.Spec.NodeName]++
		}
	}
	return func(node string) int { return counts[node] }
}
