// Package consolidation makes whole nodes for a waiting gang by moving pods that declared they can
// move. A gang's minimum may fit in the cluster's free capacity and still on no set of nodes: 16
// GPUs free as 4 on each of 4 nodes hold no member of 8. Nothing of it would ever start until
// enough pods on the same nodes happen to end. When pods on those nodes can move (they run above
// their group's minimum, or they said so: scheduling.tephra.dev/movable, a job that checkpoints),
// evicting them and letting their controllers create them again, placed on the free room of other
// nodes, frees whole nodes for the gang.
//
// The package holds the decision (Make: which pods move, and which nodes the gang then gets) and
// the act (Mover: the evictions, their events and the metric). TephraGang asks it from its
// PostFilter, with what the scheduler's snapshot shows, and reserves the nodes of the plan for the
// gang (plugins/gang/consolidate.go), so that the moved pods' replacements land elsewhere.
package consolidation

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// Node is what the planner knows of a node.
type Node struct {
	Name string
	// Free is what is free on the node now, per resource, in capacity.Of's units (pods as a count).
	Free quota.Amounts
	// ForGang says whether the gang's members may run on the node: their affinity and
	// tolerations allow it, it is schedulable, and no other group holds it reserved.
	ForGang bool
	// Receives says whether moved pods may be placed on the node at all: it is schedulable and
	// no other group holds it reserved. Each pod's own affinity is Pod.MayRunOn.
	Receives bool
}

// Pod is a pod that may move.
type Pod struct {
	// Name is namespace/name: plans are made in name order, so that the same cluster gives the
	// same plan.
	Name string
	Node string
	// Requests are what the pod takes, in capacity.Of's units, with its one pod of the node's
	// pod count.
	Requests quota.Amounts
	// Budgets name the limits its move counts against: an elastic pod's group (the first, its
	// namespace/name) may lose only the pods it runs above its minimum (Problem.Spare), and a task
	// only those above its minTaskMember. A pod that declared itself movable has none.
	Budgets []string
	// MayRunOn says whether the pod's node affinity and tolerations let it run on a node (nil:
	// every node).
	MayRunOn func(node string) bool
	// Object is the pod itself, for the Mover; the planner does not read it.
	Object *corev1.Pod
}

// Problem is a gang waiting for room, and the cluster around it.
type Problem struct {
	// Members are the requests of the gang's members not placed, with one pod of the node's pod
	// count each, and Need how many of them its minimum still needs placed (0: all of them). The
	// largest Need members are planned for: any of them may be the ones the scheduler places.
	Members []quota.Amounts
	Need    int
	Nodes   []Node
	// Movable are the pods that may move, wherever they run.
	Movable []Pod
	// Spare is, per budget, how many pods may move.
	Spare map[string]int
	// MaxMoves bounds the pods one plan moves.
	MaxMoves int
}

// Move is one pod to evict, and the node the planner found room for it on. Its replacement is
// placed by the scheduler, which may well choose another node with room.
type Move struct {
	Pod Pod
	To  string
}

// Plan is what makes the gang fit: the pods to move, and the nodes that then hold the gang's
// minimum.
type Plan struct {
	Moves []Move
	Nodes []string
}

// Verdict says what the planner concluded.
type Verdict int

const (
	// Planned: the moves of the plan make the gang's minimum fit.
	Planned Verdict = iota
	// FitsAlready: the minimum fits without moving anything; nothing is to be done here.
	FitsAlready
	// ShortInTotal: the cluster's free capacity does not hold the minimum, wherever pods are
	// moved; making room is reclaim's and preemption's work, not consolidation's.
	ShortInTotal
	// NoPlan: no moves of the pods that may move, within the bound, make the minimum fit.
	NoPlan
)

// Make plans the moves that make the gang's minimum fit, or says why there are none. It places
// the members one at a time, largest first, each on the node that takes it with the fewest moves
// (no move where it fits already), and the pods moved off that node on other nodes' free room,
// on nodes no member can use first: a moved pod must not take the room a later member needs. A
// node is either the gang's (it holds members, and receives no moved pod) or a receiver of moved
// pods (and holds no member), so that the moves never undo each other. The plan is kept only when
// every member is placed within MaxMoves moves.
func Make(p Problem) (Plan, Verdict, string) {
	s := newSearch(p)
	if s.fitsWithoutMoves() {
		return Plan{}, FitsAlready, "the minimum fits the nodes' free room already"
	}
	if short := s.shortInTotal(s.members); short != "" {
		return Plan{}, ShortInTotal, "the cluster's free capacity does not hold the minimum: " + short
	}
	for i, member := range s.members {
		c, why := s.bestNodeFor(member)
		if why != "" {
			return Plan{}, NoPlan, fmt.Sprintf("member %d of the %d the minimum still needs: %s", i+1, len(s.members), why)
		}
		s.apply(c, member)
	}
	nodes := make([]string, 0, len(s.gangNodes))
	for name := range s.gangNodes {
		nodes = append(nodes, name)
	}
	sort.Strings(nodes)
	return Plan{Moves: s.moves, Nodes: nodes}, Planned, ""
}

// search is the planner's state as it places the members.
type search struct {
	p       Problem
	members []quota.Amounts
	nodes   []Node
	// largest is the most any node has free of each resource, which shares are taken of.
	largest quota.Amounts
	free    map[string]quota.Amounts
	// onNode are the indexes into p.Movable of the pods still on each node.
	onNode map[string][]int
	// gangNodes hold members; receivers hold moved pods. A node is never both.
	gangNodes, receivers map[string]bool
	spent                map[string]int
	moves                []Move
	// within, when set, are the only nodes members may be placed on (a sub-group's domain), kept
	// the nodes no moved pod may go to (the domains of the sub-groups), and wanted those that
	// moved pods go to last (the domains the sub-groups still to plan may take).
	within, kept, wanted map[string]bool
}

// mayHoldMembers says whether the search may place members on the node.
func (s *search) mayHoldMembers(n Node) bool {
	return n.ForGang && !s.receivers[n.Name] && (s.within == nil || s.within[n.Name])
}

// mayReceive says whether the search may place moved pods on the node.
func (s *search) mayReceive(n Node) bool {
	return n.Receives && !s.gangNodes[n.Name] && !s.kept[n.Name]
}

func newSearch(p Problem) *search {
	s := &search{p: p, free: map[string]quota.Amounts{}, onNode: map[string][]int{},
		gangNodes: map[string]bool{}, receivers: map[string]bool{}, spent: map[string]int{}}
	s.nodes = slices.Clone(p.Nodes)
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].Name < s.nodes[j].Name })
	s.largest = quota.Amounts{}
	for _, n := range s.nodes {
		s.free[n.Name] = n.Free.Clone()
		for name, v := range n.Free {
			s.largest[name] = max(s.largest[name], v)
		}
	}
	order := make([]int, len(p.Movable))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return p.Movable[order[i]].Name < p.Movable[order[j]].Name })
	for _, i := range order {
		s.onNode[p.Movable[i].Node] = append(s.onNode[p.Movable[i].Node], i)
	}
	s.members = s.largestOf(p.Members, p.Need)
	return s
}

// largestOf returns the need largest of members, largest first (all of them when need is 0).
func (s *search) largestOf(members []quota.Amounts, need int) []quota.Amounts {
	out := slices.Clone(members)
	sort.SliceStable(out, func(i, j int) bool { return s.share(out[i]) > s.share(out[j]) })
	if need > 0 && need < len(out) {
		out = out[:need]
	}
	return out
}

// share is how much of the emptiest node a request takes, summed over its resources: the order
// of the members, largest first, and of moved pods when they are placed.
func (s *search) share(r quota.Amounts) float64 {
	total := 0.0
	for name, v := range r {
		if name == corev1.ResourcePods {
			continue
		}
		if largest := s.largest[name]; largest > 0 {
			total += float64(v) / float64(largest)
		}
	}
	return total
}

func fits(r, free quota.Amounts) bool {
	for name, v := range r {
		if v > free[name] {
			return false
		}
	}
	return true
}

// fitsWithoutMoves places the members on the nodes' free room as they are, best fit.
func (s *search) fitsWithoutMoves() bool {
	free := map[string]quota.Amounts{}
	for name, f := range s.free {
		free[name] = f.Clone()
	}
	for _, m := range s.members {
		best := ""
		for _, n := range s.nodes {
			if n.ForGang && fits(m, free[n.Name]) && (best == "" || s.share(free[n.Name]) < s.share(free[best])) {
				best = n.Name
			}
		}
		if best == "" {
			return false
		}
		free[best].Sub(m)
	}
	return true
}

// shortInTotal says which resources of the members exceed the free room of every node the
// members or the moved pods may use, summed ("" if none do): moving pods never adds to it.
func (s *search) shortInTotal(members []quota.Amounts) string {
	need, free := quota.Amounts{}, quota.Amounts{}
	for _, m := range members {
		need.Add(m)
	}
	for _, n := range s.nodes {
		if n.ForGang || n.Receives {
			free.Add(n.Free)
		}
	}
	short := quota.Amounts{}
	for name, v := range need {
		if v > free[name] {
			short[name] = v - free[name]
		}
	}
	if len(short) == 0 {
		return ""
	}
	return short.Describe() + " short"
}

// candidate is a node a member may be placed on, with the pods that must move off it first and
// where each goes.
type candidate struct {
	node    string
	victims []int
	to      []string
}

// bestNodeFor finds the node that takes the member with the fewest moves, or says why none does.
// Nodes where it fits already come first, the fullest of them (best fit); then those needing the
// fewest moves, nodes the gang holds already first. Where the moved pods go is worked out only
// for the cheapest nodes, until one works.
func (s *search) bestNodeFor(member quota.Amounts) (candidate, string) {
	var fitting []string
	type option struct {
		node    string
		victims []int
	}
	var options []option
	left := s.p.MaxMoves - len(s.moves)
	for _, n := range s.nodes {
		if !s.mayHoldMembers(n) {
			continue
		}
		if fits(member, s.free[n.Name]) {
			fitting = append(fitting, n.Name)
			continue
		}
		if victims := s.victimsOn(n.Name, member); victims != nil {
			options = append(options, option{n.Name, victims})
		}
	}
	if len(fitting) > 0 {
		sort.SliceStable(fitting, func(i, j int) bool { return s.share(s.free[fitting[i]]) < s.share(s.free[fitting[j]]) })
		return candidate{node: fitting[0]}, ""
	}
	if len(options) == 0 {
		return candidate{}, "no node has room for it even once every pod that may move is off it"
	}
	sort.SliceStable(options, func(i, j int) bool {
		a, b := options[i], options[j]
		if len(a.victims) != len(b.victims) {
			return len(a.victims) < len(b.victims)
		}
		return s.gangNodes[a.node] && !s.gangNodes[b.node]
	})
	for _, o := range options {
		if len(o.victims) > left {
			break
		}
		if to := s.destinations(o.node, o.victims, member); to != nil {
			return candidate{node: o.node, victims: o.victims, to: to}, ""
		}
	}
	if fewest := len(options[0].victims); fewest > left {
		return candidate{}, fmt.Sprintf("it needs %d more moves, and a plan makes at most %d (%d planned already)", fewest, s.p.MaxMoves, len(s.moves))
	}
	return candidate{}, "the pods that would have to move off the nodes it could use have no room elsewhere"
}

// victimsOn chooses the fewest pods still on the node whose moves make room for the member: each
// time the pod that covers most of what is missing, then the smallest; then those not needed after
// all are kept. nil when moving all of them would not be enough.
func (s *search) victimsOn(node string, member quota.Amounts) []int {
	missing := quota.Amounts{}
	for name, v := range member {
		if lack := v - s.free[node][name]; lack > 0 {
			missing[name] = lack
		}
	}
	spent := map[string]int{}
	mayMove := func(i int) bool {
		for _, b := range s.p.Movable[i].Budgets {
			if s.spent[b]+spent[b] >= s.p.Spare[b] {
				return false
			}
		}
		return true
	}
	covers := func(chosen []int) bool {
		freed := quota.Amounts{}
		for _, i := range chosen {
			freed.Add(s.p.Movable[i].Requests)
		}
		for name, v := range missing {
			if freed[name] < v {
				return false
			}
		}
		return true
	}
	var chosen []int
	taken := map[int]bool{}
	for !covers(chosen) {
		best, bestCover := -1, 0.0
		still := missing.Clone()
		for _, i := range chosen {
			still.Sub(s.p.Movable[i].Requests)
		}
		for _, i := range s.onNode[node] {
			if taken[i] || !mayMove(i) {
				continue
			}
			cover := 0.0
			for name, v := range still {
				if v > 0 {
					cover += float64(min(s.p.Movable[i].Requests[name], v)) / float64(member[name])
				}
			}
			if cover > bestCover || (cover == bestCover && cover > 0 && s.share(s.p.Movable[i].Requests) < s.share(s.p.Movable[best].Requests)) {
				best, bestCover = i, cover
			}
		}
		if best < 0 {
			return nil
		}
		chosen = append(chosen, best)
		taken[best] = true
		for _, b := range s.p.Movable[best].Budgets {
			spent[b]++
		}
	}
	for k := len(chosen) - 1; k >= 0; k-- {
		without := append(slices.Clone(chosen[:k]), chosen[k+1:]...)
		if covers(without) {
			chosen = without
		}
	}
	return chosen
}

// destinations finds room for the pods moved off a node, largest first, each on the node it fills
// best among those that could never take a member, then among the others; nil if a pod has no
// room. A node that holds members or could take the member being placed (with its own movable
// pods gone) is the gang's to keep.
func (s *search) destinations(from string, victims []int, member quota.Amounts) []string {
	free := map[string]quota.Amounts{}
	roomOf := func(node string) quota.Amounts {
		if _, ok := free[node]; !ok {
			free[node] = s.free[node].Clone()
		}
		return free[node]
	}
	couldTakeMember := map[string]bool{}
	for _, n := range s.nodes {
		if !s.mayHoldMembers(n) {
			continue
		}
		potential := s.free[n.Name].Clone()
		for _, i := range s.onNode[n.Name] {
			potential.Add(s.p.Movable[i].Requests)
		}
		couldTakeMember[n.Name] = fits(member, potential)
	}
	order := slices.Clone(victims)
	sort.SliceStable(order, func(i, j int) bool {
		return s.share(s.p.Movable[order[i]].Requests) > s.share(s.p.Movable[order[j]].Requests)
	})
	to := make([]string, len(victims))
	for _, i := range order {
		pod := s.p.Movable[i]
		best := ""
		better := func(a, b string) bool {
			if couldTakeMember[a] != couldTakeMember[b] {
				return !couldTakeMember[a]
			}
			if s.wanted[a] != s.wanted[b] {
				return !s.wanted[a]
			}
			if s.receivers[a] != s.receivers[b] {
				return s.receivers[a]
			}
			return s.share(roomOf(a)) < s.share(roomOf(b))
		}
		for _, n := range s.nodes {
			if n.Name == from || !s.mayReceive(n) || (pod.MayRunOn != nil && !pod.MayRunOn(n.Name)) || !fits(pod.Requests, roomOf(n.Name)) {
				continue
			}
			if best == "" || better(n.Name, best) {
				best = n.Name
			}
		}
		if best == "" {
			return nil
		}
		roomOf(best).Sub(pod.Requests)
		to[slices.Index(victims, i)] = best
	}
	return to
}

// apply places the member on the candidate's node once its pods are moved off.
func (s *search) apply(c candidate, member quota.Amounts) {
	for k, i := range c.victims {
		pod := s.p.Movable[i]
		s.free[c.node].Add(pod.Requests)
		s.free[c.to[k]].Sub(pod.Requests)
		s.receivers[c.to[k]] = true
		for _, b := range pod.Budgets {
			s.spent[b]++
		}
		s.onNode[c.node] = slices.DeleteFunc(s.onNode[c.node], func(j int) bool { return j == i })
		s.moves = append(s.moves, Move{Pod: pod, To: c.to[k]})
	}
	s.free[c.node].Sub(member)
	s.gangNodes[c.node] = true
}
