package consolidation

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

const gpu corev1.ResourceName = "example.com/gpu"

func gpus(n int64) quota.Amounts { return quota.Amounts{gpu: n, corev1.ResourcePods: 1} }

// cluster is nodes of 8 GPUs, each running pods of one GPU: used[i] of them on node i, the first
// movable[i] of which may move.
func cluster(used, movable []int) ([]Node, []Pod) {
	var nodes []Node
	var pods []Pod
	for i := range used {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, Node{Name: name, Free: quota.Amounts{gpu: 8 - int64(used[i]), corev1.ResourcePods: 110 - int64(used[i])}, ForGang: true, Receives: true})
		for k := range movable[i] {
			pods = append(pods, Pod{Name: fmt.Sprintf("ns/%s-pod-%d", name, k), Node: name, Requests: gpus(1)})
		}
	}
	return nodes, pods
}

func members(n int, size int64) []quota.Amounts {
	out := make([]quota.Amounts, n)
	for i := range out {
		out[i] = gpus(size)
	}
	return out
}

// movesOf lists, per node, how many pods the plan moves off it and on to it.
func movesOf(plan Plan) (off, on map[string]int) {
	off, on = map[string]int{}, map[string]int{}
	for _, m := range plan.Moves {
		off[m.Pod.Node]++
		on[m.To]++
	}
	return off, on
}

// 16 GPUs free as 4 on each of 4 nodes hold no member of 8: moving the 8 movable pods of nodes 2
// and 3 onto the free room of nodes 0 and 1 frees two whole nodes.
func TestFitsInTotalButOnNoNodesIsPlanned(t *testing.T) {
	nodes, pods := cluster([]int{4, 4, 4, 4}, []int{0, 0, 4, 4})
	plan, verdict, why := Make(Problem{Members: members(2, 8), Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Equal(t, []string{"node-2", "node-3"}, plan.Nodes)
	off, on := movesOf(plan)
	assert.Equal(t, map[string]int{"node-2": 4, "node-3": 4}, off)
	assert.Equal(t, map[string]int{"node-0": 4, "node-1": 4}, on, "the moved pods go to the nodes the gang cannot use")
}

// The moves off the first member's node must not land on the node the second member needs: a node
// that could take a member once its own movable pods are gone is the gang's to keep, while a node
// that never could receives them.
func TestMovedPodsGoWhereNoMemberCouldGo(t *testing.T) {
	// node-0 runs 4 pods that cannot move; nodes 1..3 run 4 movable pods each.
	nodes, pods := cluster([]int{4, 4, 4, 4}, []int{0, 4, 4, 4})
	plan, verdict, why := Make(Problem{Members: members(2, 8), Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Len(t, plan.Moves, 8)
	assert.Len(t, plan.Nodes, 2)
	off, on := movesOf(plan)
	for _, node := range plan.Nodes {
		assert.Zero(t, on[node], "a node of the gang receives no moved pod")
		assert.Equal(t, 4, off[node])
	}
	assert.Equal(t, 4, on["node-0"], "node-0, which no member could use, fills first")
}

// Each plan moves at most MaxMoves pods: with 7, the 8 moves two whole nodes need are not made,
// nor are some of them.
func TestPlanRespectsTheBound(t *testing.T) {
	nodes, pods := cluster([]int{4, 4, 4, 4}, []int{0, 0, 4, 4})
	plan, verdict, why := Make(Problem{Members: members(2, 8), Nodes: nodes, Movable: pods, MaxMoves: 7})
	assert.Equal(t, NoPlan, verdict)
	assert.Empty(t, plan.Moves)
	assert.Contains(t, why, "at most 7")

	plan, verdict, why = Make(Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 4})
	require.Equal(t, Planned, verdict, why)
	assert.Len(t, plan.Moves, 4, "one member needs one node freed: 4 moves")
}

// Only the pods given as movable move: the pods of nodes 0 and 1 are not, so however much is free
// the gang gets no two whole nodes when only one node's pods may move.
func TestNeverMovesWhatIsNotMovable(t *testing.T) {
	nodes, pods := cluster([]int{4, 4, 4, 4}, []int{0, 0, 0, 4})
	plan, verdict, why := Make(Problem{Members: members(2, 8), Nodes: nodes, Movable: pods, MaxMoves: 100})
	assert.Equal(t, NoPlan, verdict)
	assert.Empty(t, plan.Moves)
	assert.Contains(t, why, "member 2 of the 2")

	nodes, pods = cluster([]int{4, 4, 4, 4}, []int{2, 2, 4, 4})
	plan, verdict, why = Make(Problem{Members: members(2, 8), Nodes: nodes, Movable: pods, MaxMoves: 100})
	require.Equal(t, Planned, verdict, why)
	movable := map[string]bool{}
	for _, p := range pods {
		movable[p.Name] = true
	}
	for _, m := range plan.Moves {
		assert.True(t, movable[m.Pod.Name], "moved %s", m.Pod.Name)
	}
}

// No plan when the gang would not fit after the moves: two nodes of 8 GPUs, each with 4 used by
// movable pods, have 8 free in total.
func TestNoPlanWhenTheGangWouldNotFitAfterTheMoves(t *testing.T) {
	nodes, pods := cluster([]int{4, 4}, []int{4, 4})
	plan, verdict, why := Make(Problem{Members: members(2, 6), Nodes: nodes, Movable: pods, MaxMoves: 100})
	assert.Equal(t, ShortInTotal, verdict, "two members of 6 ask 12 GPUs of the 8 free, wherever pods go: %s", why)
	assert.Empty(t, plan.Moves)

	plan, verdict, why = Make(Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 100})
	require.Equal(t, Planned, verdict, why)
	assert.Len(t, plan.Moves, 4, "one member of 8: one node's pods go to the other's free room")

	// The moved pods' affinity keeps them off the other node: they have no room, and nothing moves.
	for i := range pods {
		pods[i].MayRunOn = func(node string) bool { return node == pods[i].Node }
	}
	plan, verdict, why = Make(Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 100})
	assert.Equal(t, NoPlan, verdict)
	assert.Contains(t, why, "no room elsewhere")
	assert.Empty(t, plan.Moves)

	// Nor when the other node takes no moved pod (another group holds it reserved).
	nodes[1].Receives, nodes[1].ForGang = false, false
	for i := range pods {
		pods[i].MayRunOn = nil
	}
	plan, verdict, why = Make(Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 100})
	assert.NotEqual(t, Planned, verdict, why)
	assert.Empty(t, plan.Moves)
}

// Nothing is planned for a minimum that fits already, even when pods could move.
func TestNothingToDoWhenTheGangFitsAlready(t *testing.T) {
	nodes, pods := cluster([]int{0, 4, 4, 4}, []int{0, 4, 4, 4})
	plan, verdict, _ := Make(Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 8})
	assert.Equal(t, FitsAlready, verdict)
	assert.Empty(t, plan.Moves)
}

// A node the gang already fits on is used without a move: only the second member makes room.
func TestMembersTakeFreeNodesFirst(t *testing.T) {
	nodes, pods := cluster([]int{0, 4, 4, 4}, []int{0, 4, 4, 4})
	plan, verdict, why := Make(Problem{Members: members(2, 8), Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	assert.Len(t, plan.Moves, 4)
	assert.Contains(t, plan.Nodes, "node-0")
}

// An elastic group's pods move only as many as it runs above its minimum (its budget).
func TestElasticPodsMoveWithinTheirGroupsSpare(t *testing.T) {
	nodes, pods := cluster([]int{4, 4}, []int{0, 4})
	for i := range pods {
		pods[i].Budgets = []string{"ns/elastic"}
	}
	problem := Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 8, Spare: map[string]int{"ns/elastic": 3}}
	_, verdict, _ := Make(problem)
	assert.Equal(t, NoPlan, verdict, "4 pods must move, and the group may lose 3")
	problem.Spare["ns/elastic"] = 4
	plan, verdict, why := Make(problem)
	require.Equal(t, Planned, verdict, why)
	assert.Len(t, plan.Moves, 4)
}

// The fewest pods move: a node with one pod of 4 GPUs is freed with one move rather than a node
// with four pods of one.
func TestFewestMoves(t *testing.T) {
	nodes := []Node{
		{Name: "a", Free: quota.Amounts{gpu: 4, corev1.ResourcePods: 100}, ForGang: true, Receives: true},
		{Name: "b", Free: quota.Amounts{gpu: 4, corev1.ResourcePods: 100}, ForGang: true, Receives: true},
		{Name: "c", Free: quota.Amounts{gpu: 4, corev1.ResourcePods: 100}, ForGang: true, Receives: true},
	}
	pods := []Pod{{Name: "ns/big", Node: "b", Requests: gpus(4)}}
	for k := range 4 {
		pods = append(pods, Pod{Name: fmt.Sprintf("ns/small-%d", k), Node: "a", Requests: gpus(1)})
	}
	plan, verdict, why := Make(Problem{Members: members(1, 8), Nodes: nodes, Movable: pods, MaxMoves: 8})
	require.Equal(t, Planned, verdict, why)
	require.Len(t, plan.Moves, 1)
	assert.Equal(t, "ns/big", plan.Moves[0].Pod.Name)
	assert.Equal(t, []string{"b"}, plan.Nodes)
}
