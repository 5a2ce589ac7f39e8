package gang

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// fakeWaitingPod records what the plugin decides for a pod waiting at Permit. As the framework's
// waiting pod, the first decision holds.
type fakeWaitingPod struct {
	mu       sync.Mutex
	pod      *corev1.Pod
	allowed  bool
	rejected string
}

func (w *fakeWaitingPod) GetPod() *corev1.Pod         { return w.pod }
func (w *fakeWaitingPod) GetPendingPlugins() []string { return []string{Name} }
func (w *fakeWaitingPod) Allow(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rejected == "" {
		w.allowed = true
	}
}
func (w *fakeWaitingPod) Reject(_, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.allowed {
		return false
	}
	w.rejected = msg
	return true
}
func (w *fakeWaitingPod) Preempt(plugin, msg string) bool { return w.Reject(plugin, msg) }

// fakeHandle gives the plugin the framework functions it calls; the rest of fwk.Handle is nil.
type fakeHandle struct {
	fwk.Handle
	mu        sync.Mutex
	waiting   map[types.UID]*fakeWaitingPod
	activated []string
	recorder  *events.FakeRecorder
	clientset *kubefake.Clientset
	// snapshot answers SnapshotSharedLister when set.
	snapshot fwk.SharedLister
}

func (h *fakeHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

func (h *fakeHandle) ClientSet() kubernetes.Interface { return h.clientset }

// GetPodInPreBind finds no pod binding: the tests' pods are bound or pending.
func (h *fakeHandle) GetPodInPreBind(types.UID) fwk.PodInPreBind { return nil }

func (h *fakeHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.waiting[uid]; ok {
		return w
	}
	return nil
}

// wait registers a pod as waiting at Permit, as the framework does when Permit says Wait.
func (h *fakeHandle) wait(pod *corev1.Pod) *fakeWaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &fakeWaitingPod{pod: pod}
	h.waiting[pod.UID] = w
	return w
}

func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range pods {
		h.activated = append(h.activated, key)
	}
}

// takeActivated returns the pods activated so far and forgets them. A test that lets a group's
// backoff timer run reads them so: the timer activates from its own goroutine.
func (h *fakeHandle) takeActivated() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	activated := h.activated
	h.activated = nil
	return activated
}

func (h *fakeHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }

type fixture struct {
	gang   *Gang
	handle *fakeHandle
	groups cache.Indexer
	pods   cache.Indexer
	now    time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	f := &fixture{
		handle: &fakeHandle{waiting: map[types.UID]*fakeWaitingPod{}, recorder: events.NewFakeRecorder(100), clientset: kubefake.NewClientset()},
		groups: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podGroupIndex: setup.IndexByGroup}),
		now:    time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
	}
	f.gang = newGang(f.handle, args, schedulinglisters.NewPodGroupLister(f.groups), f.pods)
	f.gang.now = func() time.Time { return f.now }
	return f
}

func (f *fixture) group(t *testing.T, name string, minMember int32, minTask map[string]int32, created time.Time) *v1alpha1.PodGroup {
	t.Helper()
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("pg-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember, MinTaskMember: minTask, ScheduleTimeoutSeconds: ptr.To[int32](30)},
	}
	require.NoError(t, f.groups.Add(pg))
	return pg
}

// member makes a pod of a group (group "" for a plain pod) with 1 CPU and adds it to the
// informer.
func (f *fixture) member(t *testing.T, name, group, task string) *corev1.Pod {
	t.Helper()
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"})
	if group != "" {
		w = w.Label(v1alpha1.PodGroupLabel, group)
	}
	if task != "" {
		w = w.Label(v1alpha1.TaskLabel, task)
	}
	pod := w.Obj()
	pod.CreationTimestamp = metav1.NewTime(f.now)
	require.NoError(t, f.pods.Add(pod))
	return pod
}

func (f *fixture) bind(t *testing.T, pod *corev1.Pod, node string) {
	t.Helper()
	pod.Spec.NodeName = node
	require.NoError(t, f.pods.Update(pod))
}

// permit runs Reserve and Permit for a pod as the framework does, and registers it as waiting
// when Permit says Wait.
func (f *fixture) permit(t *testing.T, pod *corev1.Pod) *fwk.Status {
	t.Helper()
	ctx := context.Background()
	require.True(t, f.gang.Reserve(ctx, nil, pod, "node").IsSuccess())
	status, timeout := f.gang.Permit(ctx, nil, pod, "node")
	if status.Code() == fwk.Wait {
		assert.Equal(t, 30*time.Second, timeout, "the group's scheduleTimeoutSeconds bounds the wait")
		f.handle.wait(pod)
	}
	return status
}

// registeredHint is the queueing hint the plugin registers for events of a resource, as the
// scheduling queue calls it.
func (f *fixture) registeredHint(t *testing.T, resource fwk.EventResource) fwk.QueueingHintFn {
	t.Helper()
	events, err := f.gang.EventsToRegister(context.Background())
	require.NoError(t, err)
	for _, e := range events {
		if e.Event.Resource == resource {
			return e.QueueingHintFn
		}
	}
	t.Fatalf("no hint registered for %s", resource)
	return nil
}

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

func queued(t *testing.T, pod *corev1.Pod, at time.Time) fwk.QueuedEntityInfo {
	t.Helper()
	info, err := framework.NewPodInfo(pod)
	require.NoError(t, err)
	return &framework.QueuedPodInfo{PodInfo: info, QueueingParams: framework.QueueingParams{Timestamp: at}}
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

// registeredHintFor is the queueing hint the plugin registers for one event.
func (f *fixture) registeredHintFor(t *testing.T, event fwk.ClusterEvent) fwk.QueueingHintFn {
	t.Helper()
	events, err := f.gang.EventsToRegister(context.Background())
	require.NoError(t, err)
	for _, e := range events {
		if e.Event == event {
			return e.QueueingHintFn
		}
	}
	t.Fatalf("no hint registered for %v", event)
	return nil
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

// wideGroup makes pod group ns/wide of n members, each asking cpu.
func wideGroup(t *testing.T, f *fixture, n int32, cpu string) []*corev1.Pod {
	t.Helper()
	f.group(t, "wide", n, nil, f.now)
	var members []*corev1.Pod
	for i := range n {
		pod := st.MakePod().Namespace("ns").Name(fmt.Sprintf("w%d", i)).UID(fmt.Sprintf("w%d", i)).
			Label(v1alpha1.PodGroupLabel, "wide").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu}).Obj()
		require.NoError(t, f.pods.Add(pod))
		members = append(members, pod)
	}
	return members
}

func TestMembersThatFitCountsPodSlotsAndStopsAtEnough(t *testing.T) {
	n := framework.NewNodeInfo()
	n.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "100", corev1.ResourcePods: "3"}).Obj())
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("1")}
	assert.Equal(t, 3, membersThatFit(one, []fwk.NodeInfo{n}, 10), "three pod slots")
	assert.Equal(t, 6, membersThatFit(one, []fwk.NodeInfo{n, n, n}, 5), "stops at the node where enough fit")
	assert.Equal(t, 10, membersThatFit(corev1.ResourceList{}, []fwk.NodeInfo{n}, 10), "members that ask for nothing")
}

func histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() == name {
			return family.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

func gaugeValue(t *testing.T) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(waitingPods)
	require.NoError(t, err)
	return v
}

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

// countingIndexer counts the reads of a group's members.
type countingIndexer struct {
	cache.Indexer
	reads int
}

func (c *countingIndexer) ByIndex(name, value string) ([]any, error) {
	c.reads++
	return c.Indexer.ByIndex(name, value)
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

func bigNode() fwk.NodeInfo {
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name("big").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourcePods: "110"}).Obj())
	return node
}

// slaGroup makes group "big" (2 members of 1 CPU, SLA waiting time 30s) and three nodes of 1
// CPU, and returns its first member and the nodes.
func (f *fixture) slaGroup(t *testing.T) (*corev1.Pod, []fwk.NodeInfo) {
	t.Helper()
	pg := f.group(t, "big", 2, nil, f.now)
	pg.Annotations = map[string]string{v1alpha1.SLAWaitingTimeAnnotation: "30s"}
	require.NoError(t, f.groups.Update(pg))
	m0 := f.member(t, "m0", "big", "")
	f.member(t, "m1", "big", "")
	return m0, []fwk.NodeInfo{cpuNode("n1", 1), cpuNode("n2", 1), cpuNode("n3", 1)}
}

// A group that waits past its SLA gets nodes reserved: later pods of its priority are kept off
// them, pods of higher priority and other nodes are not, and the reservation ends with the
// minimum placed.
func TestSLAReservation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m0, nodes := f.slaGroup(t)

	_, status := f.gang.PreFilter(ctx, nil, m0, nodes)
	assert.True(t, status.IsSuccess(), "within its SLA the group is not held")
	other := f.member(t, "other", "", "")
	assert.Nil(t, f.gang.Filter(ctx, nil, other, nodes[0]), "no reservation yet")

	f.now = f.now.Add(31 * time.Second)
	result, status := f.gang.PreFilter(ctx, nil, m0, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, result)
	assert.Equal(t, 2, result.NodeNames.Len(), "two 1-CPU nodes hold the 2-CPU minimum")
	reserved := result.NodeNames.UnsortedList()[0]
	var info fwk.NodeInfo
	for _, n := range nodes {
		if n.Node().Name == reserved {
			info = n
		}
	}
	s := f.gang.Filter(ctx, nil, other, info)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code())
	assert.Contains(t, s.Message(), "reserved for pod group ns/big")
	assert.Contains(t, <-f.handle.recorder.Events, "Reserved: the group has waited 31s, past its SLA waiting time of 30s")

	f.gang.releaseReservation(klog.Background(), groupKey{"ns", "big"})
	assert.Nil(t, f.gang.Filter(ctx, nil, other, info))
}

func cpuNode(name string, cpus int) fwk.NodeInfo {
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: fmt.Sprint(cpus), corev1.ResourcePods: "110"}).Obj())
	return node
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

// Two groups past their SLA never reserve the same node; a group whose pending pods are gone
// (its Job suspended) gives its nodes back.
func TestSLAReservationsAreDisjointAndReleased(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var first []*corev1.Pod
	for _, name := range []string{"g1", "g2"} {
		pg := f.group(t, name, 2, nil, f.now)
		pg.Annotations = map[string]string{v1alpha1.SLAWaitingTimeAnnotation: "30s"}
		require.NoError(t, f.groups.Update(pg))
		first = append(first, f.member(t, name+"-0", name, ""))
		f.member(t, name+"-1", name, "")
	}
	nodes := []fwk.NodeInfo{cpuNode("n1", 1), cpuNode("n2", 1), cpuNode("n3", 1), cpuNode("n4", 1)}
	f.now = f.now.Add(31 * time.Second)
	r1, status := f.gang.PreFilter(ctx, nil, first[0], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	r2, status := f.gang.PreFilter(ctx, nil, first[1], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, r1)
	require.NotNil(t, r2)
	assert.Equal(t, 2, r1.NodeNames.Len())
	assert.Equal(t, 2, r2.NodeNames.Len())
	assert.Empty(t, r1.NodeNames.Intersection(r2.NodeNames).UnsortedList(), "reservations overlap")

	// g1's pods are deleted (its Job suspended): a pod of another workload may use its nodes.
	for _, name := range []string{"g1-0", "g1-1"} {
		obj, _, _ := f.pods.GetByKey("ns/" + name)
		require.NoError(t, f.pods.Delete(obj))
	}
	other := f.member(t, "other", "", "")
	for _, n := range nodes {
		if r1.NodeNames.Has(n.Node().Name) {
			assert.Nil(t, f.gang.Filter(ctx, nil, other, n), "g1's node %s is given back", n.Node().Name)
		}
		if r2.NodeNames.Has(n.Node().Name) {
			assert.NotNil(t, f.gang.Filter(ctx, nil, other, n), "g2's node %s stays reserved", n.Node().Name)
		}
	}
}

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

func counterValue(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	require.NoError(t, err)
	return v
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
