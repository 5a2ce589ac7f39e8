package gang

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// minTwoOfThree makes a replica group need 2 of its 3 sub-groups of 2.
func minTwoOfThree(pg *v1alpha1.PodGroup) {
	pg.Spec.MinMember = 4
	pg.Spec.MinSubGroups = ptr.To[int32](2)
}

// A group that needs 2 of its 3 replicas runs with the 2 that fit: the third's members are
// refused while the others are placed, the first two bind once both are whole, and the third is
// placed later, whole, in its own rack, binding only once it is whole itself.
func TestAMinimumOfSubGroupsRunsWithThoseThatFit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 3, 2, minTwoOfThree)
	// Block x: racks x1 and x2 hold a replica each, x3 (1 CPU free) none.
	nodes := []fwk.NodeInfo{rackNode("x1", "x1", "x", 2), rackNode("x2", "x2", "x", 2), rackNode("x3", "x3", "x", 3)}

	_, status := f.gang.PreFilter(ctx, nil, members[2][0], nodes)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "r2 does not fit: %v", status)
	assert.Contains(t, status.Message(), "sub-group r2 of pod group ns/train waits")

	first := append(append([]*corev1.Pod{}, members[0]...), members[1]...)
	racks := map[string]string{}
	for i, pod := range first {
		result, status := f.gang.PreFilter(ctx, nil, pod, nodes)
		require.True(t, status.IsSuccess(), "%s: %v", pod.Name, status)
		require.Len(t, result.NodeNames, 1)
		racks[v1alpha1.SubGroupOf(pod)] = result.NodeNames.UnsortedList()[0]
		if i < len(first)-1 {
			assert.Equal(t, fwk.Wait, f.permit(t, pod).Code(), "%s waits for the second replica", pod.Name)
			// While the attempt is under way, r2 is still left out, and its PostFilter (which
			// the framework runs after any PreFilter refusal) does not fail the attempt.
			_, status := f.gang.PreFilter(ctx, nil, members[2][1], nodes)
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
			_, status = f.gang.PostFilter(ctx, nil, members[2][1], nil)
			assert.Equal(t, fwk.Unschedulable, status.Code())
			assert.Empty(t, status.Message(), "the attempt goes on")
		}
	}
	assert.ElementsMatch(t, []string{"x1", "x2"}, []string{racks["r0"], racks["r1"]})
	assert.True(t, f.permit(t, first[len(first)-1]).IsSuccess(), "2 of the 3 replicas are whole: the group runs")
	for _, pod := range first {
		f.gang.PostBind(ctx, nil, pod, racks[v1alpha1.SubGroupOf(pod)])
		f.bind(t, pod, racks[v1alpha1.SubGroupOf(pod)])
	}

	// Rack x3 frees: r2 is placed there, whole, as a gang of its own.
	nodes = []fwk.NodeInfo{rackNode("x1", "x1", "x", 4), rackNode("x2", "x2", "x", 4), rackNode("x3", "x3", "x", 2)}
	for _, pod := range members[2] {
		result, status := f.gang.PreFilter(ctx, nil, pod, nodes)
		require.True(t, status.IsSuccess(), "%s: %v", pod.Name, status)
		assert.Equal(t, []string{"x3"}, result.NodeNames.UnsortedList(), "%s goes to its replica's rack, not anywhere", pod.Name)
	}
	assert.Equal(t, fwk.Wait, f.permit(t, members[2][0]).Code(), "r2 binds only whole, though the group runs")
	assert.True(t, f.permit(t, members[2][1]).IsSuccess())
	assert.True(t, f.handle.waiting[members[2][0].UID].allowed)
}

// A sub-group above the group's minimum of sub-groups is a gang of its own: when one of its
// members is unreserved, its others waiting are released, though the group's minimum is bound.
func TestASubGroupAboveTheMinimumIsReleasedWhole(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 3, 2, minTwoOfThree)
	for _, pod := range append(append([]*corev1.Pod{}, members[0]...), members[1]...) {
		f.bind(t, pod, "node")
	}
	require.Equal(t, fwk.Wait, f.permit(t, members[2][0]).Code(), "r2 is not whole")
	f.gang.Unreserve(ctx, nil, members[2][0], "node")
	select {
	case event := <-f.handle.recorder.Events:
		assert.Contains(t, event, "Warning ScheduleTimeout", "the attempt failed")
	default:
		t.Fatal("the group's bound minimum kept the attempt of a partial replica")
	}
}

// The group waits at PreEnqueue only until its minimum of sub-groups has its pods.
func TestAMinimumOfSubGroupsWaitsForThoseItNeeds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 3, 2, minTwoOfThree)
	require.NoError(t, f.pods.Delete(members[2][1]))
	assert.True(t, f.gang.PreEnqueue(ctx, members[0][0]).IsSuccess(), "r0 and r1 have their pods")
	require.NoError(t, f.pods.Delete(members[1][1]))
	status := f.gang.PreEnqueue(ctx, members[0][0])
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), "1 of the 2 sub-groups it needs have their minimum of pods")
}

// subGroupsMet: the minimum of sub-groups whole, none in part.
func TestSubGroupsMet(t *testing.T) {
	pg := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinSubGroups: ptr.To[int32](2), SubGroups: []v1alpha1.SubGroup{
		{Name: "a", MinMember: 2}, {Name: "b", MinMember: 2}, {Name: "c", MinMember: 2},
	}}}
	assert.True(t, subGroupsMet(pg, map[string]int{"a": 2, "b": 3}))
	assert.True(t, subGroupsMet(pg, map[string]int{"a": 2, "b": 2, "c": 2}))
	assert.False(t, subGroupsMet(pg, map[string]int{"a": 2, "c": 1}), "one whole")
	assert.False(t, subGroupsMet(pg, map[string]int{"a": 2, "b": 2, "c": 1}), "c is in part")
	pg.Spec.MinSubGroups = nil
	assert.False(t, subGroupsMet(pg, map[string]int{"a": 2, "b": 2}), "all are needed by default")
	assert.True(t, subGroupsMet(&v1alpha1.PodGroup{}, nil), "no sub-groups")
}

// A composite child's member whose child is not in the mirror's spec (yet) waits: placed, it
// would be alone. A pod of a sub-group its group no longer lists, not a composite's, does not.
func TestAMemberOfAChildTheMirrorLacksWaits(t *testing.T) {
	f := newFixture(t)
	members := replicaGroup(t, f, 2, 2, minTwoOfThree, func(pg *v1alpha1.PodGroup) {
		pg.Spec.MinSubGroups = nil
		pg.Spec.SubGroups = pg.Spec.SubGroups[:1]
		pg.Spec.MinMember = 2
	})
	nodes := []fwk.NodeInfo{rackNode("x1", "x1", "x", 0)}
	_, status := f.gang.PreFilter(context.Background(), nil, members[1][0], nodes)
	assert.NotEqual(t, "WaitingForMembers", strings.SplitN(status.Message(), ":", 2)[0], "%v", status)

	members[1][0].Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("r1")}
	_, status = f.gang.PreFilter(context.Background(), nil, members[1][0], nodes)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "WaitingForMembers: sub-group r1 is not one of the subGroups of pod group ns/train; the pod waits for it", status.Message())
}

// A sub-group short of members when the group's attempt began is left out of it, and so are its
// members created while the attempt goes on. Once the attempt's members are bound, nothing else
// may happen in the cluster: the left-out members are brought back then, and the sub-group is
// placed whole in a rack of its own.
func TestASubGroupLeftOutOfAnAttemptIsTriedOnceTheAttemptIsBound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 3, 2, minTwoOfThree)
	f.gang.queueRunning.Store(true) // the scheduling queue has begun: pods may be activated
	late := members[2][1]
	require.NoError(t, f.pods.Delete(late))
	nodes := []fwk.NodeInfo{rackNode("x1", "x1", "x", 0), rackNode("x2", "x2", "x", 0), rackNode("x3", "x3", "x", 0)}

	first := append(append([]*corev1.Pod{}, members[0]...), members[1]...)
	racks := map[string]string{}
	for i, pod := range first {
		result, status := f.gang.PreFilter(ctx, nil, pod, nodes)
		require.True(t, status.IsSuccess(), "%s: %v", pod.Name, status)
		racks[pod.Name] = result.NodeNames.UnsortedList()[0]
		if i < len(first)-1 {
			require.Equal(t, fwk.Wait, f.permit(t, pod).Code())
		}
		if i == 0 {
			// r2's second pod is created while the attempt goes on: r2 stays left out of it.
			require.NoError(t, f.pods.Add(late))
			for _, pod := range members[2] {
				_, status := f.gang.PreFilter(ctx, nil, pod, nodes)
				assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%s: %v", pod.Name, status)
				assert.Contains(t, status.Message(), "sub-group r2 of pod group ns/train waits")
			}
		}
	}
	require.True(t, f.permit(t, first[len(first)-1]).IsSuccess())
	f.handle.takeActivated()
	for i, pod := range first {
		f.bind(t, pod, racks[pod.Name])
		f.gang.PostBind(ctx, nil, pod, racks[pod.Name])
		if i < len(first)-1 {
			assert.Empty(t, f.handle.takeActivated(), "binds of the attempt are under way")
		}
	}
	assert.ElementsMatch(t, []string{"ns/r2-0", "ns/r2-1"}, f.handle.takeActivated(),
		"the attempt is bound: the sub-group it left out is tried again")

	nodes = []fwk.NodeInfo{rackNode("x1", "x1", "x", 4), rackNode("x2", "x2", "x", 4), rackNode("x3", "x3", "x", 0)}
	for _, pod := range members[2] {
		result, status := f.gang.PreFilter(ctx, nil, pod, nodes)
		require.True(t, status.IsSuccess(), "%s: %v", pod.Name, status)
		assert.Equal(t, []string{"x3"}, result.NodeNames.UnsortedList(), "%s goes to the rack left free", pod.Name)
	}
}
