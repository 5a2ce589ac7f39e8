package gang

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// Pods above their group's minimum wait while another group's minimum may take the capacity,
// and go on once that minimum stalls (or is placed).
func TestElasticMembersWaitForPendingMinimums(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "elastic", 1, nil, f.now)
	f.group(t, "gang", 2, nil, f.now)
	running := f.member(t, "e0", "elastic", "")
	extra := f.member(t, "e1", "elastic", "")
	f.bind(t, running, "node")
	g0 := f.member(t, "g0", "gang", "")
	f.member(t, "g1", "gang", "")

	_, status := f.gang.PreFilter(ctx, nil, extra, nil)
	assert.True(t, status.IsSuccess(), "no minimum waits yet: the elastic pod may take free capacity")

	_, status = f.gang.PreFilter(ctx, nil, g0, []fwk.NodeInfo{bigNode()})
	require.True(t, status.IsSuccess())
	_, status = f.gang.PreFilter(ctx, nil, extra, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "ElasticWaiting: pod e1 is above the minimum of its group and waits while the minimum of pod group ns/gang is being placed")

	// The gang's attempt places nothing: the elastic pod is brought back and may go on.
	_, status = f.gang.PostFilter(ctx, nil, g0, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, f.handle.activated, "ns/e1", "the held elastic pod is activated")
	_, status = f.gang.PreFilter(ctx, nil, extra, nil)
	assert.True(t, status.IsSuccess())
}

// The members of a group refused with its kept verdict are not counted again, in PreFilter nor
// in PostFilter, until an event clears the verdict.
func TestRefusedMembersAreNotCountedAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	counting := &countingIndexer{Indexer: f.pods}
	f.gang.members = counting
	f.group(t, "big", 3, nil, f.now)
	var members []*corev1.Pod
	for i := range 3 {
		members = append(members, f.member(t, fmt.Sprintf("m%d", i), "big", ""))
	}
	small := framework.NewNodeInfo()
	small.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourcePods: "110"}).Obj())

	_, status := f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{small})
	require.Equal(t, fwk.Unschedulable, status.Code())
	_, status = f.gang.PostFilter(ctx, nil, members[0], nil)
	require.Equal(t, fwk.Unschedulable, status.Code())
	before := counting.reads
	for _, m := range members[1:] {
		_, status = f.gang.PreFilter(ctx, nil, m, []fwk.NodeInfo{small})
		assert.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		_, status = f.gang.PostFilter(ctx, nil, m, nil)
		assert.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	}
	assert.Equal(t, before, counting.reads, "the verdict and the first member's PostFilter stand for the others")

	hint, err := f.registeredHint(t, fwk.Node)(klog.Background(), members[1], nil, small.Node())
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint)
	_, _ = f.gang.PreFilter(ctx, nil, members[1], []fwk.NodeInfo{small})
	assert.Greater(t, counting.reads, before, "after an event the group is counted again")
}

// A member tried after its group's minimum was allowed at Permit, while the minimum's binds are
// still in flight, is elastic: it waits for another group's pending minimum like any other.
func TestMemberTriedWhileItsMinimumBindsIsElastic(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "first", 2, nil, f.now)
	f.group(t, "second", 2, nil, f.now)
	a, b := f.member(t, "a0", "first", ""), f.member(t, "a1", "first", "")
	extra := f.member(t, "a2", "first", "")
	s0 := f.member(t, "s0", "second", "")
	f.member(t, "s1", "second", "")
	require.True(t, f.gang.PreEnqueue(ctx, s0).IsSuccess(), "the second group's minimum exists and is queued")

	_, status := f.gang.PreFilter(ctx, nil, a, []fwk.NodeInfo{bigNode()})
	require.True(t, status.IsSuccess())
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	_, status = f.gang.PreFilter(ctx, nil, extra, []fwk.NodeInfo{bigNode()})
	assert.True(t, status.IsSuccess(), "while a0 waits at Permit, any member may complete the minimum")

	_, status = f.gang.PreFilter(ctx, nil, b, []fwk.NodeInfo{bigNode()})
	require.True(t, status.IsSuccess())
	require.True(t, f.permit(t, b).IsSuccess(), "b completes the minimum: both are allowed, neither is bound yet")
	_, status = f.gang.PreFilter(ctx, nil, extra, []fwk.NodeInfo{bigNode()})
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "ElasticWaiting: pod a2 is above the minimum of its group and waits while the minimum of pod group ns/second is being placed")
}

// A gang of 4 with a minimum of 2: one member waits at Permit, and TephraQueue made room for
// another (its victims are still going). A third member that fits nowhere is above that minimum:
// its PostFilter fails no attempt, so the member at Permit keeps its node, and the group is not
// stalled, so elastic pods of other groups do not take the room. Once the room is older than
// roomGrace, the member counts for the minimum again and the attempt fails as before.
func TestAMemberAboveAMinimumWithRoomComingFailsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "job", 2, nil, f.now)
	a, b, c := f.member(t, "a", "job", ""), f.member(t, "b", "job", ""), f.member(t, "c", "job", "")
	f.member(t, "d", "job", "")

	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	f.gang.evictingFor(ctx, b)
	_, status := f.gang.PostFilter(ctx, nil, c, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "has room on its way (1 placed, 1 with room coming)")
	assert.Empty(t, f.handle.waiting["a"].rejected, "the member at Permit keeps its node")
	assert.False(t, f.gang.groups.backingOff(groupKey{"ns", "job"}, f.now), "no attempt failed")

	f.now = f.now.Add(roomGrace)
	_, status = f.gang.PostFilter(ctx, nil, c, nil)
	assert.Equal(t, "NotEnoughResources: 1 of 2 pods of pod group ns/job could be placed; releasing them", status.Message())
	assert.Equal(t, status.Message(), f.handle.waiting["a"].rejected)
}
