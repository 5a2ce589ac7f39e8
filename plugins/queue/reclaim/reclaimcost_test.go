package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// A pod that has waited 10 minutes for 1 of 8 GPUs may throw away 10 GPU-minutes of an eighth of
// the cluster's size: a job of its size that started during its wait costs nothing, one that had
// run 5 minutes when it began to wait costs 5, and a second such job on top passes the budget. A
// job of an hour is spared until the pod has waited an hour; one twice its size, until two.
func TestReclaimPatienceWeighsTheWorkLostAgainstTheWait(t *testing.T) {
	now := time.Now()
	since := now.Add(-10 * time.Minute)
	total := quota.Amounts{gpu: 8}
	p := patience{on: true, since: since, size: 1.0 / 8, now: now, total: total, names: []corev1.ResourceName{gpu}}
	job := func(gpus int64, startedBeforeWait time.Duration) *unit {
		pod := ledgertest.Pod("v", nil, "node", gpus)
		pod.Status.StartTime = &metav1.Time{Time: since.Add(-startedBeforeWait)}
		return &unit{pods: []*corev1.Pod{pod}, kind: kindReclaim, freed: quota.Amounts{gpu: gpus}}
	}

	ok, _ := p.take(job(1, -time.Minute))
	assert.True(t, ok, "a job that started while the pod waited costs nothing")
	ok, from := p.take(job(1, time.Hour))
	assert.False(t, ok)
	assert.WithinDuration(t, since.Add(time.Hour), from, time.Millisecond, "a job of an hour is spared until the pod has waited an hour")
	ok, from = p.take(job(2, time.Hour))
	assert.False(t, ok)
	assert.WithinDuration(t, since.Add(2*time.Hour), from, time.Millisecond, "twice the size, twice the wait")
	ok, _ = p.take(job(1, 5*time.Minute))
	assert.True(t, ok, "5 minutes of work for 10 of waiting")
	ok, from = p.take(job(1, 6*time.Minute))
	assert.False(t, ok, "5 + 6 minutes of work pass the 10 minutes waited")
	assert.WithinDuration(t, since.Add(11*time.Minute), from, time.Millisecond,
		"the two together once the pod has waited 11 minutes: alone, the second could have gone a while ago, and a wake-up then would find the same refusal")

	preempt := job(1, time.Hour)
	preempt.kind = kindPreempt
	ok, _ = p.take(preempt)
	assert.True(t, ok, "preemption by priority in the pod's own queue is not weighed")
	elastic := job(1, time.Hour)
	elastic.elastic = true
	ok, _ = p.take(elastic)
	assert.True(t, ok, "an elastic pod's job goes on without it")
	ok, _ = (&patience{}).take(job(1, time.Hour))
	assert.True(t, ok, "patience off lets everything through")
}

// Counting the whole run (reclaimPatienceCounts WholeRun), a pod of 4 of 8 GPUs that has waited
// 10 minutes may throw away 40 GPU-minutes in all: jobs that started during its wait cost what
// they ran, a job of its size that ran before the wait is never taken (its run grows as fast as
// the wait), and a smaller one once the wait has caught up with it.
func TestPatienceCountingTheWholeRunWeighsAllAVictimThrowsAway(t *testing.T) {
	now := time.Now()
	since := now.Add(-10 * time.Minute)
	p := patience{on: true, wholeRun: true, since: since, size: 4.0 / 8, now: now, total: quota.Amounts{gpu: 8}, names: []corev1.ResourceName{gpu}}
	job := func(gpus int64, started time.Time) *unit {
		pod := ledgertest.Pod("v", nil, "node", gpus)
		pod.Status.StartTime = &metav1.Time{Time: started}
		return &unit{pods: []*corev1.Pod{pod}, kind: kindReclaim, freed: quota.Amounts{gpu: gpus}}
	}

	ok, _ := p.take(job(2, now.Add(-8*time.Minute)))
	assert.True(t, ok, "16 of 40 GPU-minutes")
	ok, _ = p.take(job(2, now.Add(-8*time.Minute)))
	assert.True(t, ok, "32 of 40")
	ok, from := p.take(job(1, now.Add(-9*time.Minute)))
	assert.False(t, ok, "a job that started during the wait costs what it ran: 32 + 9 pass 40")
	assert.True(t, from.IsZero(), "never with the two taken: their 4 GPUs' runs grow as fast as the wait")

	q := patience{on: true, wholeRun: true, since: since, size: 4.0 / 8, now: now, total: quota.Amounts{gpu: 8}, names: []corev1.ResourceName{gpu}}
	ok, from = q.take(job(4, since.Add(-time.Minute)))
	assert.False(t, ok)
	assert.True(t, from.IsZero(), "a job of the pod's size that ran before the wait is never taken")
	ok, from = q.take(job(2, since.Add(-20*time.Minute)))
	assert.False(t, ok, "2 GPUs × 30 minutes pass 4 × 10")
	// 4 × (10 + d) ≥ 2 × (30 + d): d = 10 minutes.
	assert.WithinDuration(t, now.Add(10*time.Minute), from, time.Millisecond, "the wait catches up with a smaller job")
}

// With reclaimPatience on, a queue below its guarantee is not patient; a queue above it is, and
// its pod began to wait when it was created.
func TestAQueueBelowItsGuaranteeReclaimsAtOnce(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "owed"}, Spec: v1alpha1.QueueSpec{Guarantee: corev1.ResourceList{gpu: resource.MustParse("2")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	})
	pod := ledgertest.Pod("preemptor", nil, "", 1)
	pod.CreationTimestamp = metav1.Time{Time: now.Add(-time.Minute)}
	r := &run{Reclaimer: &Reclaimer{settings: Settings{Patience: true}}}
	r.pod, r.need = pod, quota.Amounts{gpu: 1}
	r.state = Queues{Tree: tree, View: ledger.View{Total: quota.Amounts{gpu: 8}, Allocated: map[string]quota.Amounts{"owed": {gpu: 1}}}}

	r.leaf = tree.Get("owed")
	assert.False(t, r.patienceFor([]*corev1.Pod{pod}, r.need, now).on, "1 held and 1 asked are within the guarantee of 2")
	r.state.View.Allocated["owed"] = quota.Amounts{gpu: 2}
	p := r.patienceFor([]*corev1.Pod{pod}, r.need, now)
	assert.True(t, p.on, "past the guarantee, the queue is patient")
	assert.Equal(t, now.Add(-time.Minute), p.since)
	assert.InDelta(t, 1.0/8, p.size, 1e-9)

	r.leaf = tree.Get("other")
	assert.True(t, r.patienceFor([]*corev1.Pod{pod}, r.need, now).on, "a queue without a guarantee is patient")
	r.settings.Patience = false
	assert.False(t, r.patienceFor([]*corev1.Pod{pod}, r.need, now).on, "off by default")
}

// With reclaimLimitPerJob 2, a job reclaimed twice is no victim of reclaim again, and the
// preemptor is told why; a gang counts once per reclaim however many members go, and jobs are
// told apart by group, else by owner.
func TestAJobReclaimedAsOftenAsTheLimitIsNotReclaimedAgain(t *testing.T) {
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
	l := ledger.New(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "" }
	var candidates []fwk.PodInfo
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"twice", "once"} {
		pod := ledgertest.Pod(name, map[string]string{v1alpha1.QueueLabel: "a"}, "node", 1)
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "job-" + pod.UID, Controller: new(true)}}
		l.Observe(pod, resolve)
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		candidates = append(candidates, info)
		pods[name] = pod
	}
	preemptor := ledgertest.Pod("preemptor", map[string]string{v1alpha1.QueueLabel: "waiting"}, "", 1)
	l.Observe(preemptor, resolve)
	r := &run{Reclaimer: &Reclaimer{ledger: l, settings: Settings{LimitPerJob: 2}}}
	r.pod, r.leaf, r.belowShare, r.need = preemptor, tree.Get("waiting"), true, quota.Amounts{gpu: 1}
	r.state = Queues{Tree: tree}
	now := time.Now()
	r.countReclaims([]*unit{{pods: []*corev1.Pod{pods["twice"]}, kind: kindReclaim}}, nil, now)
	r.countReclaims([]*unit{{pods: []*corev1.Pod{pods["twice"]}, kind: kindReclaim}, {pods: []*corev1.Pod{pods["once"]}, kind: kindReclaim}}, nil, now)
	r.countReclaims([]*unit{{pods: []*corev1.Pod{pods["once"]}, kind: kindPreempt}, {pods: []*corev1.Pod{pods["once"]}, kind: kindReclaim, elastic: true}}, nil, now)

	var names []string
	for _, u := range r.units(candidates) {
		names = append(names, u.pods[0].Name)
	}
	assert.Equal(t, []string{"once"}, names, "preemption by priority and an elastic pod's reclaim restart no job, and count not")
	count, first := r.protected.result()
	assert.Equal(t, 1, count[spareLimit])
	assert.True(t, first.IsZero(), "a job at its limit is never reclaimed: there is no time to try again")

	gang := &unit{pods: []*corev1.Pod{ledgertest.Pod("m0", nil, "n", 1), ledgertest.Pod("m1", nil, "n", 1)}, group: "ns/g", kind: kindReclaim}
	r.countReclaims([]*unit{gang}, nil, now)
	assert.Equal(t, 1, r.reclaims.of(jobOf(gang)), "a gang is one job")
	assert.False(t, r.overLimit(&unit{group: "ns/assumed", kind: kindReclaim}, r.need), "a gang unit without bound pods has a job all the same")
	assert.Empty(t, jobOf(&unit{kind: kindReclaim}), "a unit without pods or group is no job")
	r.settings.LimitPerJob = 0
	r.protected = protection{} // as a new run
	assert.Len(t, r.units(candidates), 2, "0: no limit")
}
