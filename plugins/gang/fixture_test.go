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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
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
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/ledger"
)

// fakeWaitingPod records what the plugin decides for a pod waiting at Permit. As the framework's
// waiting pod, the first decision holds.
type fakeWaitingPod struct {
	mu       sync.Mutex
	pod      *corev1.Pod
	allowed  bool
	rejected string
}

func (w *fakeWaitingPod) GetPod() *corev1.Pod { return w.pod }

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
	// upstream holds upstream PodGroups (scheduling.k8s.io/v1beta1), read as groups too.
	upstream cache.Indexer
	pods     cache.Indexer
	now      time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	f := &fixture{
		handle:   &fakeHandle{waiting: map[types.UID]*fakeWaitingPod{}, recorder: events.NewFakeRecorder(100), clientset: kubefake.NewClientset()},
		groups:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		upstream: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podGroupIndex: ledger.IndexByGroup}),
		now:      time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
	}
	upstream := groups.NewUpstream(upstreamlisters.NewPodGroupLister(f.upstream), nil)
	f.gang = newGang(f.handle, args, groups.NewLister(schedulinglisters.NewPodGroupLister(f.groups), f.pods, upstream), f.pods)
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

func queued(t *testing.T, pod *corev1.Pod, at time.Time) fwk.QueuedEntityInfo {
	t.Helper()
	info, err := framework.NewPodInfo(pod)
	require.NoError(t, err)
	return &framework.QueuedPodInfo{PodInfo: info, QueueingParams: framework.QueueingParams{Timestamp: at}}
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

// countingIndexer counts the reads of a group's members.
type countingIndexer struct {
	cache.Indexer
	reads int
}

func (c *countingIndexer) ByIndex(name, value string) ([]any, error) {
	c.reads++
	return c.Indexer.ByIndex(name, value)
}

func bigNode() fwk.NodeInfo {
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name("big").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourcePods: "110"}).Obj())
	return node
}

func cpuNode(name string, cpus int) fwk.NodeInfo {
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: fmt.Sprint(cpus), corev1.ResourcePods: "110"}).Obj())
	return node
}

func counterValue(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	require.NoError(t, err)
	return v
}
