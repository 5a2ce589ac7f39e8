package reclaim

import (
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
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// A job's debt is the work its start threw away, size × seconds run, over its own size: on 8
// GPUs, a 2-GPU job that reclaimed a 2-GPU job of an hour owes an hour, a 4-GPU job that
// reclaimed it half an hour. Preemption by priority and elastic pods throw away no job's run.
func TestPaybackOwedIsTheWorkThrownAwayOverTheJobsSize(t *testing.T) {
	now := time.Now()
	victim := func(gpus int64, ran time.Duration, kind string, elastic bool) *unit {
		pod := ledgertest.Pod("v", nil, "node", gpus)
		pod.Status.StartTime = &metav1.Time{Time: now.Add(-ran)}
		return &unit{pods: []*corev1.Pod{pod}, kind: kind, elastic: elastic, freed: quota.Amounts{gpu: gpus}}
	}
	for _, tc := range []struct {
		name    string
		victims []*unit
		size    float64
		want    time.Duration
	}{
		{"a job of its size", []*unit{victim(2, time.Hour, kindReclaim, false)}, 2.0 / 8, time.Hour},
		{"twice its size", []*unit{victim(4, time.Hour, kindReclaim, false)}, 2.0 / 8, 2 * time.Hour},
		{"half its size", []*unit{victim(2, time.Hour, kindReclaim, false)}, 4.0 / 8, 30 * time.Minute},
		{"victims add up", []*unit{victim(2, time.Hour, kindReclaim, false), victim(2, 10*time.Minute, kindReclaim, false)}, 2.0 / 8, 70 * time.Minute},
		{"preemption by priority", []*unit{victim(2, time.Hour, kindPreempt, false)}, 2.0 / 8, 0},
		{"an elastic pod", []*unit{victim(2, time.Hour, kindReclaim, true)}, 2.0 / 8, 0},
		{"a victim not started", []*unit{victim(2, -time.Minute, kindReclaim, false)}, 2.0 / 8, 0},
		{"a job of no size", []*unit{victim(2, time.Hour, kindReclaim, false)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := paybackOwed(tc.victims, tc.size, now, quota.Amounts{gpu: 8}, []corev1.ResourceName{gpu})
			assert.InDelta(t, tc.want.Seconds(), got.Seconds(), 1e-3)
		})
	}
	pg := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: 4}}
	assert.Equal(t, quota.Amounts{gpu: 8}, gangNeed(quota.Amounts{gpu: 2}, pg), "a gang's size is its minimum's")
	assert.Equal(t, quota.Amounts{gpu: 2}, gangNeed(quota.Amounts{gpu: 2}, nil), "a lone pod's its own")
}

// paybackFixture is a Reclaimer for a pod of queue "waiting" on 8 GPUs, with candidates of queue
// "a" started the given time ago, by name.
type paybackFixture struct {
	r          *run
	candidates []fwk.PodInfo
	pods       map[string]*corev1.Pod
}

func newPaybackFixture(t *testing.T, tree *quota.Tree, started map[string]time.Duration, now time.Time) *paybackFixture {
	l := ledger.New(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "" }
	f := &paybackFixture{pods: map[string]*corev1.Pod{}}
	for name, ago := range started {
		pod := ledgertest.Pod(name, map[string]string{v1alpha1.QueueLabel: "a"}, "node", 2)
		pod.Status.StartTime = &metav1.Time{Time: now.Add(-ago)}
		l.Observe(pod, resolve)
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		f.candidates = append(f.candidates, info)
		f.pods[name] = pod
	}
	preemptor := ledgertest.Pod("preemptor", map[string]string{v1alpha1.QueueLabel: "waiting"}, "", 2)
	l.Observe(preemptor, resolve)
	f.r = &run{Reclaimer: &Reclaimer{ledger: l, settings: Settings{Patience: true}}}
	f.r.pod, f.r.leaf, f.r.belowShare, f.r.need = preemptor, tree.Get("waiting"), true, quota.Amounts{gpu: 2}
	f.r.state = Queues{Tree: tree, View: ledger.View{Total: quota.Amounts{gpu: 8}, Allocated: map[string]quota.Amounts{}}}
	return f
}

// reclaimedFor has pod's job start by a reclaim, at at, of a 2-GPU victim that had run ran.
func (f *paybackFixture) reclaimedFor(pod *corev1.Pod, ran time.Duration, at time.Time) {
	victim := ledgertest.Pod("victim-of-"+pod.Name, nil, "node", 2)
	victim.Status.StartTime = &metav1.Time{Time: at.Add(-ran)}
	preemptor := f.r.pod
	defer func() { f.r.pod = preemptor }()
	f.r.pod = pod
	f.r.countReclaims([]*unit{{pods: []*corev1.Pod{victim}, kind: kindReclaim, freed: quota.Amounts{gpu: 2}}}, quota.Amounts{gpu: 2}, at)
}

func (f *paybackFixture) victims() []string {
	f.r.protected = protection{} // as a new run
	var names []string
	for _, u := range f.r.units(f.candidates) {
		names = append(names, u.pods[0].Name)
	}
	return names
}

// A job that a reclaim started, throwing away a minute of a job of its size, is no victim of
// reclaim until it has run a minute; the preemptor is told why, and when it may try again. One
// that has run its minute, or started by no reclaim, may go.
func TestAJobStartedByReclaimIsSparedUntilItHasPaidBack(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
	f := newPaybackFixture(t, tree, map[string]time.Duration{"paying": 10 * time.Second, "paid": 2 * time.Minute, "free": 5 * time.Second}, now)
	f.reclaimedFor(f.pods["paying"], time.Minute, now.Add(-11*time.Second))
	f.reclaimedFor(f.pods["paid"], time.Minute, now.Add(-121*time.Second))
	assert.InDelta(t, 60, f.r.paybacks.of(podJob(f.pods["paying"])).Seconds(), 1e-3)

	assert.Equal(t, []string{"free", "paid"}, f.victims())
	count, first := f.r.protected.result()
	assert.Equal(t, 1, count[sparePayback])
	assert.WithinDuration(t, now.Add(50*time.Second), first, time.Millisecond, "the job has run 10 s of the minute it owes")
	assert.Contains(t, f.r.sparedJobsNote(klog.Background(), &f.r.protected, nil, now.Add(time.Hour)),
		"1 job(s) it could reclaim were started by reclaim and have not yet run long enough to pay back the work their start threw away")

	f.r.settings.Patience = false
	assert.Len(t, f.victims(), 3, "payback is part of reclaim patience")
}

// A debt is settled when the job is evicted, ends or is deleted: a job started again owes only
// what its new start throws away.
func TestAJobsDebtIsSettledWhenItIsEvictedOrEnds(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
	f := newPaybackFixture(t, tree, map[string]time.Duration{"evicted": time.Second, "ended": time.Second, "deleted": time.Second, "gone": time.Second}, now)
	for _, pod := range f.pods {
		f.reclaimedFor(pod, time.Minute, now)
	}
	assert.Empty(t, f.victims(), "all owe a minute")

	f.r.countReclaims([]*unit{{pods: []*corev1.Pod{f.pods["evicted"]}, kind: kindPreempt}}, quota.Amounts{gpu: 2}, now)
	ended := f.pods["ended"].DeepCopy()
	ended.Status.Phase = corev1.PodSucceeded
	f.r.paybacks.podUpdated(f.pods["ended"], ended)
	f.r.paybacks.podUpdated(f.pods["deleted"], f.pods["deleted"])
	assert.NotZero(t, f.r.paybacks.of(podJob(f.pods["deleted"])), "a pod still running keeps its debt")
	f.r.paybacks.podEnded(f.pods["deleted"])
	f.r.paybacks.podEnded(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: f.pods["gone"]})
	assert.ElementsMatch(t, []string{"evicted", "ended", "deleted", "gone"}, f.victims())
	assert.Zero(t, f.r.paybacks.of(podJob(f.r.pod)), "the preemption threw away no job's run")
}

// A queue below its guarantee ignores debts, as it ignores patience and the limit per job.
func TestAQueueBelowItsGuaranteeIgnoresPayback(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}, Spec: v1alpha1.QueueSpec{Guarantee: corev1.ResourceList{gpu: resource.MustParse("2")}}},
	})
	f := newPaybackFixture(t, tree, map[string]time.Duration{"paying": time.Second}, now)
	f.reclaimedFor(f.pods["paying"], time.Minute, now)
	assert.Equal(t, []string{"paying"}, f.victims(), "2 asked are within the guarantee of 2")
	f.r.state.View.Allocated["waiting"] = quota.Amounts{gpu: 2}
	assert.Empty(t, f.victims(), "past its guarantee, the queue waits for the job to pay back")
}

// A job that reclaim took before reclaims only what pays for itself: its patience counts its
// victims' whole runs. A job never reclaimed counts their runs before its wait.
func TestAJobReclaimedBeforeCountsItsVictimsWholeRuns(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
	f := newPaybackFixture(t, tree, nil, now)
	pods := []*corev1.Pod{f.r.pod}
	assert.False(t, f.r.patienceFor(pods, f.r.need, now).wholeRun, "never reclaimed")
	f.r.reclaims.reclaimed(podJob(f.r.pod), now)
	p := f.r.patienceFor(pods, f.r.need, now)
	assert.True(t, p.on)
	assert.True(t, p.wholeRun, "reclaimed once: restarting it must pay for itself")

	f.r.work.Group = "ns/gang"
	assert.False(t, f.r.patienceFor(pods, f.r.need, now).wholeRun, "a gang is its group, not its pod")
	f.r.reclaims.reclaimed(jobOf(&unit{group: "ns/gang"}), now)
	assert.True(t, f.r.patienceFor(pods, f.r.need, now).wholeRun)
}
