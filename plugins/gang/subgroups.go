package gang

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
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
	minimum := v1alpha1.MinSubGroupsOf(&pg.Spec)
	if whole+len(needs) < minimum {
		return nil, "", fmt.Sprintf("%d of the %d sub-groups it needs have the members to be whole", whole+len(needs), minimum)
	}
	// Those short of their minimum that are not needs now have too few members to be whole.
	var short []string
	for _, sub := range pg.Spec.SubGroups {
		if count.placedBySubGroup[sub.Name] < int(sub.MinMember) && !slices.ContainsFunc(needs, func(n subgroups.Need) bool { return n.Name == sub.Name }) {
			short = append(short, sub.Name)
		}
	}
	if len(needs) == 0 {
		return &subgroups.Assignment{Left: short}, "", ""
	}
	// Above the group's minimum of sub-groups (the group runs), a sub-group is placed whole or
	// not at all: at least one of them must fit.
	a, why = subgroups.Assign(group, nodes, placed, needs, max(minimum-whole, 1))
	if a != nil {
		a.Left = append(a.Left, short...)
	}
	return a, "", why
}

// placeSubGroups narrows the nodes of a group with sub-groups to its domain. The group's domain
// and its sub-groups' are chosen together, before any member is placed; a member of a sub-group
// left out of the assignment (the group needs fewer sub-groups than it has, and this one does
// not fit now) is refused until the attempt is over.
func (g *groupManager) placeSubGroups(ctx context.Context, state fwk.CycleState, c *minimumCheck) *fwk.Status {
	if !c.inAttempt || (c.assigned == nil && c.subGroupDomains == nil) {
		a, problem, why := g.assignSubGroups(c.pg, c.constraint, c.count, c.allowed)
		if problem != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %s: %s", v1alpha1.ReasonInvalidPodGroup, c.key, problem))
		}
		if why != "" {
			// PostFilter may move pods to make domains whole for them (consolidate_subgroups.go).
			g.markSubGroupsFragmented(state, c)
			return g.cannotFit(ctx, c, fmt.Sprintf("%s: the sub-groups of pod group %s do not fit: %s", v1alpha1.ReasonNotEnoughResources, c.key, why))
		}
		c.assigned, c.subGroupDomains, c.subGroupsLeft = a.Group, a.SubGroups, sets.New(a.Left...)
		if c.subGroupDomains == nil {
			c.subGroupDomains = map[string]*domain{}
		}
		g.groups.with(c.key, func(s *groupState) {
			s.domain, s.subGroupDomains, s.subGroupsLeft = c.assigned, c.subGroupDomains, c.subGroupsLeft
		})
		klog.FromContext(ctx).V(4).Info("Sub-groups assigned", "podGroup", c.key.String(), "domain", c.assigned.String(),
			"subGroups", describeSubGroupDomains(c.subGroupDomains), "left", a.Left)
	}
	if left := leftOut(c.pod, c.key, c.subGroupsLeft); left != nil {
		return left
	}
	if c.assigned != nil {
		c.nodes = nodesOf(c.nodes, c.assigned)
	}
	return nil
}

// unknownSubGroup refuses a member of an upstream composite's child (its sub-group label names
// the child PodGroup its spec.schedulingGroup names) that the composite's mirror does not list
// among its subGroups yet: the adapter labels a new child's pods before it adds the child to the
// mirror, and placed meanwhile the member would be placed alone, not with its child. A change of
// the group brings it back (hints.go). (A Tephra Job's pods of a task whose sub-groups its group
// no longer lists, some of them having succeeded, are placed by the task's minimum instead.)
func unknownSubGroup(pg *v1alpha1.PodGroup, pod *corev1.Pod, key groupKey) *fwk.Status {
	sub := v1alpha1.SubGroupOf(pod)
	child := pod.Spec.SchedulingGroup
	if sub == "" || child == nil || child.PodGroupName == nil || *child.PodGroupName != sub || len(pg.Spec.SubGroups) == 0 ||
		slices.ContainsFunc(pg.Spec.SubGroups, func(s v1alpha1.SubGroup) bool { return s.Name == sub }) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: sub-group %s is not one of the subGroups of pod group %s; the pod waits for it",
		v1alpha1.ReasonWaitingForMembers, sub, key))
}

// leftOut refuses a member of a sub-group that the group's attempt leaves out (left): the group
// runs with fewer sub-groups than it has, and this one is placed whole, as a gang of its own,
// once it fits. UnschedulableAndUnresolvable: no eviction is made for it, and the attempt under
// way is not failed for it (PostFilter). The attempt's end brings it back (retryLeftOut), and so
// does capacity freed (hints.go).
func leftOut(pod *corev1.Pod, key groupKey, left sets.Set[string]) *fwk.Status {
	sub := v1alpha1.SubGroupOf(pod)
	if !left.Has(sub) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: sub-group %s of pod group %s waits: the group's minimum of sub-groups is placed without it, and it is placed whole once it fits",
		v1alpha1.ReasonNotEnoughResources, sub, key))
}

// takeLeftOutOnceSettled returns, and forgets, the sub-groups the group's last attempt left out,
// once none of its members waits at Permit or is on its way to bind: the attempt is over. Under
// the group's lock.
func (s *groupState) takeLeftOutOnceSettled() sets.Set[string] {
	if len(s.waiting) > 0 || len(s.assumed) > 0 || s.subGroupsLeft.Len() == 0 {
		return nil
	}
	left := s.subGroupsLeft
	s.subGroupsLeft = nil
	return left
}

// retryLeftOut brings back the pending members of the sub-groups an attempt that is over left out
// (takeLeftOutOnceSettled). They were refused UnschedulableAndUnresolvable while it went on, each
// waiting for an event that lets its sub-group fit; but the sub-group may fit already (it lacked
// members when the attempt began, and they came meanwhile), and then no event comes: seen in
// TestSingleTakesAReplicaAboveTheMinimumNotTheJob (test/e2e/topology), where the fourth replica
// of a running Job never started.
func (g *groupManager) retryLeftOut(logger klog.Logger, key groupKey, left sets.Set[string]) {
	if left.Len() == 0 || !g.queueRunning.Load() {
		return
	}
	pods := g.pendingMembers(key, "")
	maps.DeleteFunc(pods, func(_ string, pod *corev1.Pod) bool { return !left.Has(v1alpha1.SubGroupOf(pod)) })
	if len(pods) > 0 {
		logger.V(4).Info("Retrying sub-groups left out of an attempt that is over", "podGroup", key.String(), "subGroups", sets.List(left), "pods", len(pods))
		g.handle.Activate(logger, pods)
	}
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
