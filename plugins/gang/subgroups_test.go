package gang

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// replicaGroup is a group of n sub-groups ("r0", "r1", ...) of size members of 1 CPU each, each
// sub-group required in one rack and the group in one block, changed by mutate; it returns the
// members by sub-group.
func replicaGroup(t *testing.T, f *fixture, n, size int, mutate ...func(*v1alpha1.PodGroup)) [][]*corev1.Pod {
	t.Helper()
	pg := f.group(t, "train", int32(n*size), nil, f.now)
	pg.Spec.Topology = &v1alpha1.PodGroupTopology{Required: "block"}
	var members [][]*corev1.Pod
	for i := range n {
		sub := fmt.Sprintf("r%d", i)
		pg.Spec.SubGroups = append(pg.Spec.SubGroups, v1alpha1.SubGroup{Name: sub, MinMember: int32(size), Topology: &v1alpha1.PodGroupTopology{Required: "rack"}})
		var pods []*corev1.Pod
		for j := range size {
			pod := f.member(t, fmt.Sprintf("%s-%d", sub, j), "train", "")
			pod.Labels[v1alpha1.SubGroupLabel] = sub
			require.NoError(t, f.pods.Update(pod))
			pods = append(pods, pod)
		}
		members = append(members, pods)
	}
	for _, m := range mutate {
		m(pg)
	}
	require.NoError(t, f.groups.Update(pg))
	return members
}

// Every member is offered its own sub-group's rack, in the group's block, as chosen before the
// first member was placed; the group waits at Permit until every sub-group is whole, though its
// own minMember is met before, and none of it is placed when one sub-group has no rack.
func TestSubGroupsArePlacedEachInItsDomain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 2, 4, func(pg *v1alpha1.PodGroup) {
		pg.Spec.MinMember = 4 // met by one replica alone: the sub-groups decide
	})
	// Block x: racks of 4 and 3 free CPUs (7 free, but only one rack holds a replica). Block y:
	// two racks of 4.
	nodes := []fwk.NodeInfo{
		rackNode("x1", "x1", "x", 0), rackNode("x2", "x2", "x", 1),
		rackNode("y1", "y1", "y", 0), rackNode("y2", "y2", "y", 0),
	}
	racks := map[string]string{}
	var last *corev1.Pod
	for i, pod := range append(members[0], members[1]...) {
		if i == 1 {
			// Once the attempt is under way, the members keep the domains chosen for it,
			// whatever the nodes look like now.
			nodes = []fwk.NodeInfo{
				rackNode("x1", "x1", "x", 0), rackNode("x2", "x2", "x", 0),
				rackNode("y1", "y1", "y", 0), rackNode("y2", "y2", "y", 0),
			}
		}
		result, status := f.gang.PreFilter(ctx, nil, pod, nodes)
		require.True(t, status.IsSuccess(), "%s: %v", pod.Name, status)
		require.Len(t, result.NodeNames, 1, "%s is offered its sub-group's rack alone", pod.Name)
		node := result.NodeNames.UnsortedList()[0]
		if rack, ok := racks[v1alpha1.SubGroupOf(pod)]; ok {
			assert.Equal(t, rack, node, "the members of a sub-group share its rack")
		}
		racks[v1alpha1.SubGroupOf(pod)] = node
		if pod == members[1][3] {
			last = pod
			break
		}
		assert.Equal(t, fwk.Wait, f.permit(t, pod).Code(), "%s waits: a sub-group is not whole", pod.Name)
	}
	assert.ElementsMatch(t, []string{"y1", "y2"}, []string{racks["r0"], racks["r1"]}, "block y holds both replicas, one a rack")
	assert.True(t, f.permit(t, last).IsSuccess(), "the last member makes both sub-groups whole")
	for _, pod := range append(members[0], members[1][:3]...) {
		assert.True(t, f.handle.waiting[pod.UID].allowed, "%s is let go with it", pod.Name)
	}
}

// With one rack short in every block, no member is placed, and the refusal says which sub-group
// has no rack.
func TestSubGroupsThatDoNotAllFitPlaceNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 2, 4)
	nodes := []fwk.NodeInfo{
		rackNode("x1", "x1", "x", 0), rackNode("x2", "x2", "x", 1),
		rackNode("y1", "y1", "y", 0), rackNode("y2", "y2", "y", 2),
	}
	_, status := f.gang.PreFilter(ctx, nil, members[0][0], nodes)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "NotEnoughResources: the sub-groups of pod group ns/train do not fit: no block domain holds them")
	assert.Contains(t, status.Message(), "sub-group r1: no rack domain holds its 4 more members")
}

// A sub-group short of members holds the group at PreEnqueue, and says which.
func TestSubGroupsShortOfMembersWait(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 2, 2, func(pg *v1alpha1.PodGroup) {
		pg.Spec.MinMember = 1
	})
	require.NoError(t, f.pods.Delete(members[1][1]))
	status := f.gang.PreEnqueue(ctx, members[0][0])
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "WaitingForMembers: pod group ns/train: 1 of the 2 sub-groups it needs have their minimum of pods (r1 has 1 of 2)", status.Message())

	require.NoError(t, f.pods.Add(members[1][1]))
	assert.True(t, f.gang.PreEnqueue(ctx, members[0][0]).IsSuccess(), "every sub-group has its members")
}

// A sub-group topology level that the Topology lacks refuses the group with the reason, and
// nothing panics.
func TestASubGroupTopologyThatCannotBeResolvedSaysWhy(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 1, 2, func(pg *v1alpha1.PodGroup) {
		pg.Spec.SubGroups[0].Topology = &v1alpha1.PodGroupTopology{Name: "missing", Required: "rack"}
	})
	_, status := f.gang.PreFilter(ctx, nil, members[0][0], []fwk.NodeInfo{rackNode("a", "a", "x", 0)})
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, `InvalidPodGroup: pod group ns/train: sub-group r0: topology: Topology "missing" does not exist`, status.Message())
}

// A replica restarted while the others run (its group's minMember bound all along) is still a
// gang: when one of its members is unreserved, the others waiting are released, not bound as a
// part of a replica.
func TestARestartedSubGroupIsReleasedWhole(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := replicaGroup(t, f, 2, 2, func(pg *v1alpha1.PodGroup) {
		pg.Spec.MinMember = 2
		pg.Status.Phase = v1alpha1.PodGroupRunning // it ran: r0 runs, and r1 was restarted
	})
	for _, pod := range members[0] {
		f.bind(t, pod, "node")
	}
	require.Equal(t, fwk.Wait, f.permit(t, members[1][0]).Code(), "r1 is not whole")
	f.gang.Unreserve(ctx, nil, members[1][0], "node")
	select {
	case event := <-f.handle.recorder.Events:
		assert.Contains(t, event, "Warning ScheduleTimeout", "the attempt failed")
	default:
		t.Fatal("the group's bound minMember kept the attempt of a partial replica")
	}
	_, status := f.gang.PreFilter(ctx, nil, members[1][1], nil)
	assert.Contains(t, status.Message(), "backing off", "the replica's attempt failed and backs off")
}
