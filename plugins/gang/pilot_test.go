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

// While a group's minimum is not placed, one member (the pilot) is tried and the others wait at
// PreEnqueue: a group that cannot fit costs one member's cycles. They follow once the pilot finds
// room, or TephraQueue evicts pods for it; a deleted pilot hands over to another member.
func TestAPilotIsTriedFirstAndTheOthersFollowOnceItFindsRoom(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "big", 3, nil, f.now)
	m0, m1, m2 := f.member(t, "m0", "big", ""), f.member(t, "m1", "big", ""), f.member(t, "m2", "big", "")
	f.member(t, "m3", "big", "") // one more than the minimum: the group outlives its pilot
	small := framework.NewNodeInfo()
	small.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourcePods: "110"}).Obj())

	// Tried for the first time, the group goes on whole: no pilot yet.
	require.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess())
	require.True(t, f.gang.PreEnqueue(ctx, m1).IsSuccess(), "no pilot before the group was found unfit")
	_, status := f.gang.PreFilter(ctx, nil, m0, []fwk.NodeInfo{small})
	require.Equal(t, fwk.Unschedulable, status.Code(), "3 CPUs do not fit 2")

	require.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess(), "the first member to get there is the pilot")
	status = f.gang.PreEnqueue(ctx, m1)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "WaitingForPilot: pod m0 of pod group ns/big is tried first; the other members follow once it finds room for the group's minimum", status.Message())
	require.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess(), "the pilot stays the pilot")

	_, status = f.gang.PreFilter(ctx, nil, m0, []fwk.NodeInfo{small})
	require.Equal(t, fwk.Unschedulable, status.Code(), "3 CPUs do not fit 2")
	assert.Empty(t, f.handle.activated, "a pilot without room brings no one")
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.PreEnqueue(ctx, m2).Code(), "the others still wait")

	// The pilot is deleted: the others are queued, and the next one to get there pilots.
	hint, err := f.registeredHintFor(t, fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete})(klog.Background(), m1, m0, nil)
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint)
	require.NoError(t, f.pods.Delete(m0))
	require.True(t, f.gang.PreEnqueue(ctx, m1).IsSuccess())
	assert.Contains(t, f.gang.PreEnqueue(ctx, m2).Message(), "pod m1 of pod group ns/big is tried first")
	hint, err = f.registeredHintFor(t, fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete})(klog.Background(), m2, m0, nil)
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, hint, "m0 is no longer the pilot")

	// A big node is added: the group is counted again, and fits. The pilot is queued for it; the
	// members held behind the pilot are not (PreEnqueue would only hold them again).
	hint, err = f.registeredHint(t, fwk.Node)(klog.Background(), m2, nil, bigNode().Node())
	require.NoError(t, err)
	require.Equal(t, fwk.QueueSkip, hint, "m2 waits for its pilot, not for capacity")
	hint, err = f.registeredHint(t, fwk.Node)(klog.Background(), m1, nil, bigNode().Node())
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint)
	assert.Contains(t, f.gang.PreEnqueue(ctx, m2).Message(), "is tried first", "an event brings the others back to PreEnqueue only")
	_, status = f.gang.PreFilter(ctx, nil, m1, []fwk.NodeInfo{bigNode()})
	require.True(t, status.IsSuccess(), "%v", status)
	assert.ElementsMatch(t, []string{"ns/m2", "ns/m3"}, f.handle.activated, "room for the minimum brings the others")
	assert.True(t, f.gang.PreEnqueue(ctx, m2).IsSuccess())
}

// A group whose minimum is pilotedFromStart or more has a pilot from its first attempt: a
// minimum that cannot fit costs one member's cycle, not a cycle, a status write and an event for
// every member. A smaller group goes on whole the first time (the test above).
func TestABigGroupIsPilotedFromItsFirstAttempt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "big", pilotedFromStart, nil, f.now)
	var members []*corev1.Pod
	for i := range pilotedFromStart {
		members = append(members, f.member(t, fmt.Sprintf("m%d", i), "big", ""))
	}
	require.True(t, f.gang.PreEnqueue(ctx, members[0]).IsSuccess(), "the first member to get there pilots")
	for _, m := range members[1:] {
		status := f.gang.PreEnqueue(ctx, m)
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%s waits for the pilot", m.Name)
		require.Contains(t, status.Message(), "WaitingForPilot: pod m0 of pod group ns/big is tried first")
	}

	// The pilot finds no room (the minimum needs 100 CPUs): nobody else is tried or brought.
	_, status := f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{bigNode()})
	require.Equal(t, fwk.Unschedulable, status.Code(), "100 CPUs do not fit 64")
	_, _ = f.gang.PostFilter(ctx, nil, members[0], nil)
	assert.Empty(t, f.handle.activated, "the pilot waits for an event, the others for the pilot")

	// A node is added: the pilot is queued for it, the others are not; with room for the
	// minimum, the pilot brings the other 99.
	more := cpuNode("more", 64)
	hint, err := f.registeredHint(t, fwk.Node)(klog.Background(), members[1], nil, more.Node())
	require.NoError(t, err)
	require.Equal(t, fwk.QueueSkip, hint, "a member waits for its pilot, not for capacity")
	hint, err = f.registeredHint(t, fwk.Node)(klog.Background(), members[0], nil, more.Node())
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint)
	_, status = f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{bigNode(), more})
	require.True(t, status.IsSuccess(), "%v", status)
	assert.Len(t, f.handle.activated, pilotedFromStart-1)
	assert.True(t, f.gang.PreEnqueue(ctx, members[1]).IsSuccess(), "admitted: the others go on")
}

// A member refused after its group was found unfit goes back through PreEnqueue (Activate), to be
// held for the group's pilot instead of waiting among the unschedulable pods; the pilot does not.
func TestRefusedMembersGoBackToWaitForThePilot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "big", 3, nil, f.now)
	m0, m1 := f.member(t, "m0", "big", ""), f.member(t, "m1", "big", "")
	f.member(t, "m2", "big", "")
	nodes := []fwk.NodeInfo{cpuNode("small", 2)}
	require.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess())
	require.True(t, f.gang.PreEnqueue(ctx, m1).IsSuccess(), "tried for the first time: no pilot")

	_, status := f.gang.PreFilter(ctx, nil, m0, nodes)
	require.Equal(t, fwk.Unschedulable, status.Code())
	_, _ = f.gang.PostFilter(ctx, nil, m0, nil)
	assert.Equal(t, []string{"ns/m0"}, f.handle.activated, "no pilot yet: m0 goes back to PreEnqueue")
	require.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess(), "and pilots")

	f.handle.activated = nil
	_, status = f.gang.PreFilter(ctx, nil, m1, nodes)
	require.Equal(t, fwk.Unschedulable, status.Code(), "refused with the group's verdict")
	_, _ = f.gang.PostFilter(ctx, nil, m1, nil)
	assert.Equal(t, []string{"ns/m1"}, f.handle.activated)
	assert.Contains(t, f.gang.PreEnqueue(ctx, m1).Message(), "pod m0 of pod group ns/big is tried first", "m1 is held for the pilot")

	f.handle.activated = nil
	_, _ = f.gang.PostFilter(ctx, nil, m0, nil)
	assert.Empty(t, f.handle.activated, "the pilot waits for an event")
}
