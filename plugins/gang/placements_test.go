package gang

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// noGroupStates is a snapshot in which no group has a member placed.
type noGroupStates struct{ fwk.SharedLister }

func (noGroupStates) PodGroupStates() fwk.PodGroupStateLister { return noGroupStates{} }
func (noGroupStates) Get(string, string) (fwk.PodGroupState, error) {
	return nil, errors.New("no state")
}

// upstreamGroup is the PodGroupInfo of a pod-group cycle: an upstream gang of n one-CPU pods,
// with a rack constraint when rack is set.
type upstreamGroup struct {
	fwk.PodGroupInfo
	pg   *upstreamv1beta1.PodGroup
	pods []*corev1.Pod
}

func (u upstreamGroup) GetPodGroup() *upstreamv1beta1.PodGroup { return u.pg }
func (u upstreamGroup) GetUnscheduledPods() []*corev1.Pod      { return u.pods }
func (u upstreamGroup) GetNamespace() string                   { return u.pg.Namespace }
func (u upstreamGroup) GetName() string                        { return u.pg.Name }

func newUpstreamGroup(n int32, rack bool) upstreamGroup {
	pg := &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", UID: "uid-g"},
		Spec: upstreamv1beta1.PodGroupSpec{SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{
			Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: n},
		}},
	}
	if rack {
		pg.Spec.SchedulingConstraints = &upstreamv1beta1.PodGroupSchedulingConstraints{Topology: []upstreamv1beta1.TopologyConstraint{{Key: "rack"}}}
	}
	u := upstreamGroup{pg: pg}
	for range n {
		u.pods = append(u.pods, st.MakePod().Namespace("ns").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj())
	}
	return u
}

func placementNames(r *fwk.GeneratePlacementsResult) []string {
	var names []string
	for _, p := range r.Placements {
		names = append(names, p.Name)
	}
	return names
}

// A pod-group cycle is offered the best-fit rack alone; if it finds that one infeasible, every
// rack that holds the minimum, best fit first, in its next cycle; and after a feasible one, the
// best fit alone again. A gang no rack holds is told why, rack by rack.
func TestPlacementsOfferTheBestFitFirst(t *testing.T) {
	f := newFixture(t)
	f.handle.snapshot = noGroupStates{}
	// Rack a: 2 of 8 CPUs free. Rack b: 8 free. Rack c: 6 free.
	nodes := []fwk.NodeInfo{
		rackNode("a0", "a", "x", 4), rackNode("a1", "a", "x", 2),
		rackNode("b0", "b", "x", 0), rackNode("b1", "b", "x", 0),
		rackNode("c0", "c", "y", 1), rackNode("c1", "c", "y", 1),
	}
	parent := &fwk.Placement{Nodes: nodes}
	ctx := context.Background()

	state := framework.NewCycleState()
	r, status := f.gang.GeneratePlacements(ctx, state, newUpstreamGroup(2, false), parent)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, []*fwk.Placement{parent}, r.Placements, "a group without a topology constraint is tried on every node")

	gang := newUpstreamGroup(2, true)
	r, status = f.gang.GeneratePlacements(ctx, state, gang, parent)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, []string{"rack=a"}, placementNames(r), "the rack the gang fills exactly")
	assert.Len(t, r.Placements[0].Nodes, 2)
	assert.Same(t, nodes[0], r.Placements[0].Nodes[0], "placements hold the snapshot's own nodes")

	r, status = f.gang.GeneratePlacements(ctx, state, gang, parent)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, []string{"rack=a", "rack=c", "rack=b"}, placementNames(r), "after a cycle without a feasible placement: every rack that holds it, best fit first")

	_, status = f.gang.ScorePlacement(ctx, framework.NewCycleState(), gang, &fwk.PodGroupAssignments{Placement: r.Placements[0]})
	require.True(t, status.IsSuccess())
	r, _ = f.gang.GeneratePlacements(ctx, state, gang, parent)
	assert.Equal(t, []string{"rack=a"}, placementNames(r), "a feasible placement: the best fit alone again")

	_, status = f.gang.GeneratePlacements(ctx, state, newUpstreamGroup(9, true), parent)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "PodGroupPostFilter may still free a rack")
	assert.Contains(t, status.Message(), "NotEnoughResources: the minimum of pod group ns/g needs cpu 9: no rack domain holds it (the most free: cpu 8 in rack=b)")
}

// Feasible placements rank by the pods they place, then by best fit, then by name, from MaxScore
// down to MinScore.
func TestPlacementScoresRankPodsThenFit(t *testing.T) {
	f := newFixture(t)
	state := framework.NewCycleState()
	state.Write(placementChoiceKey, &placementChoice{free: map[string]float64{"rack=a": 0.1, "rack=b": 0.5, "rack=c": 0.3}})
	scores := []fwk.PlacementScore{
		{Placement: &fwk.Placement{Name: "rack=b"}, Score: 4},
		{Placement: &fwk.Placement{Name: "rack=a"}, Score: 3},
		{Placement: &fwk.Placement{Name: "rack=c"}, Score: 4},
	}
	require.True(t, f.gang.NormalizePlacementScore(context.Background(), state, newUpstreamGroup(3, true), scores).IsSuccess())
	got := map[string]int64{}
	for _, s := range scores {
		got[s.Placement.Name] = s.Score
	}
	assert.Equal(t, map[string]int64{"rack=c": fwk.MaxScore, "rack=b": 50, "rack=a": fwk.MinScore}, got, "c and b place 4 pods, and c fits better; a places 3")
}

// A pod-group cycle of a group whose PodGroup declares its members' data is offered first the rack
// that caches it, before the best fit; the scores rank cached data before fit too.
func TestPlacementsOfferTheRackThatCachesTheDataFirst(t *testing.T) {
	f := newFixture(t)
	f.handle.snapshot = noGroupStates{}
	nodes := []fwk.NodeInfo{
		rackNode("a0", "a", "x", 4), rackNode("a1", "a", "x", 2),
		rackNode("b0", "b", "x", 0), rackNode("b1", "b", "x", 0),
		rackNode("c0", "c", "y", 1), rackNode("c1", "c", "y", 1),
	}
	for _, n := range nodes[2:4] {
		n.Node().Labels["data.tephra.dev/wiki"] = "true"
	}
	gang := newUpstreamGroup(2, true)
	gang.pg.Annotations = map[string]string{"data.tephra.dev/datasets": "wiki"}
	state := framework.NewCycleState()
	r, status := f.gang.GeneratePlacements(context.Background(), state, gang, &fwk.Placement{Nodes: nodes})
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, []string{"rack=b"}, placementNames(r), "the rack that caches wiki, though a fits best")

	scored := framework.NewCycleState()
	scored.Write(placementChoiceKey, &placementChoice{
		data: map[string]float64{"rack=b": 2},
		free: map[string]float64{"rack=a": 0.1, "rack=b": 0.5},
	})
	scores := []fwk.PlacementScore{{Placement: &fwk.Placement{Name: "rack=a"}, Score: 2}, {Placement: &fwk.Placement{Name: "rack=b"}, Score: 2}}
	require.True(t, f.gang.NormalizePlacementScore(context.Background(), scored, gang, scores).IsSuccess())
	assert.Equal(t, fwk.MaxScore, scores[1].Score, "b caches the data")
}
