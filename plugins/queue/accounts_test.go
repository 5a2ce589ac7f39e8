package queue

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	"k8s.io/utils/ptr"

	tephrafake "github.com/tephra-dev/tephra/apis/client/clientset/versioned/fake"
	tephrainformers "github.com/tephra-dev/tephra/apis/client/informers/externalversions"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// profileHandle is the part of a profile's framework handle that the accounts read.
type profileHandle struct {
	fwk.Handle
	config    *rest.Config
	profile   string
	informers informers.SharedInformerFactory
	recorder  *events.FakeRecorder
}

func (h profileHandle) KubeConfig() *rest.Config                               { return h.config }
func (h profileHandle) ProfileName() string                                    { return h.profile }
func (h profileHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }
func (h profileHandle) EventRecorder() events.EventRecorderLogger              { return h.recorder }

// scheduler is what the profiles of one scheduler share: its client configuration and informers.
type scheduler struct {
	config    *rest.Config
	informers informers.SharedInformerFactory
	tephra    tephrainformers.SharedInformerFactory
}

func newScheduler(t *testing.T) scheduler {
	s := scheduler{
		config:    &rest.Config{Host: t.Name()},
		informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		tephra:    tephrainformers.NewSharedInformerFactory(tephrafake.NewSimpleClientset(), 0),
	}
	setup.ServeUpstream(s.config, false, false)
	t.Cleanup(func() {
		accountsMu.Lock()
		delete(sharedAccounts, s.config)
		accountsMu.Unlock()
	})
	return s
}

func (s scheduler) profile(t *testing.T, name string) (profileHandle, *accounts) {
	t.Helper()
	h := profileHandle{config: s.config, profile: name, informers: s.informers, recorder: events.NewFakeRecorder(10)}
	a, err := accountsFor(h, s.tephra)
	require.NoError(t, err)
	return h, a
}

func schedulerPod(uid, namespace, scheduler string, priority int32) *corev1.Pod {
	pod := ledgertest.Pod(uid, nil, "node", 1)
	pod.Namespace, pod.Spec.SchedulerName, pod.Spec.Priority = namespace, scheduler, &priority
	return pod
}

// The profiles of one scheduler that enable TephraQueue share one ledger, which counts the pods of
// each of their scheduler names (those the informer showed before a profile was added too), and
// no system pod.
func TestProfilesShareOneLedger(t *testing.T) {
	s := newScheduler(t)
	_, tephra := s.profile(t, v1alpha1.SchedulerName)
	early := schedulerPod("early", "ns", "default-scheduler", 0)
	require.NoError(t, s.informers.Core().V1().Pods().Informer().GetIndexer().Add(early))
	_, replacing := s.profile(t, "default-scheduler")
	require.Same(t, tephra, replacing, "one ledger for every profile")

	for _, pod := range []*corev1.Pod{
		schedulerPod("tephra", "ns", v1alpha1.SchedulerName, 0),
		schedulerPod("plain", "ns", "default-scheduler", 1000),
		schedulerPod("volcano", "ns", "volcano", 0),
		schedulerPod("dns", metav1.NamespaceSystem, "default-scheduler", 0),
		schedulerPod("critical", "ns", "default-scheduler", 2000000000),
	} {
		tephra.feed.ObservePod(pod)
	}
	assert.Equal(t, quota.Amounts{gpu: 3}, tephra.ledger.View().Allocated[v1alpha1.DefaultQueue], "early, tephra and plain count; not another scheduler's pod nor system pods")
	other := newScheduler(t)
	_, separate := other.profile(t, "default-scheduler")
	assert.NotSame(t, tephra, separate, "another scheduler (client configuration) has its own ledger")
}

// No queue holds a system pod back, not even a missing default queue; a plain pod waits for it.
func TestSystemPodsPassTheQueue(t *testing.T) {
	s := newScheduler(t)
	h, a := s.profile(t, "default-scheduler")
	q := &Queue{
		handle: h, queues: s.tephra.Scheduling().V1alpha1().Queues().Lister(), podGroups: a.podGroups,
		ledger: a.ledger, accounts: a, synced: func() bool { return true },
	}
	var err error
	q.reclaimer, err = reclaim.New(reclaim.Deps{Handle: h}, reclaim.Settings{})
	require.NoError(t, err)
	ctx := context.Background()
	for _, pod := range []*corev1.Pod{
		schedulerPod("dns", metav1.NamespaceSystem, "default-scheduler", 0),
		schedulerPod("critical", "ns", "default-scheduler", 2000000000),
	} {
		assert.Nil(t, q.PreEnqueue(ctx, pod), "PreEnqueue holds %s", pod.Name)
		_, status := q.PreFilter(ctx, nil, pod, nil)
		assert.Nil(t, status, "PreFilter rejects %s", pod.Name)
		assert.Nil(t, q.Reserve(ctx, nil, pod, "node"))
		_, known := q.ledger.Entry(pod.UID)
		assert.False(t, known, "Reserve counted %s", pod.Name)
	}
	plain := schedulerPod("plain", "ns", "default-scheduler", 0)
	status := q.PreEnqueue(ctx, plain)
	require.NotNil(t, status)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), v1alpha1.ReasonQueueUnavailable)
}

// The API package keeps its own copy of system-cluster-critical's priority, to stay free of
// k8s.io/kubernetes; it must not drift from upstream's.
func TestSystemCriticalPriorityIsUpstreams(t *testing.T) {
	assert.Equal(t, scheduling.SystemCriticalPriority, v1alpha1.SystemCriticalPriority)
}

// A PodGroup moved to another queue takes its pods' usage along; deleted, its pods count nowhere
// until it exists again.
func TestGroupUsageFollowsTheGroup(t *testing.T) {
	s := newScheduler(t)
	_, a := s.profile(t, v1alpha1.SchedulerName)
	groups := s.tephra.Scheduling().V1alpha1().PodGroups().Informer().GetIndexer()
	pods := s.informers.Core().V1().Pods().Informer().GetIndexer()
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{Queue: "team-a"}}
	require.NoError(t, groups.Add(pg))
	for _, uid := range []string{"w0", "w1"} {
		pod := ledgertest.Pod(uid, map[string]string{v1alpha1.PodGroupLabel: "train"}, "node", 1)
		require.NoError(t, pods.Add(pod))
		a.feed.ObservePod(pod)
	}
	assert.Equal(t, quota.Amounts{gpu: 2}, a.ledger.View().Allocated["team-a"])

	moved := pg.DeepCopy()
	moved.Spec.Queue = "team-b"
	require.NoError(t, groups.Update(moved))
	a.feed.ReobserveGroup("ns", "train")
	v := a.ledger.View()
	assert.Empty(t, v.Allocated["team-a"], "the old queue is charged no more")
	assert.Equal(t, quota.Amounts{gpu: 2}, v.Allocated["team-b"])

	require.NoError(t, groups.Delete(moved))
	a.feed.ReobserveGroup("ns", "train")
	assert.Empty(t, a.ledger.View().Allocated["team-b"], "a deleted group's pods count nowhere")
	require.NoError(t, groups.Add(pg))
	a.ledger.GroupAdded("ns/train", a.feed.Queue)
	assert.Equal(t, quota.Amounts{gpu: 2}, a.ledger.View().Allocated["team-a"], "recreated, it is resolved again")
}

// A pod refused while its queue was unknown comes back when the queue is added, and is admitted
// then, even if the shared tree's own handler has not yet heard of the queue: each handler of an
// informer runs on its own (found when pods came before the scheduler's Queue informer had
// listed the CRD installed after it started; they waited for the 5-minute flush).
func TestAPodBroughtBackByItsQueueMeetsIt(t *testing.T) {
	s := newScheduler(t)
	base, a := s.profile(t, "default-scheduler")
	h := activations{profileHandle: base, mu: &sync.Mutex{}, pods: map[string]*corev1.Pod{}}
	q := &Queue{
		handle: h, queues: s.tephra.Scheduling().V1alpha1().Queues().Lister(), podGroups: a.podGroups,
		ledger: a.ledger, accounts: a, synced: func() bool { return true },
	}
	var err error
	q.reclaimer, err = reclaim.New(reclaim.Deps{Handle: h}, reclaim.Settings{})
	require.NoError(t, err)
	ctx := context.Background()
	pod := schedulerPod("plain", "ns", "default-scheduler", 0)
	pod.Spec.NodeName = ""
	require.NoError(t, s.informers.Core().V1().Pods().Informer().GetIndexer().Add(pod))
	status := q.PreEnqueue(ctx, pod)
	require.NotNil(t, status)
	require.Contains(t, status.Message(), `queue "default" does not exist`)

	// The informer's store has the queue; only this plugin's handler has run.
	queue := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultQueue}, Spec: v1alpha1.QueueSpec{Weight: 1}}
	require.NoError(t, s.tephra.Scheduling().V1alpha1().Queues().Informer().GetIndexer().Add(queue))
	q.queueAdded(queue)
	assert.Equal(t, []string{"ns/plain"}, h.activated())
	assert.Nil(t, q.PreEnqueue(ctx, pod), "the activated pod meets its queue")
}

// An upstream PodGroup's pods are charged to the queue its translation names, with no Tephra
// object: its label, else its Workload's. Its handler moves them when the label changes, and
// deleted, the group leaves them counted nowhere; a Tephra object of its name wins.
func TestUpstreamGroupUsageFollowsTheGroup(t *testing.T) {
	s := newScheduler(t)
	setup.ServeUpstream(s.config, true, true)
	_, a := s.profile(t, v1alpha1.SchedulerName)
	upstream := s.informers.Scheduling().V1beta1()
	pgHandler := upstream.PodGroups().Informer()
	pods := s.informers.Core().V1().Pods().Informer().GetIndexer()
	up := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{v1alpha1.QueueLabel: "team-a"}, Generation: 1},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
	}
	for _, uid := range []string{"w0", "w1"} {
		pod := ledgertest.Pod(uid, nil, "node", 1)
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		require.NoError(t, pods.Add(pod))
		a.feed.ObservePod(pod)
	}
	assert.Empty(t, a.ledger.View().Allocated["team-a"], "no group yet: counted nowhere")
	require.NoError(t, pgHandler.GetIndexer().Add(up))
	handlers := setupHandlers(a)
	handlers.OnAdd(up, false)
	assert.Equal(t, quota.Amounts{gpu: 2}, a.ledger.View().Allocated["team-a"], "the upstream PodGroup's queue")
	pg, err := a.podGroups.PodGroups("ns").Get("train")
	require.NoError(t, err)
	assert.Equal(t, int32(2), pg.Spec.MinMember)

	moved := up.DeepCopy()
	moved.Labels[v1alpha1.QueueLabel] = "team-b"
	moved.Generation = 2
	require.NoError(t, pgHandler.GetIndexer().Update(moved))
	handlers.OnUpdate(up, moved)
	v := a.ledger.View()
	assert.Empty(t, v.Allocated["team-a"], "the old queue is charged no more")
	assert.Equal(t, quota.Amounts{gpu: 2}, v.Allocated["team-b"])

	object := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{Queue: "mine", MinMember: 2}}
	objects := s.tephra.Scheduling().V1alpha1().PodGroups().Informer().GetIndexer()
	require.NoError(t, objects.Add(object))
	a.feed.GroupHandlers().OnAdd(object, false)
	v = a.ledger.View()
	assert.Equal(t, quota.Amounts{gpu: 2}, v.Allocated["mine"], "a Tephra object of its name wins, from its Add event")
	assert.Empty(t, v.Allocated["team-b"], "the upstream PodGroup's queue is charged no more")
	require.NoError(t, objects.Delete(object))
	a.feed.GroupHandlers().OnDelete(object)
	assert.Equal(t, quota.Amounts{gpu: 2}, a.ledger.View().Allocated["team-b"], "the upstream PodGroup's group again")

	require.NoError(t, pgHandler.GetIndexer().Delete(moved))
	handlers.OnDelete(moved)
	v = a.ledger.View()
	assert.Empty(t, v.Allocated["team-b"], "a deleted group's pods count nowhere")
}

// setupHandlers are the ledger's handlers of upstream PodGroups, as accounts registers them.
func setupHandlers(a *accounts) toolscache.ResourceEventHandler {
	return a.upstream.Handler(a.feed.GroupHandlers(), a.objects)
}
