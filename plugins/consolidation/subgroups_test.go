package consolidation

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// racks is nodes of 4 GPUs, two a rack: used[rack][i] one-GPU pods on node i of the rack, all
// movable. It returns the nodes, the pods and each rack's domain.
func racks(used [][2]int) ([]Node, []Pod, []Domain) {
	var nodes []Node
	var pods []Pod
	var domains []Domain
	for r, rack := range used {
		d := Domain{Name: fmt.Sprintf("rack-%c", 'a'+r)}
		for i, n := range rack {
			name := fmt.Sprintf("%c%d", 'a'+r, i)
			d.Nodes = append(d.Nodes, name)
			nodes = append(nodes, Node{Name: name, Free: quota.Amounts{gpu: 4 - int64(n), corev1.ResourcePods: 110 - int64(n)}, ForGang: true, Receives: true})
			for k := range n {
				pods = append(pods, Pod{Name: fmt.Sprintf("ns/%s-pod-%d", name, k), Node: name, Requests: gpus(1)})
			}
		}
		domains = append(domains, d)
	}
	return nodes, pods, domains
}

// movedTo lists the plan's moves as pod name to node.
func movedTo(plan SubGroupPlan) map[string]string {
	out := map[string]string{}
	for _, m := range plan.Moves {
		out[m.Pod.Name] = m.To
	}
	return out
}

// Two racks, each fragmented: rack-a's nodes run 1 and 2 pods, rack-b's 1 each. A sub-group of 4
// members of 2 GPUs needs a whole rack of two nodes of 4, which neither has, though the 9 GPUs
// free hold its 8. Rack-b takes it with 2 moves (rack-a would take 3); its two pods go to rack-a,
// to the node they fill best, and the members' nodes are rack-b's.
func TestASubGroupGetsTheRackNeedingFewestMoves(t *testing.T) {
	nodes, pods, domains := racks([][2]int{{1, 2}, {1, 1}})
	plan, verdict, why := MakeForSubGroups(SubGroupProblem{
		SubGroups: []SubGroup{{Name: "replica-0", Members: members(4, 2), Domains: domains}},
		Nodes:     nodes, Movable: pods, MaxMoves: 8,
	})
	require.Equal(t, Planned, verdict, why)
	assert.Equal(t, map[string]string{"replica-0": "rack-b"}, plan.Domains)
	assert.Equal(t, []string{"b0", "b1"}, plan.Nodes)
	assert.Equal(t, map[string]string{"ns/b0-pod-0": "a1", "ns/b1-pod-0": "a1"}, movedTo(plan),
		"rack-b's pods move to rack-a, onto the node they fill best")
}

// Three racks each run a pod on each node: no rack holds a replica of 4 members of 2 GPUs. Two
// replicas get a rack each, with two moves each, and every moved pod goes to the third rack:
// never to a rack chosen for a replica.
func TestEachSubGroupGetsARackAndMovedPodsGoElsewhere(t *testing.T) {
	nodes, pods, domains := racks([][2]int{{1, 1}, {1, 1}, {1, 1}})
	subs := []SubGroup{
		{Name: "replica-0", Members: members(4, 2), Domains: domains},
		{Name: "replica-1", Members: members(4, 2), Domains: domains},
	}
	plan, verdict, why := MakeForSubGroups(SubGroupProblem{SubGroups: subs, Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Equal(t, map[string]string{"replica-0": "rack-a", "replica-1": "rack-c"}, plan.Domains,
		"rack-b received rack-a's pods, so replica-1 takes rack-c")
	assert.Equal(t, []string{"a0", "a1", "c0", "c1"}, plan.Nodes)
	assert.Len(t, plan.Moves, 4)
	for pod, to := range movedTo(plan) {
		assert.Contains(t, []string{"b0", "b1"}, to, "%s goes to the rack no replica holds", pod)
	}

	// Within a bound of 3 moves, one replica only gets a rack: no plan.
	_, verdict, why = MakeForSubGroups(SubGroupProblem{SubGroups: subs, Nodes: nodes, Movable: pods, MaxMoves: 3})
	assert.Equal(t, NoPlan, verdict)
	assert.Contains(t, why, "1 of the 2 sub-groups it needs have a domain")

	// With minSubGroups 1, one replica is planned for: 2 moves.
	plan, verdict, why = MakeForSubGroups(SubGroupProblem{SubGroups: subs, Need: 1, Nodes: nodes, Movable: pods, MaxMoves: 3})
	require.Equal(t, Planned, verdict, why)
	assert.Len(t, plan.Domains, 1)
	assert.Len(t, plan.Moves, 2)
}

// Exclusive sub-groups get a rack each, even where one rack would hold both; sub-groups that are
// not exclusive share it. Rack-a holds one replica of 2 members of 2 GPUs as it is, and both once
// its two pods move; rack-b and rack-c hold one each once two of their pods move.
func TestExclusiveSubGroupsDoNotShareARack(t *testing.T) {
	nodes, pods, domains := racks([][2]int{{1, 1}, {3, 3}, {3, 3}})
	subs := func(exclusive bool) []SubGroup {
		return []SubGroup{
			{Name: "replica-0", Members: members(2, 2), Domains: domains, Exclusive: exclusive},
			{Name: "replica-1", Members: members(2, 2), Domains: domains, Exclusive: exclusive},
		}
	}
	plan, verdict, why := MakeForSubGroups(SubGroupProblem{SubGroups: subs(false), Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Equal(t, map[string]string{"replica-0": "rack-a", "replica-1": "rack-a"}, plan.Domains, "rack-a, its two pods moved, holds both")
	assert.Equal(t, map[string]string{"ns/a0-pod-0": "b0", "ns/a1-pod-0": "b1"}, movedTo(plan))

	plan, verdict, why = MakeForSubGroups(SubGroupProblem{SubGroups: subs(true), Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Equal(t, map[string]string{"replica-0": "rack-a", "replica-1": "rack-b"}, plan.Domains)
	assert.Equal(t, map[string]string{"ns/b0-pod-0": "c0", "ns/b1-pod-0": "c1"}, movedTo(plan), "rack-b's pods go to rack-c, not to rack-a")
}

// Nothing to plan when a rack holds the sub-group already, and nothing when the free room in total
// does not hold it.
func TestSubGroupsThatFitOrAreShortInTotalGetNoPlan(t *testing.T) {
	nodes, pods, domains := racks([][2]int{{0, 0}, {1, 1}})
	_, verdict, _ := MakeForSubGroups(SubGroupProblem{
		SubGroups: []SubGroup{{Name: "replica-0", Members: members(4, 2), Domains: domains}}, Nodes: nodes, Movable: pods, MaxMoves: 8,
	})
	assert.Equal(t, FitsAlready, verdict)

	nodes, pods, domains = racks([][2]int{{3, 3}, {3, 3}})
	_, verdict, _ = MakeForSubGroups(SubGroupProblem{
		SubGroups: []SubGroup{{Name: "replica-0", Members: members(4, 2), Domains: domains}}, Nodes: nodes, Movable: pods, MaxMoves: 8,
	})
	assert.Equal(t, ShortInTotal, verdict)
}

// The pods moved for one sub-group go first to nodes no later sub-group may take: racks a and b
// are the group's (its block), rack c is not, and rack-a's pods go to rack-c, so that rack-b
// stays for the second replica.
func TestMovedPodsGoOutsideTheDomainsLaterSubGroupsMayTake(t *testing.T) {
	nodes, pods, domains := racks([][2]int{{1, 1}, {1, 1}, {1, 1}})
	inBlock := domains[:2]
	subs := []SubGroup{
		{Name: "replica-0", Members: members(4, 2), Domains: inBlock},
		{Name: "replica-1", Members: members(4, 2), Domains: inBlock},
	}
	plan, verdict, why := MakeForSubGroups(SubGroupProblem{SubGroups: subs, Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Equal(t, map[string]string{"replica-0": "rack-a", "replica-1": "rack-b"}, plan.Domains)
	for pod, to := range movedTo(plan) {
		assert.Contains(t, []string{"c0", "c1"}, to, "%s goes to the rack outside the block", pod)
	}
}
