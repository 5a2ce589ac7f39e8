package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// limitedPatience is the patience of a pod of 1 of 8 GPUs that has waited waited, with a limit,
// and a job of gpus GPUs that had run ran when the pod began to wait.
func limitedPatience(waited, limit time.Duration) (patience, func(gpus int64, ran time.Duration) *unit) {
	now := time.Now()
	since := now.Add(-waited)
	p := patience{on: true, since: since, size: 1.0 / 8, now: now, total: quota.Amounts{gpu: 8}, names: []corev1.ResourceName{gpu}, limit: limit}
	return p, func(gpus int64, ran time.Duration) *unit {
		pod := ledgertest.Pod("v", nil, "node", gpus)
		pod.Status.StartTime = &metav1.Time{Time: since.Add(-ran)}
		return &unit{pods: []*corev1.Pod{pod}, kind: kindReclaim, freed: quota.Amounts{gpu: gpus}}
	}
}

// A pod of 1 of 8 GPUs beside a job of 8 that had run an hour would wait 8 hours; with a limit of
// 5 minutes it is tried again when it has waited 5 minutes, and then reclaims the job.
func TestPatienceLimitBoundsTheWait(t *testing.T) {
	p, job := limitedPatience(2*time.Minute, 5*time.Minute)
	ok, from := p.take(job(8, time.Hour))
	assert.False(t, ok, "before the limit, patience spares the job")
	assert.WithinDuration(t, p.since.Add(5*time.Minute), from, time.Millisecond, "the pod is tried again when it has waited its limit, not 8 hours")

	ok, from = p.take(job(1, 3*time.Minute))
	assert.False(t, ok, "3 minutes of its size's work against 2 waited")
	assert.WithinDuration(t, p.since.Add(3*time.Minute), from, time.Millisecond, "a wait shorter than the limit is patience's own")
	ok, _ = p.take(job(1, time.Minute))
	assert.True(t, ok, "and below the limit, patience lets through what the wait pays for")

	for _, waited := range []time.Duration{5 * time.Minute, 6 * time.Minute} {
		p, job := limitedPatience(waited, 5*time.Minute)
		ok, from := p.take(job(8, time.Hour))
		assert.True(t, ok, "at and past the limit (%v waited), patience spares nothing", waited)
		assert.True(t, from.IsZero())
		ok, _ = p.take(job(8, 24*time.Hour))
		assert.True(t, ok, "however much the jobs had run")
		assert.True(t, p.liftedFor([]*unit{job(8, time.Hour)}), "and the limit is what let them go")
		assert.False(t, p.liftedFor([]*unit{job(1, time.Second)}), "not a job patience let go on its own")
	}

	p, job = limitedPatience(time.Hour, 0)
	ok, _ = p.take(job(8, time.Hour))
	assert.False(t, ok, "0: no limit")
	assert.False(t, p.liftedFor([]*unit{job(8, time.Hour)}))
}

// Counting the whole run, a pod never reclaims a job at least its size that ran before its wait;
// the limit gives it a time all the same.
func TestPatienceLimitGivesTheWholeRunATime(t *testing.T) {
	p, job := limitedPatience(2*time.Minute, 5*time.Minute)
	p.wholeRun = true
	ok, from := p.take(job(8, time.Hour))
	assert.False(t, ok)
	assert.WithinDuration(t, p.since.Add(5*time.Minute), from, time.Millisecond, "never, but for the limit")
	p.now = p.since.Add(5 * time.Minute)
	ok, _ = p.take(job(8, time.Hour))
	assert.True(t, ok)
}

// The limit is the leaf queue's spec.reclaimPatienceLimitSeconds, else the plugin's, and only while
// the queue is below its deserved share with the pod.
func TestPatienceLimitIsTheQueuesElseThePlugins(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "own"}, Spec: v1alpha1.QueueSpec{ReclaimPatienceLimitSeconds: ptr.To[int32](60)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Spec: v1alpha1.QueueSpec{ReclaimPatienceLimitSeconds: ptr.To[int32](0)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	})
	pod := ledgertest.Pod("preemptor", nil, "", 1)
	pod.CreationTimestamp = metav1.Time{Time: now.Add(-time.Minute)}
	r := &run{Reclaimer: &Reclaimer{settings: Settings{Patience: true, PatienceLimit: 5 * time.Minute}}}
	r.pod, r.need, r.belowShare = pod, quota.Amounts{gpu: 1}, true
	r.state = Queues{Tree: tree, View: ledger.View{Total: quota.Amounts{gpu: 8}}}
	limit := func(queue string) time.Duration {
		r.leaf = tree.Get(queue)
		return r.patienceFor([]*corev1.Pod{pod}, r.need, now).limit
	}
	assert.Equal(t, time.Minute, limit("own"), "the queue's own limit wins")
	assert.Zero(t, limit("none"), "a queue may have none")
	assert.Equal(t, 5*time.Minute, limit("default"), "else the plugin's")
	r.belowShare = false
	assert.Zero(t, limit("own"), "a queue at its share reclaims nothing: no limit applies")
}

// The eviction events of victims the limit let through say so, once; a victim preempted in the
// pod's own queue, or one patience let go by itself, has no such note.
func TestTheLimitNotesTheVictimsItLetThrough(t *testing.T) {
	p, job := limitedPatience(6*time.Minute, 5*time.Minute)
	r := &run{Reclaimer: &Reclaimer{}, patience: p}
	old, preempted := job(8, time.Hour), job(8, time.Hour)
	preempted.kind = kindPreempt
	old.pods[0].UID, preempted.pods[0].UID = "old", "preempted"
	r.noteLimitLifted([]*unit{old, preempted})
	assert.Contains(t, r.limitNote("old"), "the pod had waited 6m0s, its queue's reclaim patience limit")
	assert.Empty(t, r.limitNote("old"), "once")
	assert.Empty(t, r.limitNote("preempted"))

	young := job(1, time.Second)
	young.pods[0].UID = "young"
	r.noteLimitLifted([]*unit{young})
	assert.Empty(t, r.limitNote("young"))
}
