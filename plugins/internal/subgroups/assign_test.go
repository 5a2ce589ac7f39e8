package subgroups

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/tephra-dev/tephra/internal/topology"
)

// node has 4 CPUs in a rack of a block, used of them requested.
func node(name, rack, block string, used int64) fwk.NodeInfo {
	n := framework.NewNodeInfo()
	n.SetNode(st.MakeNode().Name(name).Label("rack", rack).Label("block", block).
		Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourcePods: "110"}).Obj())
	if used > 0 {
		n.AddPod(st.MakePod().Name(name + "-used").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: fmt.Sprint(used)}).Node(name).Obj())
	}
	return n
}

// rack is two nodes of block with free CPUs left free in all (at most 8).
func rack(name, block string, free int64) []fwk.NodeInfo {
	first := min(free, 4)
	return []fwk.NodeInfo{node(name+"-0", name, block, 4-first), node(name+"-1", name, block, 4-(free-first))}
}

func cluster(racks ...[]fwk.NodeInfo) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, r := range racks {
		out = append(out, r...)
	}
	return out
}

var (
	inRack  = &topology.Constraint{Levels: []string{"rack"}, Required: true}
	inBlock = &topology.Constraint{Levels: []string{"block"}, Required: true}
)

// replicas is n sub-groups of size pods of one CPU each, each required in one rack.
func replicas(n, size int) []Need {
	var needs []Need
	for i := range n {
		needs = append(needs, Need{
			Name:       fmt.Sprintf("replica-%d", i),
			Constraint: inRack,
			Missing:    size,
			Smallest:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			Total:      corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(size), resource.DecimalSI)},
		})
	}
	return needs
}

func racksOf(a *Assignment) map[string]string {
	out := map[string]string{}
	for name, d := range a.SubGroups {
		out[name] = d.Value
	}
	return out
}

// Four replicas of 8, each in one rack and all in one block: block x has the CPUs for all 32 but
// only three racks that hold a whole replica, so the group goes to block y, one replica a rack.
func TestAssignPlacesEveryLevelWhole(t *testing.T) {
	nodes := cluster(
		rack("x1", "x", 8), rack("x2", "x", 8), rack("x3", "x", 8), rack("x4", "x", 4), rack("x5", "x", 4),
		rack("y1", "y", 8), rack("y2", "y", 8), rack("y3", "y", 8), rack("y4", "y", 8),
	)
	a, why := Assign(inBlock, nodes, nil, replicas(4, 8), 4)
	require.Empty(t, why)
	assert.Equal(t, "block=y", a.Group.String())
	assert.Equal(t, map[string]string{"replica-0": "y1", "replica-1": "y2", "replica-2": "y3", "replica-3": "y4"}, racksOf(a))
	assert.ElementsMatch(t, []string{"y1-0", "y1-1"}, a.SubGroups["replica-0"].Nodes.UnsortedList())

	// One rack short in y too: nothing is placed, and the answer says what is short.
	nodes = cluster(
		rack("x1", "x", 8), rack("x2", "x", 8), rack("x3", "x", 8), rack("x4", "x", 4), rack("x5", "x", 4),
		rack("y1", "y", 8), rack("y2", "y", 8), rack("y3", "y", 8), rack("y4", "y", 7),
	)
	a, why = Assign(inBlock, nodes, nil, replicas(4, 8), 4)
	assert.Nil(t, a)
	assert.Contains(t, why, "no block domain holds them")
	assert.Contains(t, why, "3 of the 4 sub-groups it needs fit")
	assert.Contains(t, why, "no rack domain holds its 8 more members")

	// The answer is about the block that came closest, not the fullest one tried first.
	nodes = cluster(rack("x1", "x", 8), rack("x2", "x", 8), rack("x3", "x", 4), rack("y1", "y", 0))
	_, why = Assign(inBlock, nodes, nil, replicas(3, 8), 3)
	assert.Contains(t, why, "no block domain holds them (the closest, block=x: 2 of the 3 sub-groups it needs fit")
}

// Two sub-groups share a rack that holds both, and each goes where it leaves the least free
// capacity: the whole empty rack stays whole.
func TestAssignIsBestFitAcrossSubGroups(t *testing.T) {
	nodes := cluster(rack("a", "x", 8), append(rack("b", "x", 8), rack("b2", "x", 8)...))
	for i := range nodes[2:] {
		nodes[2+i].Node().Labels["rack"] = "b" // rack b: four nodes, 16 CPUs free
	}
	a, why := Assign(nil, nodes, nil, replicas(3, 4), 3)
	require.Empty(t, why)
	assert.Nil(t, a.Group, "the group has no topology")
	got := racksOf(a)
	assert.Equal(t, map[string]string{"replica-0": "a", "replica-1": "a", "replica-2": "b"}, got,
		"rack a (8 free) takes two replicas of 4; rack b, with 16 free, the third")
}

// minSubGroups of them suffice: the group is placed when 2 of its 3 replicas fit.
func TestAssignNeedsOnlyMinSubGroups(t *testing.T) {
	nodes := cluster(rack("a", "x", 8), rack("b", "x", 8), rack("c", "x", 3))
	a, why := Assign(inBlock, nodes, nil, replicas(3, 8), 2)
	require.Empty(t, why)
	assert.Len(t, a.SubGroups, 2)
	assert.Equal(t, []string{"replica-2"}, a.Left, "the replica that does not fit is left for later")
	_, why = Assign(inBlock, nodes, nil, replicas(3, 8), 3)
	assert.Contains(t, why, "2 of the 3 sub-groups it needs fit")
}

// With a minimum of sub-groups below their number, the domain that holds the most of them wins
// over the better fit that holds only the minimum; every one that fits is assigned.
func TestAssignPrefersTheDomainThatHoldsMoreSubGroups(t *testing.T) {
	// Block x (best fit, 16 free) holds 2 replicas of 8; block y (24 free) holds all 3.
	nodes := cluster(rack("x1", "x", 8), rack("x2", "x", 8), rack("y1", "y", 8), rack("y2", "y", 8), rack("y3", "y", 8))
	a, why := Assign(inBlock, nodes, nil, replicas(3, 8), 2)
	require.Empty(t, why)
	assert.Equal(t, "block=y", a.Group.String())
	assert.Len(t, a.SubGroups, 3)
	assert.Empty(t, a.Left)

	// Only x: two of the three, the third left.
	nodes = cluster(rack("x1", "x", 8), rack("x2", "x", 8), rack("y1", "y", 4))
	a, why = Assign(inBlock, nodes, nil, replicas(3, 8), 2)
	require.Empty(t, why)
	assert.Equal(t, "block=x", a.Group.String())
	assert.Equal(t, []string{"replica-2"}, a.Left)
}

// A preferred level falls back to the next wider one, and without a required one to the
// whole group domain; a sub-group without a topology may use any node of the group's domain.
func TestAssignFallsBackFromPreferredLevels(t *testing.T) {
	nodes := cluster(rack("a", "x", 4), rack("b", "x", 4))
	preferRack := &topology.Constraint{Levels: []string{"rack", "block"}}
	needs := replicas(1, 8)
	needs[0].Constraint = preferRack
	a, why := Assign(nil, nodes, nil, needs, 1)
	require.Empty(t, why)
	assert.Equal(t, "block=x", a.SubGroups["replica-0"].String(), "no rack holds 8: the block does")

	needs[0].Constraint = nil
	a, why = Assign(inBlock, nodes, nil, needs, 1)
	require.Empty(t, why)
	assert.Equal(t, "block=x", a.Group.String())
	assert.Empty(t, a.SubGroups, "a sub-group without topology gets no domain of its own")

	needs[0].Missing, needs[0].Total = 9, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9")}
	_, why = Assign(inBlock, nodes, nil, needs, 1)
	assert.Contains(t, why, "the nodes' free capacity does not hold 9 more members")
}

// A sub-group partly placed stays in the rack that holds its members, even where another rack
// would be a better fit.
func TestAssignKeepsASubGroupWhereItRuns(t *testing.T) {
	nodes := cluster(rack("a", "x", 4), rack("b", "x", 8))
	needs := replicas(1, 4)
	needs[0].PlacedOn = map[string]int{"b-0": 4}
	a, why := Assign(nil, nodes, nil, needs, 1)
	require.Empty(t, why)
	assert.Equal(t, "rack=b", a.SubGroups["replica-0"].String())
}

// A group that runs in part (a replica restarted) stays in the block of its placed members, even
// where another block would be a better fit.
func TestAssignKeepsTheGroupInTheDomainItRunsIn(t *testing.T) {
	// Rack x1 runs 4 of the group's pods; x2 is empty.
	nodes := cluster(rack("x1", "x", 4), rack("x2", "x", 8), rack("y1", "y", 8))
	a, why := Assign(inBlock, nodes, map[string]int{"x1-0": 4}, replicas(1, 8), 1)
	require.Empty(t, why)
	assert.Equal(t, "block=x", a.Group.String(), "block y (8 free, against 12) would fit tighter")
	assert.Equal(t, "rack=x2", a.SubGroups["replica-0"].String())

	_, why = Assign(inBlock, nodes, map[string]int{"x1-0": 1, "y1-0": 1}, replicas(1, 8), 1)
	assert.Contains(t, why, "its placed members are in 2 block domains")
}

// Exclusive sub-groups take a rack each, even where one rack holds two of them; the others keep
// out of their racks; a rack where another sub-group of the group runs is not one to itself.
func TestAssignGivesExclusiveSubGroupsARackEach(t *testing.T) {
	exclusive := func(needs []Need) []Need {
		for i := range needs {
			needs[i].Exclusive = true
		}
		return needs
	}
	nodes := cluster(rack("a", "x", 8), rack("b", "x", 8), rack("c", "x", 4))
	a, why := Assign(nil, nodes, nil, exclusive(replicas(3, 4)), 3)
	require.Empty(t, why)
	got := racksOf(a)
	assert.Len(t, map[string]bool{got["replica-0"]: true, got["replica-1"]: true, got["replica-2"]: true}, 3,
		"three exclusive replicas of 4 in three racks, where a and b hold two each: %v", got)

	// Two racks for three exclusive replicas: nothing, and the answer says why.
	_, why = Assign(nil, cluster(rack("a", "x", 8), rack("b", "x", 8)), nil, exclusive(replicas(3, 4)), 3)
	assert.Contains(t, why, "2 of the 3 sub-groups it needs fit")
	assert.Contains(t, why, "no rack domain to itself holds its 4 more members")

	// A replica that is not exclusive keeps out of the exclusive ones' racks.
	needs := append(exclusive(replicas(1, 4)), Need{
		Name: "other", Constraint: inRack, Missing: 2,
		Smallest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		Total:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	})
	a, why = Assign(nil, cluster(rack("a", "x", 8), rack("b", "x", 8)), nil, needs, 2)
	require.Empty(t, why)
	assert.NotEqual(t, a.SubGroups["replica-0"].Value, a.SubGroups["other"].Value, "rack %s is replica-0's alone", a.SubGroups["replica-0"].Value)

	// Rack a runs 2 pods of another sub-group of the group: replica-0 goes to b.
	a, why = Assign(nil, cluster(rack("a", "x", 8), rack("b", "x", 8)), map[string]int{"a-0": 2}, exclusive(replicas(1, 4)), 1)
	require.Empty(t, why)
	assert.Equal(t, "rack=b", a.SubGroups["replica-0"].String())
}
