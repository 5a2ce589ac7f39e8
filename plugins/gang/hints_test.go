package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

func TestMemberAddedQueuesTheGroupOnlyWhenItCompletesTheMinimum(t *testing.T) {
	f := newFixture(t)
	f.group(t, "job", 3, map[string]int32{"ps": 1}, f.now)
	waiting := f.member(t, "w1", "job", "worker")
	hint := func(added *corev1.Pod) fwk.QueueingHint {
		h, err := f.gang.isSchedulableAfterMemberAdded(klog.Background(), waiting, nil, added)
		require.NoError(t, err)
		return h
	}
	assert.Equal(t, fwk.QueueSkip, hint(f.member(t, "w2", "job", "worker")), "2 of 3: still short")
	assert.Equal(t, fwk.QueueSkip, hint(f.member(t, "w3", "job", "worker")), "3 of 3 but the ps task is short")
	assert.Equal(t, fwk.Queue, hint(f.member(t, "ps", "job", "ps")), "the ps completes the minimum")
	assert.Equal(t, fwk.QueueSkip, hint(f.member(t, "w4", "job", "worker")), "members beyond the minimum do not help")
	assert.Equal(t, fwk.QueueSkip, hint(f.member(t, "other", "other-job", "")), "another group's member")
}

// The informer's store can be ahead of the queue's events: when the queue sees the addition that
// completed the minimum, more members may already be there. The first addition seen with the
// minimum present still queues the group, for every waiting member; later ones do not.
func TestMemberAddedQueuesTheGroupWhenTheStoreIsAheadOfTheEvents(t *testing.T) {
	f := newFixture(t)
	pg := f.group(t, "job", 3, nil, f.now)
	w1, w2 := f.member(t, "w1", "job", ""), f.member(t, "w2", "job", "")
	status := f.gang.PreEnqueue(context.Background(), w1)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "2 of 3: the member is gated")
	w3 := f.member(t, "w3", "job", "")
	w4 := f.member(t, "w4", "job", "") // in the store before the queue hears of w3
	hint := func(waiting, added *corev1.Pod) fwk.QueueingHint {
		h, err := f.gang.isSchedulableAfterMemberAdded(klog.Background(), waiting, nil, added)
		require.NoError(t, err)
		return h
	}
	assert.Equal(t, fwk.Queue, hint(w1, w3), "w3's addition is the first seen with the minimum present")
	assert.Equal(t, fwk.Queue, hint(w2, w3), "the same event queues every waiting member")
	assert.Equal(t, fwk.QueueSkip, hint(w1, w4), "w4 comes after the minimum was queued")

	// A member lost: the group is short again, and the next completion queues it again.
	require.NoError(t, f.pods.Delete(w3))
	require.NoError(t, f.pods.Delete(w4))
	require.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.PreEnqueue(context.Background(), w1).Code())
	w5 := f.member(t, "w5", "job", "")
	f.member(t, "w6", "job", "")
	assert.Equal(t, fwk.Queue, hint(w1, w5), "pod group %s complete again", pg.Name)
}

// Members held at PreEnqueue because their group lacks members are not queued by capacity
// events (a node added, a pod deleted), only by the member that completes the minimum.
func TestCapacityEventsSkipAGroupShortOfMembers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "big", 2, nil, f.now)
	m0 := f.member(t, "m0", "big", "")
	require.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.PreEnqueue(ctx, m0).Code(), "1 of 2 members")
	nodeAdded := f.registeredHint(t, fwk.Node)
	podDeleted := f.registeredHintFor(t, fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete})
	gone := f.member(t, "gone", "", "")
	gone.Spec.NodeName = "n"
	for name, hint := range map[string]fwk.QueueingHintFn{"node added": nodeAdded, "pod deleted": podDeleted} {
		h, err := hint(klog.Background(), m0, gone, bigNode().Node())
		require.NoError(t, err)
		assert.Equal(t, fwk.QueueSkip, h, name)
	}
	m1 := f.member(t, "m1", "big", "")
	h, err := f.registeredHintFor(t, fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add | fwk.UpdatePodLabel})(klog.Background(), m0, nil, m1)
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, h, "the member that completes the minimum")
	require.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess(), "m0 pilots")
	h, err = nodeAdded(klog.Background(), m0, nil, bigNode().Node())
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, h, "the pilot waits for capacity")
}

// Pods evicted for a member by TephraQueue's PostFilter let the member's group go on: its other
// members need evictions of their own.
func TestEvictionsForAMemberBringItsGroup(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "g", 2, nil, f.now)
	p0, p1 := f.member(t, "p0", "g", ""), f.member(t, "p1", "g", "")
	_, status := f.gang.PreFilter(ctx, nil, p0, []fwk.NodeInfo{cpuNode("tiny", 1)})
	require.Equal(t, fwk.Unschedulable, status.Code(), "2 CPUs do not fit 1: from now on the group has a pilot")
	require.True(t, f.gang.PreEnqueue(ctx, p0).IsSuccess())
	require.False(t, f.gang.PreEnqueue(ctx, p1).IsSuccess())

	setup.EvictingFor(ctx, f.handle, p0)
	assert.Equal(t, []string{"ns/p1"}, f.handle.activated)
	assert.True(t, f.gang.PreEnqueue(ctx, p1).IsSuccess())
	f.handle.activated = nil
	setup.EvictingFor(ctx, f.handle, p1)
	assert.Empty(t, f.handle.activated, "admitted once")
}

// The flake of TestMinimumPreemptsElasticPodsInQueue (test/e2e/elastic): the last member of a
// gang to be created is tried alone, finds the group unfit and gets an eviction in that cycle,
// before any member is the group's pilot; it then pilots, and the others wait at PreEnqueue. The
// eviction must still bring them: the pilot may evict only once per victimsGrace, so alone it
// freed one GPU per 10 s.
func TestEvictionsInTheCycleThatFoundTheGroupUnfitBringIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "g", 3, nil, f.now)
	p0, p1, p2 := f.member(t, "p0", "g", ""), f.member(t, "p1", "g", ""), f.member(t, "p2", "g", "")
	require.True(t, f.gang.PreEnqueue(ctx, p2).IsSuccess(), "tried for the first time: no pilot")
	_, status := f.gang.PreFilter(ctx, nil, p2, []fwk.NodeInfo{cpuNode("tiny", 1)})
	require.Equal(t, fwk.Unschedulable, status.Code(), "3 CPUs do not fit 1")
	setup.EvictingFor(ctx, f.handle, p2) // TephraQueue's PostFilter, same cycle

	// p2 comes back first (its victim is deleted), where it would pilot; the others are let go.
	require.True(t, f.gang.PreEnqueue(ctx, p2).IsSuccess())
	assert.True(t, f.gang.PreEnqueue(ctx, p0).IsSuccess(), "held for a pilot pods were evicted for: %v", f.gang.PreEnqueue(ctx, p0))
	assert.True(t, f.gang.PreEnqueue(ctx, p1).IsSuccess())
	assert.ElementsMatch(t, []string{"ns/p0", "ns/p1"}, f.handle.activated, "brought back, wherever they wait")
}

// A PodGroup's status is written by tephra-controllers from its members' conditions; an update of
// the status alone queues nobody, since it cannot let a member go on, and each refusal of a member
// would otherwise come back as an update that queues it again.
func TestOnlyAPodGroupsSpecOrAnnotationsQueueItsMembers(t *testing.T) {
	f := newFixture(t)
	pg := f.group(t, "g", 2, nil, f.now)
	m0 := f.member(t, "m0", "g", "")
	hint := f.registeredHint(t, podGroupEvent)
	pg.Generation = 1
	status := pg.DeepCopy()
	status.Status.Phase = v1alpha1.PodGroupPending
	h, err := hint(klog.Background(), m0, pg, status)
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, h, "status only")

	lowered := pg.DeepCopy()
	lowered.Spec.MinMember, lowered.Generation = 1, 2
	h, err = hint(klog.Background(), m0, pg, lowered)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, h, "minimum lowered")

	annotated := pg.DeepCopy()
	annotated.Annotations = map[string]string{v1alpha1.SLAWaitingTimeAnnotation: "30s"}
	h, err = hint(klog.Background(), m0, pg, annotated)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, h, "SLA set")

	h, err = hint(klog.Background(), m0, nil, pg)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, h, "created")
}

// kube-scheduler asks no queueing hint about a created pod (unless GenericWorkload is on): the
// plugin brings back the members held for want of members itself when the minimum is complete.
func TestTheMemberThatCompletesTheMinimumBringsTheOthers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "g", 3, nil, f.now)
	m0, m1 := f.member(t, "m0", "g", ""), f.member(t, "m1", "g", "")
	require.False(t, f.gang.PreEnqueue(ctx, m0).IsSuccess())
	f.gang.memberCreated(m1)
	require.False(t, f.gang.PreEnqueue(ctx, m1).IsSuccess())
	assert.Empty(t, f.handle.activated, "2 of 3")

	m2 := f.member(t, "m2", "g", "")
	f.gang.memberCreated(m2)
	assert.ElementsMatch(t, []string{"ns/m0", "ns/m1"}, f.handle.activated)
	f.handle.activated = nil
	f.gang.memberCreated(f.member(t, "m3", "g", ""))
	assert.Empty(t, f.handle.activated, "an extra member brings nobody")
}

// With GenericWorkload on, kube-scheduler's GangScheduling holds the members of a group its
// pod-group cycles schedule until they exist, and TephraGang's PreEnqueue lets them by: the member
// that completes the minimum brings nobody back, and the group's members are not counted for it.
func TestAMemberInPodGroupCyclesBringsNobody(t *testing.T) {
	f := newFixture(t)
	f.gang.podGroupCycles = true
	f.group(t, "g", 2, nil, f.now)
	inCycles := func(name string) *corev1.Pod {
		obj, _, err := f.pods.GetByKey("ns/" + f.member(t, name, "g", "").Name)
		require.NoError(t, err)
		p := obj.(*corev1.Pod).DeepCopy()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("g")}
		require.NoError(t, f.pods.Update(p))
		return p
	}
	m0 := inCycles("m0")
	require.True(t, f.gang.PreEnqueue(context.Background(), m0).IsSuccess(), "GangScheduling holds it, not TephraGang")
	f.gang.memberCreated(inCycles("m1"))
	assert.Empty(t, f.handle.activated)
}

// A claim's devices freed brings back the members of groups that claim devices; the scheduler's
// own allocations, and pods without claims, are left alone.
func TestClaimFreedQueuesDeviceMembers(t *testing.T) {
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Labels: map[string]string{v1alpha1.PodGroupLabel: "g"}},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}}}
	plain := member.DeepCopy()
	plain.Spec.ResourceClaims = nil
	allocated := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	free := &resourceapi.ResourceClaim{}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		old, new any
		want     fwk.QueueingHint
	}{
		{"deallocated", member, allocated, free, fwk.Queue},
		{"deleted allocated", member, allocated, nil, fwk.Queue},
		{"allocated", member, free, allocated, fwk.QueueSkip},
		{"still allocated", member, allocated, allocated, fwk.QueueSkip},
		{"a member without claims", plain, allocated, free, fwk.QueueSkip},
	} {
		got, err := isSchedulableAfterClaimFreed(klog.Background(), tc.pod, tc.old, tc.new)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// A change of the devices the slices offer tries the groups found unfit again: the scheduling
// queue's own slice event may have come before the plugin's view of the devices had the slice.
func TestDevicesChangedRetriesUnfitGroups(t *testing.T) {
	f := newFixture(t)
	f.gang.queueRunning.Store(true)
	f.group(t, "g", 2, nil, f.now)
	f.member(t, "m0", "g", "")
	f.gang.unfit(groupKey{"ns", "g"}, "NotEnoughResources: 3 of 4 devices", 0)

	f.gang.devicesChanged(nil)
	assert.Equal(t, []string{"ns/m0"}, f.handle.takeActivated(), "the group's pending members are tried again")
	f.gang.groups.with(groupKey{"ns", "g"}, func(s *groupState) { assert.Empty(t, s.unfit, "the verdict is forgotten") })
	f.gang.devicesChanged(nil)
	assert.Empty(t, f.handle.takeActivated(), "nothing unfit: nothing to try")
}

// A node relabelled or untainted may join a group's reach (a pool its members' affinity names):
// the group's members come back for it, as for a node added.
func TestNodeJoiningAPoolQueuesTheGroups(t *testing.T) {
	f := newFixture(t)
	events, err := f.gang.EventsToRegister(context.Background())
	require.NoError(t, err)
	var node fwk.ActionType
	for _, e := range events {
		if e.Event.Resource == fwk.Node {
			node |= e.Event.ActionType
		}
	}
	for name, action := range map[string]fwk.ActionType{"added": fwk.Add, "grown": fwk.UpdateNodeAllocatable, "relabelled": fwk.UpdateNodeLabel, "untainted": fwk.UpdateNodeTaint} {
		assert.NotZero(t, node&action, "a node %s brings waiting groups back", name)
	}
}

// kube-scheduler and TephraGang watch PodGroups through informers of their own, heard in no set
// order: a member kube-scheduler requeued on its event for a lowered minimum may meet the old
// PodGroup at PreEnqueue and be held there again, short of members. TephraGang's own update
// brings the group's members back; an update of the status alone brings nobody (issue #38).
func TestAChangedPodGroupBringsBackItsMembers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pg := f.group(t, "g", 3, nil, f.now)
	pg.Generation = 1
	m0, m1 := f.member(t, "m0", "g", ""), f.member(t, "m1", "g", "")
	require.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.PreEnqueue(ctx, m0).Code(), "2 of 3 members exist")
	require.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.PreEnqueue(ctx, m1).Code())

	lowered := pg.DeepCopy()
	lowered.Spec.MinMember, lowered.Generation = 2, 2
	require.NoError(t, f.groups.Update(lowered))
	f.gang.podGroupChanged(pg, lowered)
	assert.ElementsMatch(t, []string{"ns/m0", "ns/m1"}, f.handle.takeActivated(), "the members held on the old minimum come back")
	assert.True(t, f.gang.PreEnqueue(ctx, m0).IsSuccess())

	running := lowered.DeepCopy()
	running.Status.Phase = v1alpha1.PodGroupRunning
	f.gang.podGroupChanged(lowered, running)
	assert.Empty(t, f.handle.takeActivated(), "a status update brings nobody back")
}
