package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

func TestArgsDefaultsAndValidation(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, int64(60), *args.DefaultScheduleTimeoutSeconds)
	assert.Equal(t, int64(1), *args.GroupBackoffSeconds)
	assert.Equal(t, int64(10), *args.MaxGroupBackoffSeconds)
	assert.True(t, *args.Consolidation.Enabled, "consolidation only moves pods that may move: on by default")
	assert.Equal(t, int32(8), *args.Consolidation.MaxMovesPerGang)
	assert.Equal(t, int64(3600), *args.AttainedServiceFirstLevelSeconds, "an accelerator-hour")

	for raw, want := range map[string]string{
		`{"consolidation": {"maxMovesPerGang": 0}}`:               "consolidation.maxMovesPerGang: 0 is not between 1 and 1000",
		`{"consolidation": {"enable": false}}`:                    `unknown field "enable"`,
		`{"defaultScheduleTimeoutSeconds": 0}`:                    "defaultScheduleTimeoutSeconds: 0 is not between 1 and 86400",
		`{"groupBackoffSeconds": -1}`:                             "groupBackoffSeconds: -1 must not be negative",
		`{"groupBackoffSeconds": 5, "maxGroupBackoffSeconds": 2}`: "maxGroupBackoffSeconds: 2 must be at least groupBackoffSeconds (5)",
		`{"defaultScheduleTimeoutSecond": 30}`:                    `unknown field "defaultScheduleTimeoutSecond"`,
		`{"attainedServiceFirstLevelSeconds": 0}`:                 "attainedServiceFirstLevelSeconds: 0 must be at least 1",
	} {
		_, err := ParseArgs(&runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON})
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), want)
	}
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"defaultScheduleTimeoutSeconds": 5}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, int64(5), *args.DefaultScheduleTimeoutSeconds)
}

func TestLessKeepsGroupsTogetherAndOrdersThemByCreation(t *testing.T) {
	f := newFixture(t)
	t0 := f.now
	f.group(t, "old", 2, nil, t0)
	f.group(t, "new", 2, nil, t0.Add(time.Minute))
	oldA, oldB := f.member(t, "old-a", "old", ""), f.member(t, "old-b", "old", "")
	newA := f.member(t, "new-a", "new", "")
	plain := f.member(t, "plain", "", "")
	for _, pod := range []*corev1.Pod{oldA, oldB, newA} {
		f.gang.PreEnqueue(context.Background(), pod) // learns the groups' creation times
	}

	// Pods queued in an interleaved order: old-a late, new-a early.
	qOldA, qOldB := queued(t, oldA, t0.Add(3*time.Minute)), queued(t, oldB, t0.Add(time.Minute))
	qNewA := queued(t, newA, t0.Add(2*time.Minute))
	assert.True(t, f.gang.Less(qOldA, qNewA), "the older group goes first whatever its pods' queue times")
	assert.False(t, f.gang.Less(qNewA, qOldA))
	assert.True(t, f.gang.Less(qOldB, qOldA), "within a group, by queue time")

	qPlain := queued(t, plain, t0.Add(30*time.Second))
	assert.True(t, f.gang.Less(qPlain, qNewA), "a plain pod is ordered by its queue time against groups' creation")
	assert.False(t, f.gang.Less(qPlain, qOldA))

	high := f.member(t, "high", "new", "")
	high.Spec.Priority = ptr.To[int32](100)
	assert.True(t, f.gang.Less(queued(t, high, t0.Add(time.Hour)), qOldA), "priority comes first")

	// A failure moves the old group behind the new one.
	f.gang.groups.with(groupKey{"ns", "old"}, func(s *groupState) { s.lastFailure = t0.Add(5 * time.Minute) })
	assert.True(t, f.gang.Less(qNewA, qOldA), "a group that just failed goes behind")
}

func TestPreEnqueueWaitsForMinMemberAndTaskMinimums(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "job", 3, map[string]int32{"ps": 1, "worker": 2}, f.now)

	w1 := f.member(t, "w1", "job", "worker")
	status := f.gang.PreEnqueue(ctx, w1)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "WaitingForMembers: 1 of 3 pods of pod group ns/job exist (minMember 3)", status.Message())

	f.member(t, "w2", "job", "worker")
	w3 := f.member(t, "w3", "job", "worker")
	status = f.gang.PreEnqueue(ctx, w3)
	assert.Equal(t, "WaitingForMembers: pod group ns/job: task ps has 0 of 1 (minTaskMember)", status.Message(), "three pods exist but no ps")

	ps := f.member(t, "ps", "job", "ps")
	assert.True(t, f.gang.PreEnqueue(ctx, ps).IsSuccess())

	// Ended or deleted members do not count.
	w2, _, _ := f.pods.GetByKey("ns/w2")
	ended := w2.(*corev1.Pod).DeepCopy()
	ended.Status.Phase = corev1.PodFailed
	require.NoError(t, f.pods.Update(ended))
	deleting := w3.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: f.now}
	require.NoError(t, f.pods.Update(deleting))
	status = f.gang.PreEnqueue(ctx, ps)
	assert.Equal(t, "WaitingForMembers: 2 of 3 pods of pod group ns/job exist (minMember 3)", status.Message())

	assert.True(t, f.gang.PreEnqueue(ctx, f.member(t, "plain", "", "")).IsSuccess(), "a pod without a group is a group of one")
}

func TestPreEnqueueRejectsMissingAndMalformedGroups(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	status := f.gang.PreEnqueue(ctx, f.member(t, "orphan", "nowhere", ""))
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, `PodGroupNotFound: pod group "nowhere" does not exist in namespace "ns"; the pod waits for it`, status.Message())
	assert.Contains(t, <-f.handle.recorder.Events, "Warning PodGroupNotFound")

	// A Tephra Job's controller creates its group beside its pods: they wait for it, as no news.
	jobPod := f.member(t, "train-worker-0", "train", "worker")
	jobPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch.tephra.dev/v1alpha1", Kind: "Job", Name: "train", UID: "train", Controller: ptr.To(true)}}
	status = f.gang.PreEnqueue(ctx, jobPod)
	assert.Equal(t, `PodGroupNotFound: pod group "train" does not exist in namespace "ns"; the pod waits for it`, status.Message())
	assert.Empty(t, f.handle.recorder.Events, "no event for a Tephra Job's pod")
	f.now = f.now.Add(groupGrace)
	f.gang.PreEnqueue(ctx, jobPod)
	assert.Contains(t, <-f.handle.recorder.Events, "Warning PodGroupNotFound", "past the grace, the pod warns")
	batchJobPod := f.member(t, "other-0", "other", "")
	batchJobPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "other", UID: "other", Controller: ptr.To(true)}}
	f.gang.PreEnqueue(ctx, batchJobPod)
	assert.Contains(t, <-f.handle.recorder.Events, "Warning PodGroupNotFound", "a batch/v1 Job's pods name a group someone else makes")

	status = f.gang.PreEnqueue(ctx, f.member(t, "bad", "Not_A_Name", ""))
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), `InvalidPodGroup: pod group name "Not_A_Name" is not valid`)
	assert.Contains(t, <-f.handle.recorder.Events, "Warning InvalidPodGroup")
}

func TestPermitHoldsMembersUntilTheMinimumThenAllowsAll(t *testing.T) {
	f := newFixture(t)
	f.group(t, "job", 3, map[string]int32{"ps": 1}, f.now)
	pods := []*corev1.Pod{f.member(t, "w1", "job", "worker"), f.member(t, "w2", "job", "worker"), f.member(t, "ps", "job", "ps")}
	f.member(t, "w3", "job", "worker")

	assert.Equal(t, fwk.Wait, f.permit(t, pods[0]).Code())
	assert.ElementsMatch(t, []string{"ns/w2", "ns/ps", "ns/w3"}, f.handle.activated, "the first waiting member brings its group forward")
	assert.Equal(t, fwk.Wait, f.permit(t, pods[1]).Code(), "two workers make minMember 3 without the ps task")
	assert.Equal(t, float64(2), gaugeValue(t), "two members wait")
	assert.True(t, f.permit(t, pods[2]).IsSuccess(), "the ps completes the minimum")
	assert.True(t, f.handle.waiting["w1"].allowed)
	assert.True(t, f.handle.waiting["w2"].allowed)
	assert.Equal(t, float64(0), gaugeValue(t))

	// The time to full is measured once the minimum is bound, even before the pod informer
	// shows the binds.
	before := histogramCount(t, "tephra_gang_time_to_full_seconds")
	for _, pod := range pods {
		f.gang.PostBind(context.Background(), nil, pod, "node")
	}
	assert.Equal(t, before+1, histogramCount(t, "tephra_gang_time_to_full_seconds"), "one gang became full")

	// Bound members count toward a later attempt of the same group: a fourth pod passes at once.
	for _, pod := range pods {
		f.bind(t, pod, "node")
	}
	w3, _, _ := f.pods.GetByKey("ns/w3")
	assert.True(t, f.permit(t, w3.(*corev1.Pod)).IsSuccess(), "an extra member of a running gang binds")
}

func TestUnreserveReleasesTheWholeIncompleteGangAndBacksOff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "job", 3, nil, f.now)
	a, b := f.member(t, "a", "job", ""), f.member(t, "b", "job", "")
	f.member(t, "c", "job", "")
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	require.Equal(t, fwk.Wait, f.permit(t, b).Code())

	// a times out at Permit: the framework unreserves it; b must be released too.
	f.gang.Unreserve(ctx, nil, a, "node")
	assert.Equal(t, "ScheduleTimeout: 2 of 3 pods of pod group ns/job were placed within 30s; releasing them", f.handle.waiting["b"].rejected)
	assert.Contains(t, <-f.handle.recorder.Events, "Warning ScheduleTimeout")

	// The group backs off: its next member is held back at PreFilter.
	c, _, _ := f.pods.GetByKey("ns/c")
	_, status := f.gang.PreFilter(ctx, nil, c.(*corev1.Pod), nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "evicting pods cannot help a group that backs off")
	assert.Contains(t, status.Message(), "backing off for 1s after a failed attempt")
	sortTime, _ := f.gang.groups.sortTime(groupKey{"ns", "job"})
	assert.Equal(t, f.now, sortTime, "the failure moves the group behind those created before it")

	// b's own unreserve does not count a second failure.
	f.gang.Unreserve(ctx, nil, b, "node")
	f.now = f.now.Add(1500 * time.Millisecond)
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourcePods: "110"}).Obj())
	_, status = f.gang.PreFilter(ctx, nil, c.(*corev1.Pod), []fwk.NodeInfo{node})
	assert.True(t, status.IsSuccess(), "after the backoff the group is tried again: %v", status)
}

func TestPostFilterReleasesPlacedMembersOnlyForIncompleteGangs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "job", 2, nil, f.now)
	a, b := f.member(t, "a", "job", ""), f.member(t, "b", "job", "")
	extra := f.member(t, "extra", "job", "")

	_, status := f.gang.PostFilter(ctx, nil, a, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "nothing placed: nothing to release")
	assert.Empty(t, status.Message(), "TephraQueue's reason is the one to show")

	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	_, status = f.gang.PostFilter(ctx, nil, b, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, "NotEnoughResources: 1 of 2 pods of pod group ns/job could be placed; releasing them", status.Message())
	assert.Equal(t, status.Message(), f.handle.waiting["a"].rejected)

	// Once the minimum runs, an extra member that does not fit just waits.
	f.gang.Unreserve(ctx, nil, a, "node")
	f.bind(t, a, "node")
	f.bind(t, b, "node")
	_, status = f.gang.PostFilter(ctx, nil, extra, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Empty(t, status.Message())

	_, status = f.gang.PostFilter(ctx, nil, f.member(t, "plain", "", ""), nil)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "plain pods go on to preemption")
}

func TestPreFilterRejectsAGangLargerThanTheFreeCapacity(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "big", 8, nil, f.now)
	var first *corev1.Pod
	for i := range 8 {
		pod := f.member(t, fmt.Sprintf("m%d", i), "big", "")
		if first == nil {
			first = pod
		}
	}
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "7", corev1.ResourcePods: "110"}).Obj())
	_, status := f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{node})
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs cpu 8 (7 free)", status.Message())

	big := node.Snapshot()
	big.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourcePods: "110"}).Obj())
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{big})
	assert.Equal(t, fwk.Unschedulable, status.Code(), "the verdict holds for the group until an event")
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs cpu 8 (7 free)", status.Message())
	hint, err := f.registeredHint(t, fwk.Node)(klog.Background(), first, nil, big.Node())
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint, "a node grown queues the group and clears the verdict")
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{big})
	assert.True(t, status.IsSuccess(), "%v", status)

	// minResources, when set, is what the group needs.
	pg, _, _ := f.groups.GetByKey("ns/big")
	withMin := pg.(*v1alpha1.PodGroup).DeepCopy()
	withMin.Spec.MinResources = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	require.NoError(t, f.groups.Update(withMin))
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{big})
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs nvidia.com/gpu 2 (0 free)", status.Message())
}

// A member refused again for the same reason keeps the figures of its first refusal for a
// minute, so that kube-scheduler, which writes the pod's condition whenever its message
// changes, does not write it on every attempt; a minute on, the figures are new.
func TestARefusalKeepsItsFiguresForAMinute(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "big", 8, nil, f.now)
	var members []*corev1.Pod
	for i := range 8 {
		members = append(members, f.member(t, fmt.Sprintf("m%d", i), "big", ""))
	}
	first := members[0]
	nodeWith := func(cpu string) fwk.NodeInfo {
		n := framework.NewNodeInfo()
		n.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourcePods: "110"}).Obj())
		return n
	}
	_, status := f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{nodeWith("6")})
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs cpu 8 (6 free)", status.Message())

	grown := nodeWith("7")
	hint, err := f.registeredHint(t, fwk.Node)(klog.Background(), first, nil, grown.Node())
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint, "a node grown clears the verdict")
	f.now = f.now.Add(59 * time.Second)
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{grown})
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs cpu 8 (6 free)", status.Message(),
		"the same reason with another figure keeps the message")
	_, status = f.gang.PreFilter(ctx, nil, members[1], []fwk.NodeInfo{grown})
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs cpu 8 (7 free)", status.Message(),
		"another member's first refusal has today's figures")

	f.now = f.now.Add(time.Second)
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{grown})
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/big needs cpu 8 (7 free)", status.Message(),
		"a minute after the first refusal, the figures are new")
}

// Free capacity in total is not enough: a member cannot span nodes. Two nodes with 8 free CPUs
// hold 16 CPUs but only two members of 4500m.
func TestPreFilterRejectsAGangWhoseMembersDoNotFitNodeByNode(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := wideGroup(t, f, 3, "4500m")
	node := func(name string) fwk.NodeInfo { return cpuNode(name, 8) }
	const why = "NotEnoughResources: the minimum of pod group ns/wide needs 3 more pods, and the nodes' free capacity holds at most 2 of them (each asks at least cpu 4500m)"
	_, status := f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{node("a"), node("b")})
	assert.Equal(t, fwk.Unschedulable, status.Code(), "the first member's PostFilter may reclaim for the whole minimum")
	assert.Equal(t, why, status.Message())
	_, status = f.gang.PreFilter(ctx, nil, members[1], []fwk.NodeInfo{node("a"), node("b")})
	assert.Equal(t, fwk.Unschedulable, status.Code(), "the other members are refused without counting again, and may each reclaim")
	assert.Equal(t, why, status.Message())

	f.now = f.now.Add(unfitFor) // no event came: the verdict is trusted for unfitFor only
	_, status = f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{node("a"), node("b"), node("c")})
	assert.True(t, status.IsSuccess(), "one member per node: %v", status)

	// The bound is optimistic: with one small member, two nodes might hold the three.
	small := members[2].DeepCopy()
	small.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	require.NoError(t, f.pods.Update(small))
	f.now = f.now.Add(unfitFor)
	_, status = f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{node("a"), node("b")})
	assert.True(t, status.IsSuccess(), "%v", status)
}

// A group's kept verdict is not kept past an event that freed capacity: a member already in the
// active queue when a bound pod is deleted (no queueing hint runs for it) counts again, and so
// after a node is added or a bound pod ends.
func TestAKeptVerdictIsNotKeptPastFreedCapacity(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	members := wideGroup(t, f, 2, "6")
	node := func(name string) fwk.NodeInfo { return cpuNode(name, 8) }
	// The first member finds one node and makes the verdict; then the event; then the second
	// member, already queued, comes with two nodes.
	refusedOnTheKeptVerdict := func(event func()) bool {
		_, first := f.gang.PreFilter(ctx, nil, members[0], []fwk.NodeInfo{node("a")})
		require.Equal(t, fwk.Unschedulable, first.Code(), "one node holds one member")
		event()
		_, status := f.gang.PreFilter(ctx, nil, members[1], []fwk.NodeInfo{node("a"), node("b")})
		return status.Code() == fwk.Unschedulable
	}
	require.True(t, refusedOnTheKeptVerdict(func() {}), "nothing freed: the verdict is kept")

	bound := st.MakePod().Namespace("ns").Name("other").UID("other").Node("b").Obj()
	pods, nodes := f.gang.groups.freedCapacityHandler(), f.gang.groups.freedNodeCapacityHandler()
	assert.False(t, refusedOnTheKeptVerdict(func() { pods.OnDelete(bound) }), "a bound pod deleted: the member counts again")
	assert.True(t, refusedOnTheKeptVerdict(func() { pods.OnDelete(st.MakePod().Namespace("ns").Name("pending").UID("pending").Obj()) }),
		"a pod deleted before it was bound freed nothing")
	ended := bound.DeepCopy()
	ended.Status.Phase = corev1.PodSucceeded
	assert.False(t, refusedOnTheKeptVerdict(func() { pods.OnUpdate(bound, ended) }), "a bound pod ended")
	assert.False(t, refusedOnTheKeptVerdict(func() { nodes.OnAdd(st.MakeNode().Name("b").Obj(), false) }), "a node added")
}

func TestMembersThatFitCountsPodSlotsAndStopsAtEnough(t *testing.T) {
	n := framework.NewNodeInfo()
	n.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "100", corev1.ResourcePods: "3"}).Obj())
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("1")}
	assert.Equal(t, 3, membersThatFit(one, []fwk.NodeInfo{n}, 10), "three pod slots")
	assert.Equal(t, 6, membersThatFit(one, []fwk.NodeInfo{n, n, n}, 5), "stops at the node where enough fit")
	assert.Equal(t, 10, membersThatFit(corev1.ResourceList{}, []fwk.NodeInfo{n}, 10), "members that ask for nothing")
}

// Members of one group sign alike, and differently from other groups' and plain pods, so that
// kube-scheduler batches consecutive members of a gang only.
func TestSignPodBatchesTheMembersOfAGroupTogether(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	fragments, status := f.gang.SignPod(ctx, f.member(t, "plain", "", ""))
	assert.True(t, status.IsSuccess())
	assert.Empty(t, fragments)
	sign := func(pod *corev1.Pod) []fwk.SignFragment {
		fragments, status := f.gang.SignPod(ctx, pod)
		require.True(t, status.IsSuccess(), status.Message())
		return fragments
	}
	a0, a1, b0 := sign(f.member(t, "a0", "a", "")), sign(f.member(t, "a1", "a", "")), sign(f.member(t, "b0", "b", ""))
	assert.Equal(t, []fwk.SignFragment{{Key: podGroupSignerName, Value: "ns/a"}}, a0)
	assert.Equal(t, a0, a1, "members of one group")
	assert.NotEqual(t, a0, b0, "members of different groups")
}

// The framework tries a batching hint without PreFilter's node set: Filter keeps a member on the
// nodes PreFilter narrowed it to (here its group's reservation), and other pods are not affected.
func TestFilterKeepsAMemberOnTheNodesPreFilterNarrowedItTo(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m0, nodes := f.slaGroup(t)
	f.now = f.now.Add(31 * time.Second)

	state := framework.NewCycleState()
	result, status := f.gang.PreFilter(ctx, state, m0, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.Equal(t, 2, result.NodeNames.Len())
	for _, n := range nodes {
		s := f.gang.Filter(ctx, state, m0, n)
		if result.NodeNames.Has(n.Node().Name) {
			assert.Nil(t, s, "node %s is reserved for the member's group", n.Node().Name)
		} else {
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code(), "node %s", n.Node().Name)
			assert.Contains(t, s.Message(), "outside the nodes of the pod's group")
		}
	}
	plain := framework.NewCycleState()
	other := f.member(t, "other", "a", "")
	f.group(t, "a", 1, nil, f.now)
	result, status = f.gang.PreFilter(ctx, plain, other, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	assert.True(t, result.AllNodes())
	_, err := plain.Read(allowedNodesKey)
	assert.Error(t, err, "nothing narrowed, nothing kept")
}

// Among jobs of equal priority, the one running the smaller share of the cluster goes first
// (DRF), whatever their ages; a pod's share stays as it was when it entered the queue, so the
// heap's order never changes under it, and is read again when it enters again.
func TestLessOrdersJobsByDominantShare(t *testing.T) {
	f := newFixture(t)
	f.gang.shares.setNode("n1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")})
	f.group(t, "big", 1, nil, f.now)
	f.group(t, "small", 1, nil, f.now.Add(time.Minute))
	running := f.member(t, "big-0", "big", "")
	f.bind(t, running, "n1")
	bigNext := queued(t, f.member(t, "big-1", "big", ""), f.now)
	smallNext := queued(t, f.member(t, "small-0", "small", ""), f.now)
	for _, e := range []fwk.QueuedEntityInfo{bigNext, smallNext} {
		require.Nil(t, f.gang.PreEnqueue(context.Background(), e.(*framework.QueuedPodInfo).Pod), "records each group's creation")
	}

	assert.True(t, f.gang.Less(smallNext, bigNext), "the job with a quarter of the cluster goes after the one with none, though it is older")
	assert.False(t, f.gang.Less(bigNext, smallNext))

	// The big job's running pod ends: its queued pod keeps its frozen share until it re-enters.
	require.NoError(t, f.pods.Delete(running))
	assert.True(t, f.gang.Less(smallNext, bigNext), "the share is frozen while the pod is queued")
	requeued := queued(t, bigNext.(*framework.QueuedPodInfo).Pod, f.now.Add(time.Second))
	assert.True(t, f.gang.Less(requeued, smallNext), "re-entering, it is read again: both at 0, the older job first")
}

// A group whose bound pods tephra-controllers evicted for missing its ready timeout waits out a
// backoff that doubles with each eviction in a row, then its members are brought back.
func TestPreFilterHoldsAGroupBackAfterAnUnreadyEviction(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pg := f.group(t, "slow", 2, nil, f.now)
	first := f.member(t, "s0", "slow", "")
	f.member(t, "s1", "slow", "")
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourcePods: "110"}).Obj())

	evicted := pg.DeepCopy()
	evicted.Status.UnreadyEvictions = 3
	evicted.Status.LastUnreadyEvictionTime = &metav1.Time{Time: f.now.Add(-time.Second)}
	require.NoError(t, f.groups.Update(evicted))
	_, status := f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{node})
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	// groupBackoffSeconds 1, doubled twice: 4 s from the eviction, 3 s left.
	assert.Equal(t, "BackingOff: pod group ns/slow is backing off for 3s: its bound pods were evicted 3 times in a row for missing its ready timeout", status.Message())

	f.now = f.now.Add(3 * time.Second)
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{node})
	assert.True(t, status.IsSuccess(), "%v", status)

	// Capped as failed attempts are: maxGroupBackoffSeconds 10.
	evicted.Status.UnreadyEvictions = 20
	evicted.Status.LastUnreadyEvictionTime = &metav1.Time{Time: f.now}
	require.NoError(t, f.groups.Update(evicted))
	_, status = f.gang.PreFilter(ctx, nil, first, []fwk.NodeInfo{node})
	assert.Contains(t, status.Message(), "backing off for 10s")
}

// A group that backs off after a failed attempt is tried no more often than its backoff allows.
// Members that reach PreEnqueue wait there until the backoff's timer brings them back; no event
// queues them meanwhile; and a member already on its way, refused at PreFilter, neither fails the
// attempt again nor comes straight back. It used to: PostFilter failed the attempt again, which
// dropped the group's pilot, so holdForPilot activated the very member in its own cycle; the
// scheduling queue tried it again at once, PreEnqueue made it the pilot, PreFilter refused it
// for the backoff, and so on, every 10 ms for as long as the backoff lasted
// (TestPartlyBoundGangIsEvictedAfterItsReadyTimeout, test/e2e/gang: 672 cycles of one member).
func TestABackingOffGroupIsNotTriedUntilItsBackoffEnds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pg := f.group(t, "g", 4, nil, f.now)
	m0, m1, m2, m3 := f.member(t, "m0", "g", ""), f.member(t, "m1", "g", ""), f.member(t, "m2", "g", ""), f.member(t, "m3", "g", "")
	f.bind(t, m0, "n") // bound by hand, as the e2e test does: the group is partly placed
	f.bind(t, m1, "n")
	nodes := []fwk.NodeInfo{cpuNode("n", 1)} // what is left beside m0 and m1
	require.True(t, f.gang.PreEnqueue(ctx, m2).IsSuccess())
	require.True(t, f.gang.PreEnqueue(ctx, m3).IsSuccess())

	_, status := f.gang.PreFilter(ctx, nil, m2, nodes)
	require.Equal(t, fwk.Unschedulable, status.Code(), "2 more members do not fit the CPU left")
	rejected := counterValue(t, groupsRejected.WithLabelValues("post-filter"))
	_, status = f.gang.PostFilter(ctx, nil, m2, nil)
	require.Equal(t, "NotEnoughResources: 2 of 4 pods of pod group ns/g could be placed; releasing them", status.Message())
	assert.Equal(t, []string{"ns/m2"}, f.handle.takeActivated(), "sent back to PreEnqueue, to wait there")

	status = f.gang.PreEnqueue(ctx, m2)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "NotEnoughResources: pod group ns/g is backing off for 1s after a failed attempt", status.Message())

	// m3 was on its way: refused at PreFilter, it fails nothing again and does not come back.
	cycles := counterValue(t, backoffCycles)
	_, status = f.gang.PreFilter(ctx, nil, m3, nodes)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, cycles+1, counterValue(t, backoffCycles))
	_, status = f.gang.PostFilter(ctx, nil, m3, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, rejected+1, counterValue(t, groupsRejected.WithLabelValues("post-filter")), "one failure")
	assert.Equal(t, []string{"ns/m3"}, f.handle.takeActivated(), "sent back to PreEnqueue")
	assert.Contains(t, f.gang.PreEnqueue(ctx, m3).Message(), "is backing off for 1s", "which holds it, and elects no pilot")
	assert.Contains(t, f.gang.PreEnqueue(ctx, m2).Message(), "is backing off for 1s")

	// No event queues them while the backoff lasts, not even one that lets the group fit.
	gone := f.member(t, "gone", "", "")
	gone.Spec.NodeName = "n"
	for name, hint := range map[string]fwk.QueueingHintFn{
		"node added":  f.registeredHint(t, fwk.Node),
		"pod deleted": f.registeredHintFor(t, fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}),
	} {
		h, err := hint(klog.Background(), m2, gone, bigNode().Node())
		require.NoError(t, err)
		assert.Equal(t, fwk.QueueSkip, h, name)
	}
	changed := pg.DeepCopy()
	changed.Generation, pg.Generation = 2, 1
	h, err := f.registeredHint(t, podGroupEvent)(klog.Background(), m2, pg, changed)
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, h, "the PodGroup changed")

	// The backoff over, its timer brings them back and they are tried.
	f.now = f.now.Add(time.Second)
	require.True(t, f.gang.PreEnqueue(ctx, m2).IsSuccess(), "the first back pilots")
	assert.Contains(t, f.gang.PreEnqueue(ctx, m3).Message(), "WaitingForPilot")
	h, err = f.registeredHint(t, fwk.Node)(klog.Background(), m2, nil, bigNode().Node())
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, h)
}

// A member refused at PreFilter because its group waits out an unready eviction's backoff fails
// no attempt: nothing was tried. It used to count as a failed attempt of a partly placed group
// (a rejection, a Warning event, a backoff of its own).
func TestAMemberRefusedForItsGroupsBackoffFailsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pg := f.group(t, "g", 3, nil, f.now)
	m0, m1 := f.member(t, "m0", "g", ""), f.member(t, "m1", "g", "")
	f.member(t, "m2", "g", "")
	f.bind(t, m0, "n")
	evicted := pg.DeepCopy()
	evicted.Status.UnreadyEvictions = 1
	evicted.Status.LastUnreadyEvictionTime = &metav1.Time{Time: f.now}
	require.NoError(t, f.groups.Update(evicted))

	assert.Contains(t, f.gang.PreEnqueue(ctx, m1).Message(), "BackingOff: pod group ns/g is backing off for 1s")
	_, status := f.gang.PreFilter(ctx, nil, m1, []fwk.NodeInfo{bigNode()})
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	rejected := counterValue(t, groupsRejected.WithLabelValues("post-filter"))
	_, status = f.gang.PostFilter(ctx, nil, m1, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Empty(t, status.Message())
	assert.Equal(t, rejected, counterValue(t, groupsRejected.WithLabelValues("post-filter")))
	assert.Empty(t, f.handle.recorder.Events)
}

// The devices ResourceSlices offer count in the total that jobs' dominant shares divide by, and
// stay there as nodes come and go.
func TestJobSharesTotalCountsDevices(t *testing.T) {
	s := newJobShares()
	devices := corev1.ResourceName("gpu.example.com.deviceclass.resource.k8s.io/devices")
	s.setDevices(quota.Amounts{devices: 8})
	s.setNode("n1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")})
	assert.Equal(t, quota.Amounts{devices: 8, corev1.ResourceCPU: 4000}, s.capacity.Total())
	s.setDevices(quota.Amounts{devices: 4})
	s.setNode("n1", nil)
	assert.Equal(t, quota.Amounts{devices: 4}, s.capacity.Total())
}
