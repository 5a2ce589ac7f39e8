package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/queueorder"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// Levels step at 1, 10 and 100 accelerator-hours by default (at each tenfold of the first level),
// and share the bound evenly: the top level waits a whole bound, a workload that never ran none.
func TestServiceLevelsStepAtEachTenfoldOfTheFirstLevel(t *testing.T) {
	hour := 3600.0
	for service, level := range map[float64]int{0: 0, hour - 1: 0, hour: 1, 10*hour - 1: 1, 10 * hour: 2, 100 * hour: 3, 1e9: 3} {
		assert.Equal(t, level, levelOf(service, time.Hour), "%v accelerator-seconds", service)
	}
	for service, level := range map[float64]int{59: 0, 60: 1, 600: 2, 6000: 3} {
		assert.Equal(t, level, levelOf(service, time.Minute), "%v accelerator-seconds, first level a minute", service)
	}
	for level, delay := range []time.Duration{0, 20 * time.Minute, 40 * time.Minute, time.Hour} {
		assert.Equal(t, delay, levelDelay(level, time.Hour), "level %d", level)
	}
}

// A pod's rate is its largest count of accelerators (extended resources), else its CPU cores.
func TestServiceRateCountsAcceleratorsElseCores(t *testing.T) {
	f := newFixture(t)
	pod := f.member(t, "p", "", "")
	assert.InDelta(t, 1.0, f.gang.serviceRate(pod), 1e-9, "a pod without accelerators: its cores")
	asks(pod, gpu, 8)
	asks(pod, "example.com/nic", 2)
	assert.InDelta(t, 8.0, f.gang.serviceRate(pod), 1e-9, "8 GPUs and 2 NICs are 8 accelerators")
}

// asks adds a request of an extended resource to the pod's container.
func asks(pod *corev1.Pod, name corev1.ResourceName, count int64) {
	q := *resource.NewQuantity(count, resource.DecimalSI)
	pod.Spec.Containers[0].Resources.Requests[name] = q
	if pod.Spec.Containers[0].Resources.Limits == nil {
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
	}
	pod.Spec.Containers[0].Resources.Limits[name] = q
}

// run has the plugin see the pod start at from and end (deleted) at to, on a node.
func (f *fixture) run(t *testing.T, pod *corev1.Pod, from, to time.Time) {
	t.Helper()
	f.now = from
	pod.Spec.NodeName = "node"
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = ptr.To(metav1.NewTime(from))
	require.NoError(t, f.pods.Update(pod))
	f.gang.podSeen(pod, false)
	f.now = to
	require.NoError(t, f.pods.Delete(pod))
	f.gang.podSeen(cache.DeletedFinalStateUnknown{Key: pod.Namespace + "/" + pod.Name, Obj: pod}, true)
}

// In a queue ordered LeastAttainedService with a bound of an hour, a gang that ran 8 GPUs for 13
// hours (104 GPU-hours, the top level) and came back when its pod was deleted goes behind a new
// job that came 30 minutes after it, but not behind one that came more than the bound after it;
// and a job of a lower level that came back with it goes before it. A queue ordered by
// submission keeps the gang first: it was created first.
func TestAQueueOrderedByAttainedServiceRunsTheLeastServedFirstWithinItsBound(t *testing.T) {
	f := newFixture(t)
	t0 := f.now
	f.gang.orders.set(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "las"}, Spec: v1alpha1.QueueSpec{
		Order: v1alpha1.QueueOrderLeastAttainedService, OrderBoundSeconds: ptr.To[int32](3600)}})
	group := func(name, queue string, created time.Time) {
		pg := f.group(t, name, 1, nil, created)
		pg.Spec.Queue = queue
		require.NoError(t, f.groups.Update(pg))
	}
	pod := func(name, group string, gpus int64, created time.Time) *corev1.Pod {
		f.now = created
		p := f.member(t, name, group, "")
		asks(p, gpu, gpus)
		f.gang.PreEnqueue(context.Background(), p) // learns the group's creation time
		return p
	}

	group("veteran", "las", t0)
	group("middling", "las", t0)
	f.run(t, pod("veteran-0", "veteran", 8, t0), t0, t0.Add(13*time.Hour))
	f.run(t, pod("middling-0", "middling", 2, t0), t0, t0.Add(13*time.Hour)) // 26 GPU-hours
	back := t0.Add(13 * time.Hour)
	veteran := queued(t, pod("veteran-1", "veteran", 8, back), back)
	middling := queued(t, pod("middling-1", "middling", 2, back), back)
	group("newcomer", "las", back.Add(30*time.Minute))
	newcomer := queued(t, pod("newcomer-0", "newcomer", 8, back.Add(30*time.Minute)), back.Add(30*time.Minute))
	group("late", "las", back.Add(61*time.Minute))
	late := queued(t, pod("late-0", "late", 8, back.Add(61*time.Minute)), back.Add(61*time.Minute))

	assert.True(t, f.gang.Less(newcomer, veteran), "a new job goes before one that ran 104 GPU-hours and came back 30 minutes earlier")
	assert.True(t, f.gang.Less(middling, veteran), "26 GPU-hours (level 2) go before 104 (level 3)")
	assert.True(t, f.gang.Less(newcomer, middling), "a new job goes before one that came back 30 minutes earlier at level 2 (40 minutes)")
	assert.False(t, f.gang.Less(late, veteran), "a job that came more than the bound later does not pass")
	assert.True(t, f.gang.Less(middling, late))
	// TephraQueue's holds read the same order without the queue's entries (rank.go).
	rank := func(e fwk.QueuedEntityInfo) queueorder.Rank {
		return f.gang.Rank(e.(podInfoGetter).GetPodInfo().GetPod())
	}
	assert.True(t, rank(newcomer).Before(rank(veteran)))
	assert.True(t, rank(middling).Before(rank(veteran)))
	assert.True(t, rank(newcomer).Before(rank(middling)))
	assert.False(t, rank(late).Before(rank(veteran)))

	group("fifo-veteran", "fifo", t0)
	f.run(t, pod("fifo-veteran-0", "fifo-veteran", 8, t0), t0, back)
	fifoVeteran := queued(t, pod("fifo-veteran-1", "fifo-veteran", 8, back), back)
	group("fifo-newcomer", "fifo", back.Add(30*time.Minute))
	fifoNewcomer := queued(t, pod("fifo-newcomer-0", "fifo-newcomer", 8, back.Add(30*time.Minute)), back.Add(30*time.Minute))
	assert.True(t, f.gang.Less(fifoVeteran, fifoNewcomer), "a queue ordered by submission keeps it")
	assert.True(t, rank(fifoVeteran).Before(rank(fifoNewcomer)))

	f.gang.orders.set(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "las"}})
	assert.True(t, f.gang.Less(veteran, newcomer), "back to submission order once the queue says so")
	assert.Zero(t, f.gang.orders.count.Load())
}

// A plain pod's workload is its controller: a pod made again by its ReplicaSet after the last one
// ran 4 cores for an hour (level 1: cores count for pods without accelerators) goes behind a pod
// that came 10 minutes after it; one without a controller is a workload of its own, and a pod
// that never ran is at level 0.
func TestAPodMadeAgainByItsControllerKeepsWhatTheLastOneAttained(t *testing.T) {
	f := newFixture(t)
	t0 := f.now
	f.gang.orders.set(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "las"}, Spec: v1alpha1.QueueSpec{
		Order: v1alpha1.QueueOrderLeastAttainedService, OrderBoundSeconds: ptr.To[int32](3600)}})
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}
	pod := func(name string, controlled bool, created time.Time) *corev1.Pod {
		f.now = created
		p := f.member(t, name, "", "")
		p.Labels = map[string]string{v1alpha1.QueueLabel: "las"}
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
		if controlled {
			p.OwnerReferences = []metav1.OwnerReference{owner}
		}
		return p
	}
	f.run(t, pod("rs-a", true, t0), t0, t0.Add(time.Hour))
	back := t0.Add(time.Hour)
	again := queued(t, pod("rs-b", true, back), back)
	plain := queued(t, pod("plain", false, back.Add(10*time.Minute)), back.Add(10*time.Minute))
	assert.True(t, f.gang.Less(plain, again), "4 core-hours are level 1: 20 minutes behind")
	plainLater := queued(t, pod("plain-later", false, back.Add(21*time.Minute)), back.Add(21*time.Minute))
	assert.True(t, f.gang.Less(again, plainLater), "a level's delay is its share of the bound")
}

// A queued pod keeps its place while its workload's service changes under it (a sibling's run
// ends), as the active queue's heap needs; queued again, it takes its new place. A deleted
// PodGroup's service is forgotten. While no queue orders by attained service, ordering freezes
// nothing.
func TestAQueuedPodKeepsItsPlaceUntilQueuedAgain(t *testing.T) {
	f := newFixture(t)
	t0 := f.now
	queue := func(q *v1alpha1.Queue) { f.gang.orders.set(q) }
	pg := f.group(t, "elastic", 1, nil, t0)
	pg.Spec.Queue = "las"
	require.NoError(t, f.groups.Update(pg))
	first := f.member(t, "elastic-0", "elastic", "")
	asks(first, gpu, 4)
	f.gang.PreEnqueue(context.Background(), first)
	f.now = t0
	first.Spec.NodeName, first.Status.Phase, first.Status.StartTime = "node", corev1.PodRunning, ptr.To(metav1.NewTime(t0))
	f.gang.podSeen(first, false)
	second := f.member(t, "elastic-1", "elastic", "")
	other := f.member(t, "other", "", "")
	other.Labels = map[string]string{v1alpha1.QueueLabel: "las"}
	otherAt := t0.Add(10 * time.Minute)
	other.CreationTimestamp = metav1.NewTime(otherAt)
	otherQueued := queued(t, other, otherAt)

	f.now = t0.Add(time.Minute)
	secondQueued := queued(t, second, f.now)
	assert.True(t, f.gang.Less(secondQueued, otherQueued), "no queue orders by attained service: by creation")
	assert.Empty(t, f.gang.attained.frozen, "and nothing is frozen")

	queue(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "las"}, Spec: v1alpha1.QueueSpec{
		Order: v1alpha1.QueueOrderLeastAttainedService, OrderBoundSeconds: ptr.To[int32](3600)}})
	assert.True(t, f.gang.Less(secondQueued, otherQueued), "4 GPU-minutes: level 0, by creation")
	f.now = t0.Add(20 * time.Minute)
	f.gang.podSeen(first, true) // 80 GPU-minutes: level 1, and the group comes again now
	assert.True(t, f.gang.Less(secondQueued, otherQueued), "queued, it keeps its place")
	requeued := queued(t, second, f.now)
	assert.True(t, f.gang.Less(otherQueued, requeued), "queued again, it is behind")

	f.gang.forgetGroup(klog.Background(), groupKey{"ns", "elastic"})
	service, _ := f.gang.attained.of("group/ns/elastic", f.now)
	assert.Zero(t, service, "a deleted PodGroup's service is forgotten")
	assert.Empty(t, f.gang.attained.runs)
}

// A scheduler started while a pod runs counts its run from the pod's start; a plain pod's
// service is forgotten with it.
func TestARestartedSchedulerCountsRunsUnderWayFromTheirStart(t *testing.T) {
	f := newFixture(t)
	pod := f.member(t, "p", "", "")
	asks(pod, gpu, 1)
	pod.Spec.NodeName, pod.Status.Phase = "node", corev1.PodRunning
	pod.Status.StartTime = ptr.To(metav1.NewTime(f.now.Add(-2 * time.Hour)))
	f.gang.podSeen(pod, false)
	service, _ := f.gang.attained.of(workloadOf(pod), f.now)
	assert.InDelta(t, 7200.0, service, 1e-6)
	f.gang.podSeen(pod, true)
	assert.Empty(t, f.gang.attained.workloads)
	assert.Empty(t, f.gang.attained.runs)
}
