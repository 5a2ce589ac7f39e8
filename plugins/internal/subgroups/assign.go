// Package subgroups places a gang of gangs before any of its members is placed: a domain for the
// whole group (a block) and, inside it, one for each sub-group (a rack), so that placement is
// all or nothing at every level. Member by member, a group would strand a sub-group half placed
// across racks, or fill a block with sub-groups that leave no rack for the last one.
package subgroups

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/internal/domains"
)

// Need is what one sub-group's minimum still needs placed.
type Need struct {
	// Name of the sub-group.
	Name string
	// Constraint is the sub-group's own topology (nil: anywhere in the group's domain).
	Constraint *topology.Constraint
	// Missing members are still to be placed, each asking at least Smallest.
	Missing  int
	Smallest corev1.ResourceList
	// Total is what the missing members ask in all (at least Missing × Smallest).
	Total corev1.ResourceList
	// PlacedOn counts the sub-group's members already placed per node, so that a sub-group
	// partly running (a replica restarted, an elastic one growing) stays in its domain.
	PlacedOn map[string]int
	// Exclusive gives the sub-group a domain to itself: one that no other sub-group of the group
	// runs in or is placed in by this assignment (JobSet's exclusive placement). Exclusive
	// sub-groups are fitted before the others, which then keep out of their domains.
	Exclusive bool
}

// Assignment is where a group's minimum goes: the group's domain (nil when the group has no
// topology, or a preferred one that fell back to the whole cluster) and one per sub-group that
// has a topology of its own (a sub-group without one may use any node of the group's domain).
type Assignment struct {
	Group     *domains.Domain
	SubGroups map[string]*domains.Domain
	// Left are the sub-groups of the needs that did not fit (when minSubGroups of them did):
	// none of their members is placed in this attempt.
	Left []string
}

// Assign chooses the group's domain and its sub-groups' domains in it, so that at least
// minSubGroups of needs fit whole (needs lists the sub-groups still short of their minimum;
// those already whole need nothing). It fits as many of the needs as the domain holds; those
// it does not are Left. The group's domain is tried at each level of its
// constraint, narrowest first, best fit first (the domain left with the least free capacity,
// so that whole blocks stay free for the next big gang); in it, sub-groups are fitted largest
// first, each into the best-fit domain of its own levels, against the capacity the sub-groups
// before it took. A group with members placed already (a replica restarted while the others run)
// stays in the domain that holds them. Without an assignment, why says what is short, level by
// level.
func Assign(group *topology.Constraint, nodes []fwk.NodeInfo, placed map[string]int, needs []Need, minSubGroups int) (*Assignment, string) {
	ordered := largestFirst(needs)
	total := clusterTotals(nodes, ordered)
	if group == nil {
		a, _, why := assignWithin(nil, nodes, placed, ordered, minSubGroups, total)
		return a, why
	}
	var whys []string
	for _, level := range group.Levels {
		values, byValue := domains.At(level, nodes)
		if len(values) == 0 {
			whys = append(whys, fmt.Sprintf("no node has the label %s", level))
			continue
		}
		if running := valuesHolding(level, nodes, placed); len(running) > 0 {
			// The group runs in part: its domain is the one its placed members are in.
			if len(running) > 1 {
				whys = append(whys, fmt.Sprintf("its placed members are in %d %s domains", len(running), level))
				continue
			}
			values = running
		}
		// Best fit first: the domain with the least free capacity that holds the sub-groups.
		sort.SliceStable(values, func(i, j int) bool {
			return domains.FreeShare(byValue[values[i]], total) < domains.FreeShare(byValue[values[j]], total)
		})
		// Said of the domain that came closest: the one that holds the most sub-groups.
		var closest string
		closestFitted := -1
		// A domain that holds every need wins; else the one that holds the most of them, at
		// least minSubGroups (the group runs with fewer sub-groups, the others come later).
		var most *Assignment
		for _, v := range values {
			d := domains.Of(level, v, byValue[v])
			a, fitted, why := assignWithin(d, byValue[v], placed, ordered, minSubGroups, total)
			if a != nil && len(a.Left) == 0 {
				return a, ""
			}
			if a != nil && (most == nil || len(a.Left) < len(most.Left)) {
				most = a
			}
			if fitted > closestFitted {
				closest, closestFitted = fmt.Sprintf("no %s domain holds them (the closest, %s: %s)", level, d, why), fitted
			}
		}
		if most != nil {
			return most, ""
		}
		whys = append(whys, closest)
	}
	if !group.Required {
		if a, _, _ := assignWithin(nil, nodes, placed, ordered, minSubGroups, total); a != nil {
			return a, ""
		}
	}
	return nil, strings.Join(whys, "; ")
}

// assignWithin fits the sub-groups into the nodes of the group's domain d (nil: the whole
// cluster), exclusive ones first, each kind largest first, each against what those before it
// took, and says how many fit. placed counts the group's members placed per node.
func assignWithin(d *domains.Domain, nodes []fwk.NodeInfo, placed map[string]int, needs []Need, minSubGroups int, total map[corev1.ResourceName]int64) (*Assignment, int, string) {
	free := newFreeCapacity(nodes, needs)
	a := &Assignment{Group: d, SubGroups: map[string]*domains.Domain{}}
	fitted := 0
	var short []string
	// The nodes of the domains that exclusive sub-groups took: no other sub-group goes there.
	claimed := sets.New[string]()
	for _, n := range exclusiveFirst(needs) {
		available := nodes
		if claimed.Len() > 0 {
			available = slices.DeleteFunc(slices.Clone(nodes), func(node fwk.NodeInfo) bool { return claimed.Has(node.Node().Name) })
		}
		sub, why := fitSubGroup(n, available, placed, free, total)
		if why != "" {
			short = append(short, fmt.Sprintf("sub-group %s: %s", n.Name, why))
			a.Left = append(a.Left, n.Name)
			continue
		}
		if sub != nil {
			a.SubGroups[n.Name] = sub
			if n.Exclusive {
				claimed = claimed.Union(sub.Nodes)
			}
		}
		fitted++
	}
	if fitted < minSubGroups {
		return nil, fitted, fmt.Sprintf("%d of the %d sub-groups it needs fit (%s)", fitted, minSubGroups, strings.Join(short, "; "))
	}
	return a, fitted, ""
}

// fitSubGroup chooses the domain of one sub-group among the nodes of its group's domain and
// takes its members' capacity from free. A sub-group without a topology is fitted across those
// nodes and gets no domain of its own (nil). An exclusive one is offered no domain in which
// members of the group's other sub-groups are placed (placed counts the group's per node).
func fitSubGroup(n Need, nodes []fwk.NodeInfo, placed map[string]int, free *freeCapacity, total map[corev1.ResourceName]int64) (*domains.Domain, string) {
	if n.Constraint == nil {
		if !free.take(nodes, n) {
			return nil, fmt.Sprintf("the nodes' free capacity does not hold %d more members", n.Missing)
		}
		return nil, ""
	}
	var whys []string
	for _, level := range n.Constraint.Levels {
		values, byValue := domains.At(level, nodes)
		if len(values) == 0 && n.Exclusive && len(nodes) == 0 {
			whys = append(whys, fmt.Sprintf("no %s domain to itself holds its %d more members (the group's other sub-groups took every one)", level, n.Missing))
			continue
		}
		if len(values) == 0 {
			whys = append(whys, fmt.Sprintf("no node has the label %s", level))
			continue
		}
		// The domain that holds most of the sub-group's placed members first, then best fit:
		// the least free capacity left (capacity the sub-groups before it took counts as used).
		sort.SliceStable(values, func(i, j int) bool {
			pi, pj := placedIn(byValue[values[i]], n.PlacedOn), placedIn(byValue[values[j]], n.PlacedOn)
			if pi != pj {
				return pi > pj
			}
			return free.share(byValue[values[i]], total) < free.share(byValue[values[j]], total)
		})
		shared := 0
		for _, v := range values {
			if n.Exclusive && placedIn(byValue[v], placed) > placedIn(byValue[v], n.PlacedOn) {
				shared++
				continue
			}
			if free.take(byValue[v], n) {
				return domains.Of(level, v, byValue[v]), ""
			}
		}
		if n.Exclusive {
			why := fmt.Sprintf("no %s domain to itself holds its %d more members", level, n.Missing)
			if shared > 0 {
				why += fmt.Sprintf(" (%d hold other sub-groups of the group)", shared)
			}
			whys = append(whys, why)
			continue
		}
		whys = append(whys, fmt.Sprintf("no %s domain holds its %d more members", level, n.Missing))
	}
	if !n.Constraint.Required && free.take(nodes, n) {
		return nil, ""
	}
	return nil, strings.Join(whys, "; ")
}

// exclusiveFirst returns the needs with the exclusive ones first, each kind in its order: the
// others then keep out of the domains the exclusive ones took.
func exclusiveFirst(needs []Need) []Need {
	out := append([]Need(nil), needs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Exclusive && !out[j].Exclusive })
	return out
}

// largestFirst returns the needs largest first (by members, then by name): big sub-groups are the
// hardest to fit, and fitting them first leaves the gaps to the small ones.
func largestFirst(needs []Need) []Need {
	out := append([]Need(nil), needs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Missing != out[j].Missing {
			return out[i].Missing > out[j].Missing
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// valuesHolding lists the values of a level whose domains hold placed members.
func valuesHolding(level string, nodes []fwk.NodeInfo, placed map[string]int) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range nodes {
		if placed[n.Node().Name] == 0 {
			continue
		}
		if v, ok := n.Node().Labels[level]; ok && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func placedIn(nodes []fwk.NodeInfo, placedOn map[string]int) int {
	placed := 0
	for _, n := range nodes {
		placed += placedOn[n.Node().Name]
	}
	return placed
}

// clusterTotals sums the nodes' allocatable capacity of every resource a sub-group asks for, the
// scale of freeShare.
func clusterTotals(nodes []fwk.NodeInfo, needs []Need) map[corev1.ResourceName]int64 {
	total := map[corev1.ResourceName]int64{}
	for _, need := range needs {
		for name := range need.Total {
			total[name] = 0
		}
	}
	for _, n := range nodes {
		for name := range total {
			a, _ := capacity.Of(n, name)
			total[name] += a
		}
	}
	return total
}
