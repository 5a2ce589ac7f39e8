package consolidation

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tephra-dev/tephra/internal/quota"
)

// A gang with sub-groups (docs/gang.md, "Gangs of gangs") needs more than whole nodes: each
// sub-group it still needs must have its missing members in one domain of its topology (a rack).
// Its free capacity may hold every sub-group in total and still no rack hold one: 3 GPUs free on
// each node of every rack, for replicas of 4 members of 2 GPUs that each need a rack of two nodes
// of 4. MakeForSubGroups plans for each needed sub-group a domain in which its members fit once
// movable pods are moved out of it, and sends the moved pods to nodes outside every domain chosen.

// Domain is a domain a sub-group may be placed in: a value of its topology's level, and the names
// of the nodes that have it (within the group's domain).
type Domain struct {
	Name  string
	Nodes []string
}

// SubGroup is a sub-group the gang needs made whole.
type SubGroup struct {
	Name string
	// Members are the requests of its members not placed (with one pod of the node's pod count
	// each), and Need how many of them its minimum still needs (0: all of them).
	Members []quota.Amounts
	Need    int
	// Domains are those it may be placed in: the domains of its topology's level, or a single one
	// of every node of the group's domain when it has no topology.
	Domains []Domain
	// Exclusive: no other sub-group of the gang shares its domain (subgroups.Need.Exclusive).
	Exclusive bool
}

// SubGroupProblem is a gang with sub-groups waiting for room, and the cluster around it. Nodes,
// Movable, Spare and MaxMoves are as in Problem.
type SubGroupProblem struct {
	SubGroups []SubGroup
	// Need is how many of the sub-groups must be made whole (the group's minSubGroups less those
	// whole already; 0: all of them).
	Need     int
	Nodes    []Node
	Movable  []Pod
	Spare    map[string]int
	MaxMoves int
}

// SubGroupPlan is what makes the gang's sub-groups fit: the moves, the nodes that then hold its
// members (Plan.Nodes), and the domain chosen for each sub-group planned for.
type SubGroupPlan struct {
	Plan
	Domains map[string]string
}

// MakeForSubGroups plans the moves that make room for the sub-groups the gang needs, one domain
// each, or says why there are none. The sub-groups are planned exclusive ones first, then largest
// first, each into the domain that takes its members with the fewest moves (Make's search, with
// the members kept to that domain and the moved pods kept out of it and out of the domains of the
// sub-groups before it, and sent last to the domains the sub-groups after it may take). A domain
// that received moved pods is chosen for no later sub-group, and one chosen for an exclusive
// sub-group for no other. Sub-groups beyond those needed are not
// planned for: they come whole later, when room comes.
func MakeForSubGroups(p SubGroupProblem) (SubGroupPlan, Verdict, string) {
	s := newSearch(Problem{Nodes: p.Nodes, Movable: p.Movable, Spare: p.Spare, MaxMoves: p.MaxMoves})
	need := p.Need
	if need <= 0 || need > len(p.SubGroups) {
		need = len(p.SubGroups)
	}
	if short := s.subGroupsShortInTotal(p.SubGroups, need); short != "" {
		return SubGroupPlan{}, ShortInTotal, "the cluster's free capacity does not hold the sub-groups: " + short
	}
	plan := SubGroupPlan{Domains: map[string]string{}}
	// kept are the nodes of the domains chosen so far, exclusive those of exclusive sub-groups'.
	kept, exclusive := map[string]bool{}, map[string]bool{}
	var whys []string
	order := s.subGroupOrder(p.SubGroups)
	for k, sub := range order {
		if len(plan.Domains) == need {
			break
		}
		// The pods moved for this one go last to the domains those after it may take.
		s.wanted = map[string]bool{}
		for _, later := range order[k+1:] {
			for _, d := range later.Domains {
				for _, node := range d.Nodes {
					s.wanted[node] = true
				}
			}
		}
		members := s.largestOf(sub.Members, sub.Need)
		best, bestDomain, why := s.bestDomainFor(sub, members, kept, exclusive)
		if best == nil {
			whys = append(whys, fmt.Sprintf("sub-group %s: %s", sub.Name, why))
			continue
		}
		best.within, best.kept, best.wanted = nil, nil, nil
		s = best
		plan.Domains[sub.Name] = bestDomain.Name
		for _, node := range bestDomain.Nodes {
			kept[node] = true
			if sub.Exclusive {
				exclusive[node] = true
			}
		}
	}
	if len(plan.Domains) < need {
		return SubGroupPlan{}, NoPlan, fmt.Sprintf("%d of the %d sub-groups it needs have a domain (%s)", len(plan.Domains), need, strings.Join(whys, "; "))
	}
	if len(s.moves) == 0 {
		return SubGroupPlan{}, FitsAlready, "the sub-groups fit the domains' free room already"
	}
	plan.Moves = s.moves
	plan.Nodes = slices.Sorted(maps.Keys(s.gangNodes))
	return plan, Planned, ""
}

// bestDomainFor plans the sub-group's members into each of its domains in turn, and returns the
// search of the one that takes them with the fewest moves (the first, in name order, of those
// with as few), or why none does. A domain is passed over when moved pods were sent to it, when
// an exclusive sub-group holds it, and, for an exclusive sub-group, when another holds it.
func (s *search) bestDomainFor(sub SubGroup, members []quota.Amounts, kept, exclusive map[string]bool) (*search, Domain, string) {
	var best *search
	var bestDomain Domain
	domains := slices.Clone(sub.Domains)
	sort.SliceStable(domains, func(i, j int) bool { return domains[i].Name < domains[j].Name })
	why := fmt.Sprintf("no domain holds its %d members", len(members))
	for _, d := range domains {
		if slices.ContainsFunc(d.Nodes, func(n string) bool {
			return s.receivers[n] || exclusive[n] || (sub.Exclusive && kept[n])
		}) {
			continue
		}
		trial := s.clone()
		trial.within = map[string]bool{}
		trial.kept = maps.Clone(kept)
		for _, node := range d.Nodes {
			trial.within[node], trial.kept[node] = true, true
		}
		if w := trial.place(members); w != "" {
			why = fmt.Sprintf("no domain holds its %d members (%s: %s)", len(members), d.Name, w)
			continue
		}
		if best == nil || len(trial.moves) < len(best.moves) {
			best, bestDomain = trial, d
		}
	}
	if best == nil {
		return nil, Domain{}, why
	}
	return best, bestDomain, ""
}

// place places the members one at a time, as Make does, and says why one has no node ("" when
// all are placed).
func (s *search) place(members []quota.Amounts) string {
	for i, member := range members {
		c, why := s.bestNodeFor(member)
		if why != "" {
			return fmt.Sprintf("member %d of %d: %s", i+1, len(members), why)
		}
		s.apply(c, member)
	}
	return ""
}

// clone copies the search, for a trial that may be dropped.
func (s *search) clone() *search {
	c := *s
	c.free = make(map[string]quota.Amounts, len(s.free))
	for name, f := range s.free {
		c.free[name] = f.Clone()
	}
	c.onNode = make(map[string][]int, len(s.onNode))
	for name, pods := range s.onNode {
		c.onNode[name] = slices.Clone(pods)
	}
	c.gangNodes, c.receivers, c.spent = maps.Clone(s.gangNodes), maps.Clone(s.receivers), maps.Clone(s.spent)
	c.moves = slices.Clone(s.moves)
	return &c
}

// subGroupOrder returns the sub-groups exclusive ones first (the others then keep out of their
// domains), each kind largest first (in the members they need placed), then by name.
func (s *search) subGroupOrder(subs []SubGroup) []SubGroup {
	size := func(sub SubGroup) float64 {
		total := 0.0
		for _, m := range s.largestOf(sub.Members, sub.Need) {
			total += s.share(m)
		}
		return total
	}
	out := slices.Clone(subs)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Exclusive != b.Exclusive {
			return a.Exclusive
		}
		if sa, sb := size(a), size(b); sa != sb {
			return sa > sb
		}
		return a.Name < b.Name
	})
	return out
}

// subGroupsShortInTotal says which resources of the need smallest sub-groups exceed the free room
// of every node the members or the moved pods may use, summed ("" if none do).
func (s *search) subGroupsShortInTotal(subs []SubGroup, need int) string {
	totals := make([]quota.Amounts, 0, len(subs))
	for _, sub := range subs {
		total := quota.Amounts{}
		for _, m := range s.largestOf(sub.Members, sub.Need) {
			total.Add(m)
		}
		totals = append(totals, total)
	}
	sort.SliceStable(totals, func(i, j int) bool { return s.share(totals[i]) < s.share(totals[j]) })
	return s.shortInTotal(totals[:need])
}
