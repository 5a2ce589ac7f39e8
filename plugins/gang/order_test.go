package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// In a queue ordered ShortestEstimateFirst with a bound of an hour, a job of 10 minutes goes
// before one of 2 hours (counted as the hour) submitted 20 minutes earlier, and before one without
// an estimate; a job submitted more than the bound after another never goes before it. A queue
// ordered by submission keeps its order, and a plain pod's activeDeadlineSeconds is its estimate.
func TestAQueueOrderedByEstimateRunsShortJobsFirstWithinItsBound(t *testing.T) {
	f := newFixture(t)
	t0 := f.now
	f.gang.orders.set(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "sef"}, Spec: v1alpha1.QueueSpec{
		Order: v1alpha1.QueueOrderShortestEstimateFirst, OrderBoundSeconds: ptr.To[int32](3600)}})
	job := func(name, queue string, estimate time.Duration, created time.Time) fwk.QueuedEntityInfo {
		pg := f.group(t, name, 1, nil, created)
		pg.Spec.Queue = queue
		if estimate > 0 {
			pg.Spec.RuntimeEstimateSeconds = ptr.To(int32(estimate / time.Second))
		}
		require.NoError(t, f.groups.Update(pg))
		pod := f.member(t, name+"-0", name, "")
		f.gang.PreEnqueue(context.Background(), pod) // learns the group's creation time
		return queued(t, pod, created)
	}
	long := job("long", "sef", 2*time.Hour, t0)
	unestimated := job("unestimated", "sef", 0, t0)
	short := job("short", "sef", 10*time.Minute, t0.Add(20*time.Minute))
	late := job("late", "sef", time.Minute, t0.Add(61*time.Minute))

	assert.True(t, f.gang.Less(short, long), "10 minutes go before 2 hours submitted 20 minutes earlier")
	assert.True(t, f.gang.Less(short, unestimated), "and before a job without an estimate")
	assert.False(t, f.gang.Less(late, long), "a job submitted more than the bound later does not pass")
	assert.False(t, f.gang.Less(late, unestimated))

	fifoLong := job("fifo-long", "fifo", 2*time.Hour, t0)
	fifoShort := job("fifo-short", "fifo", 10*time.Minute, t0.Add(20*time.Minute))
	assert.True(t, f.gang.Less(fifoLong, fifoShort), "a queue ordered by submission keeps it")

	plain := f.member(t, "plain", "", "")
	plain.Labels = map[string]string{v1alpha1.QueueLabel: "sef"}
	plain.Spec.ActiveDeadlineSeconds = ptr.To[int64](300)
	assert.True(t, f.gang.Less(queued(t, plain, t0.Add(30*time.Minute)), long), "a pod's activeDeadlineSeconds is its estimate")

	f.gang.orders.set(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "sef"}})
	assert.True(t, f.gang.Less(long, short), "back to submission order once the queue says so")
	assert.Zero(t, f.gang.orders.count.Load())
}

// In a queue ordered by submission, a pod refused since it came goes behind every pod never
// refused, and behind refused pods that came before its last refusal, as under upstream's
// PrioritySort, so that retried pods of held queues do not keep new ones from being tried. In a
// queue ordered by estimate, a refused job keeps its place: a shorter one that came before its
// refusal still goes after it when the shorter came later than its place.
func TestARefusedPodGoesBehindPodsThatCameBeforeItsRefusal(t *testing.T) {
	f := newFixture(t)
	t0 := f.now
	f.gang.orders.set(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "sef"}, Spec: v1alpha1.QueueSpec{
		Order: v1alpha1.QueueOrderShortestEstimateFirst, OrderBoundSeconds: ptr.To[int32](600)}})
	job := func(name, queue string, created time.Time) *corev1.Pod {
		pg := f.group(t, name, 1, nil, created)
		pg.Spec.Queue = queue
		pg.Spec.RuntimeEstimateSeconds = ptr.To[int32](60)
		require.NoError(t, f.groups.Update(pg))
		pod := f.member(t, name+"-0", name, "")
		f.gang.PreEnqueue(context.Background(), pod)
		return pod
	}
	refused := func(pod *corev1.Pod, at time.Time) fwk.QueuedEntityInfo {
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		return &framework.QueuedPodInfo{PodInfo: info, QueueingParams: framework.QueueingParams{Timestamp: at, UnschedulableCount: 1}}
	}

	old, young := job("old", "fifo", t0), job("young", "fifo", t0.Add(time.Minute))
	assert.True(t, f.gang.Less(queued(t, old, t0), queued(t, young, t0.Add(time.Minute))), "by submission while neither was refused")
	assert.True(t, f.gang.Less(queued(t, young, t0.Add(time.Minute)), refused(old, t0.Add(2*time.Minute))),
		"the old job refused after the young one came goes behind it")
	assert.True(t, f.gang.Less(queued(t, young, t0.Add(time.Minute)), refused(old, t0.Add(30*time.Second))),
		"refused before the young one came, it still goes behind a pod never tried")
	assert.True(t, f.gang.Less(refused(old, t0.Add(30*time.Second)), refused(young, t0.Add(time.Minute))),
		"among refused pods, the one refused first goes first")
	assert.True(t, f.gang.Less(refused(young, t0.Add(time.Minute)), refused(old, t0.Add(2*time.Minute))),
		"and the old job refused after the young one goes behind it")

	first, second := job("first", "sef", t0), job("second", "sef", t0.Add(5*time.Minute))
	assert.True(t, f.gang.Less(refused(first, t0.Add(8*time.Minute)), queued(t, second, t0.Add(5*time.Minute))),
		"in a queue ordered by estimate, a refused job keeps its place, ahead of one never tried")
}
