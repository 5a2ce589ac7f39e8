package gang

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/internal/subgroups"
)

// A group with sub-groups (spec.subGroups, docs/gang.md "Gangs of gangs") is placed by the same
// attempt as any gang, one member per cycle and all held at Permit until the minimum is placed;
// what differs is where each member may go. Before the first member of an attempt is placed,
// subgroups.Assign chooses the group's domain and, in it, a domain per sub-group that holds the
// sub-group's minimum; each member is then offered its sub-group's domain only.

// assignSubGroups chooses where the sub-groups of pg that are short of their minimum go, among
// nodes (those the member may use). problem says a sub-group's topology cannot be resolved; why
// says the sub-groups do not fit.
func (g *groupManager) assignSubGroups(pg *v1alpha1.PodGroup, group *topology.Constraint, count memberCount, nodes []fwk.NodeInfo) (a *subgroups.Assignment, problem, why string) {
	var get func(string) (*v1alpha1.Topology, error)
	if g.topologies != nil {
		get = g.topologies.Get
	}
	lookup := topology.ListerLookup(get)
	unplaced := map[string][]*corev1.Pod{}
	for _, pod := range count.unplaced {
		sub := v1alpha1.SubGroupOf(pod)
		unplaced[sub] = append(unplaced[sub], pod)
	}
	placed, placedOn := map[string]int{}, map[string]map[string]int{}
	for _, pod := range count.placedPods {
		if pod.Spec.NodeName == "" {
			continue
		}
		placed[pod.Spec.NodeName]++
		sub := v1alpha1.SubGroupOf(pod)
		if placedOn[sub] == nil {
			placedOn[sub] = map[string]int{}
		}
		placedOn[sub][pod.Spec.NodeName]++
	}
	var needs []subgroups.Need
	whole := 0
	for _, sub := range pg.Spec.SubGroups {
		missing := int(sub.MinMember) - count.placedBySubGroup[sub.Name]
		if missing <= 0 {
			whole++
			continue
		}
		if len(unplaced[sub.Name]) < missing {
			continue // not enough members exist yet: it cannot be whole in this attempt
		}
		c, p := topology.Resolve(sub.Topology, lookup)
		if p != "" {
			return nil, fmt.Sprintf("sub-group %s: %s", sub.Name, p), ""
		}
		requests := sortedRequests(unplaced[sub.Name])[:missing]
		total := corev1.ResourceList{}
		for _, r := range requests {
			addTo(total, r)
		}
		needs = append(needs, subgroups.Need{
			Name: sub.Name, Constraint: c, Missing: missing,
			Smallest: smallestRequests(requests), Total: total, PlacedOn: placedOn[sub.Name],
			Exclusive: sub.Exclusive,
		})
	}
	want := len(pg.Spec.SubGroups) - whole
	if want <= 0 {
		return &subgroups.Assignment{}, "", ""
	}
	if len(needs) < want {
		return nil, "", fmt.Sprintf("%d of the %d sub-groups it needs have the members to be whole", whole+len(needs), len(pg.Spec.SubGroups))
	}
	a, why = subgroups.Assign(group, nodes, placed, needs, want)
	return a, "", why
}

// subGroupDomain is where a member of a group with sub-groups may go: its sub-group's domain,
// else the group's (nil: anywhere).
func subGroupDomain(pod *corev1.Pod, group *domain, bySubGroup map[string]*domain) *domain {
	if d, ok := bySubGroup[v1alpha1.SubGroupOf(pod)]; ok {
		return d
	}
	return group
}

// describeSubGroupDomains lists the sub-groups' domains for a log line: "replica-0 in rack=r1, ...".
func describeSubGroupDomains(bySubGroup map[string]*domain) string {
	parts := make([]string, 0, len(bySubGroup))
	for _, name := range slices.Sorted(maps.Keys(bySubGroup)) {
		parts = append(parts, fmt.Sprintf("%s in %s", name, bySubGroup[name]))
	}
	return strings.Join(parts, ", ")
}
