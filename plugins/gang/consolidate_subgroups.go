package gang

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/consolidation"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/domains"
)

// Consolidation for a gang with sub-groups. Its minimum is its sub-groups (minSubGroups of them),
// each whole in one domain of its topology: the free capacity may hold them in total and still no
// rack hold one. PreFilter, when subgroups.Assign finds no domains for them but the nodes the
// group may use hold their members in total, marks the cycle with what each needed sub-group
// still needs; PostFilter (consolidate) asks consolidation.MakeForSubGroups for a domain for each,
// in one of the group's domains, made room in by moving pods out to nodes outside every domain
// chosen. The nodes that then hold the sub-groups' members are reserved for the group, so that
// the next Assign, over the reserved nodes, finds them.

// fragmentedSubGroup is what a sub-group short of its minimum still needs, for the planner.
type fragmentedSubGroup struct {
	name string
	// members are the requests of its members not placed, of which its minimum needs missing.
	members    []corev1.ResourceList
	missing    int
	constraint *topology.Constraint
	exclusive  bool
}

// markSubGroupsFragmented records, for PostFilter, that the sub-groups the group needs have no
// domains but fit the free capacity of the nodes it may use in total. Not for a group whose
// members claim devices, nor one with a sub-group topology that cannot be resolved: the planner
// sees neither.
func (g *groupManager) markSubGroupsFragmented(state fwk.CycleState, c *minimumCheck) {
	if state == nil || slices.ContainsFunc(c.count.unplaced, devices.UsesDevices) || lackingCapacity(c.need, c.allowed) != "" {
		return
	}
	var get func(string) (*v1alpha1.Topology, error)
	if g.topologies != nil {
		get = g.topologies.Get
	}
	lookup := topology.ListerLookup(get)
	unplaced := map[string][]*corev1.Pod{}
	for _, pod := range c.count.unplaced {
		sub := v1alpha1.SubGroupOf(pod)
		unplaced[sub] = append(unplaced[sub], pod)
	}
	var subs []fragmentedSubGroup
	whole := 0
	for _, sub := range c.pg.Spec.SubGroups {
		missing := int(sub.MinMember) - c.count.placedBySubGroup[sub.Name]
		if missing <= 0 {
			whole++
			continue
		}
		if len(unplaced[sub.Name]) < missing {
			continue
		}
		constraint, problem := topology.Resolve(sub.Topology, lookup)
		if problem != "" {
			return
		}
		subs = append(subs, fragmentedSubGroup{name: sub.Name, members: sortedRequests(unplaced[sub.Name]), missing: missing,
			constraint: constraint, exclusive: sub.Exclusive})
	}
	needed := max(v1alpha1.MinSubGroupsOf(&c.pg.Spec)-whole, 1)
	if len(subs) < needed {
		return // too few have the members to be whole: moving pods would not help
	}
	state.Write(fragmentedKey, &fragmented{members: c.unplacedRequests, need: c.need,
		subGroups: subs, subGroupsNeeded: needed, group: c.constraint})
}

// planSubGroups plans, in each of the group's domains (the whole cluster when it has no
// topology), the moves that give each sub-group it needs a domain, and keeps the plan of fewest
// moves.
func (g *groupManager) planSubGroups(problem consolidation.Problem, frag *fragmented, infos []fwk.NodeInfo) (consolidation.SubGroupPlan, consolidation.Verdict, string) {
	base := consolidation.SubGroupProblem{Need: frag.subGroupsNeeded, Nodes: problem.Nodes, Movable: problem.Movable,
		Spare: problem.Spare, MaxMoves: problem.MaxMoves}
	var best consolidation.SubGroupPlan
	verdict, why := consolidation.NoPlan, "no domain of the group's topology holds its sub-groups"
	found := false
	for _, groupDomain := range groupDomainsOf(frag.group, infos) {
		p := base
		p.SubGroups = subGroupsIn(frag.subGroups, groupDomain, infos)
		plan, v, w := consolidation.MakeForSubGroups(p)
		if v != consolidation.Planned {
			if !found {
				verdict, why = v, groupDomain.String()+": "+w
			}
			continue
		}
		if !found || len(plan.Moves) < len(best.Moves) {
			best, verdict, why, found = plan, v, "", true
		}
	}
	return best, verdict, why
}

// groupDomainsOf lists the domains the group may be placed in, each level of its topology in
// turn, and the whole cluster (nil) when it has none or only prefers one.
func groupDomainsOf(group *topology.Constraint, infos []fwk.NodeInfo) []*domains.Domain {
	if group == nil {
		return []*domains.Domain{nil}
	}
	var out []*domains.Domain
	for _, level := range group.Levels {
		values, byValue := domains.At(level, infos)
		for _, v := range values {
			out = append(out, domains.Of(level, v, byValue[v]))
		}
	}
	if !group.Required {
		out = append(out, nil)
	}
	return out
}

// subGroupsIn describes the sub-groups to the planner, each with the domains of its topology's
// first level among the nodes of the group's domain (nil: the whole cluster), or that domain
// itself when it has no topology.
func subGroupsIn(subs []fragmentedSubGroup, groupDomain *domains.Domain, infos []fwk.NodeInfo) []consolidation.SubGroup {
	nodes := infos
	if groupDomain != nil {
		nodes = nodesOf(infos, groupDomain)
	}
	out := make([]consolidation.SubGroup, 0, len(subs))
	for _, sub := range subs {
		s := consolidation.SubGroup{Name: sub.name, Need: sub.missing, Exclusive: sub.exclusive}
		for _, requests := range sub.members {
			m := quota.FromList(requests)
			m[corev1.ResourcePods] = 1
			s.Members = append(s.Members, m)
		}
		if sub.constraint == nil {
			s.Domains = []consolidation.Domain{{Name: groupDomain.String(), Nodes: namesOf(nodes)}}
		} else {
			level := sub.constraint.Levels[0]
			values, byValue := domains.At(level, nodes)
			for _, v := range values {
				s.Domains = append(s.Domains, consolidation.Domain{Name: level + "=" + v, Nodes: namesOf(byValue[v])})
			}
		}
		out = append(out, s)
	}
	return out
}

func namesOf(nodes []fwk.NodeInfo) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Node().Name
	}
	return out
}
