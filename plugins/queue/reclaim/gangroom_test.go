package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// A gang of two 8-GPU pods, in a queue owed 16 of 24 GPUs, on three 8-GPU nodes that another
// queue fills, each with one 8-GPU job: one started a minute before the gang came, two an hour
// before. Ten minutes into its wait, patience lets reclaim take the young job but neither old
// one: the plan places one of the two pods, so nothing is evicted (each member alone would have
// evicted the young job, and the gang would have waited on). After an hour the plan places both.
// With a node free, one pod goes there and the other still finds no room it may take; and when
// the other queue is at its share, reclaim may take nothing.
func TestAGangReclaimsOnlyWhenItsWholeMinimumCanHaveRoom(t *testing.T) {
	now := time.Now()
	came := now.Add(-10 * time.Minute)
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "hog"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}, Spec: v1alpha1.QueueSpec{Weight: 2}},
	})
	resolve := func(string, string) string { return "" }
	inGang := map[string]string{v1alpha1.QueueLabel: "waiting", v1alpha1.PodGroupLabel: "job"}
	type hogJob struct {
		node string
		ran  time.Duration // before the gang came
	}
	plan := func(waited time.Duration, free string, hogAllocated int64, jobs ...hogJob) (int, [spareReasons]int) {
		t.Helper()
		l := ledger.New(v1alpha1.SchedulerName)
		nodes := []*planNode{}
		for _, j := range jobs {
			pod := ledgertest.Pod("hog-"+j.node, map[string]string{v1alpha1.QueueLabel: "hog"}, j.node, 8)
			pod.Status.StartTime = &metav1.Time{Time: came.Add(-j.ran)}
			l.Observe(pod, resolve)
			info, err := framework.NewPodInfo(pod)
			require.NoError(t, err)
			nodes = append(nodes, &planNode{name: j.node, room: quota.Amounts{gpu: 0}, pods: []fwk.PodInfo{info}})
		}
		if free != "" {
			nodes = append(nodes, &planNode{name: free, room: quota.Amounts{gpu: 8}})
		}
		var members []*corev1.Pod
		for _, name := range []string{"m0", "m1"} {
			p := ledgertest.Pod(name, inGang, "", 8)
			p.CreationTimestamp = metav1.Time{Time: came}
			l.Observe(p, resolve)
			members = append(members, p)
		}
		r := &run{Reclaimer: &Reclaimer{ledger: l, settings: Settings{Patience: true}}}
		r.pod, r.leaf, r.belowShare, r.need = members[0], tree.Get("waiting"), true, quota.Amounts{gpu: 8}
		r.work = Workload{Queue: "waiting", Group: "ns/job"}
		r.state = Queues{Tree: tree,
			View:     ledger.View{Total: quota.Amounts{gpu: 24}, Allocated: map[string]quota.Amounts{"hog": {gpu: hogAllocated}}},
			Deserved: map[string]quota.Amounts{"hog": {gpu: 8}, "waiting": {gpu: 16}}}
		placed := r.planRoom(members, nodes, []corev1.ResourceName{gpu}, came.Add(waited))
		count, _ := r.protected.result()
		assert.Equal(t, quota.Amounts{gpu: 8}, r.need, "the plan gives the preemptor's need back")
		return placed, count
	}
	young, old, older := hogJob{"a", time.Minute}, hogJob{"b", time.Hour}, hogJob{"c", time.Hour}

	placed, spared := plan(10*time.Minute, "", 24, young, old, older)
	assert.Equal(t, 1, placed, "the young job makes room for one pod; patience spares the others")
	assert.Equal(t, 2, spared[spareCost])

	placed, _ = plan(61*time.Minute, "", 24, young, old, older)
	assert.Equal(t, 2, placed, "after an hour's wait an old job may go too")

	placed, _ = plan(10*time.Minute, "d", 24, old, older, hogJob{"e", time.Hour})
	assert.Equal(t, 1, placed, "one pod on the free node; no room reclaim may take for the other")

	placed, _ = plan(61*time.Minute, "", 8, young, old, older)
	assert.Equal(t, 0, placed, "the other queue at its share gives nothing")
}

// A gang of a launcher and a worker (tasks of 8 GPUs each): node a is free but ruled out by the
// preemptor's own filters, node b holds two jobs of another queue above its share. Whichever of
// the two preempts, a is ruled out for its task only: the other member goes there, and the
// preemptor's takes b. Ruling a out for both would place one.
func TestAGangPlanRulesOutNodesForThePreemptorsTaskOnly(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "hog"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}, Spec: v1alpha1.QueueSpec{Weight: 2}},
	})
	resolve := func(string, string) string { return "" }
	l := ledger.New(v1alpha1.SchedulerName)
	hog := func(name, node string, gpus int64, ran time.Duration) fwk.PodInfo {
		pod := ledgertest.Pod(name, map[string]string{v1alpha1.QueueLabel: "hog"}, node, gpus)
		pod.Status.StartTime = &metav1.Time{Time: now.Add(-ran)}
		l.Observe(pod, resolve)
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		return info
	}
	member := func(name, task string) *corev1.Pod {
		p := ledgertest.Pod(name, map[string]string{v1alpha1.QueueLabel: "waiting", v1alpha1.PodGroupLabel: "job", v1alpha1.TaskLabel: task}, "", 8)
		p.CreationTimestamp = metav1.Time{Time: now}
		l.Observe(p, resolve)
		return p
	}
	plan := func(launcherFirst bool) int {
		r := &run{Reclaimer: &Reclaimer{ledger: l}}
		launcher, worker := member("launcher", "launcher"), member("worker", "worker")
		missing := []*corev1.Pod{launcher, worker}
		if !launcherFirst {
			missing = []*corev1.Pod{worker, launcher}
		}
		r.pod, r.leaf, r.belowShare, r.need = missing[0], tree.Get("waiting"), true, quota.Amounts{gpu: 8}
		r.work = Workload{Queue: "waiting", Group: "ns/job"}
		r.state = Queues{Tree: tree,
			View:     ledger.View{Total: quota.Amounts{gpu: 24}, Allocated: map[string]quota.Amounts{"hog": {gpu: 16}}},
			Deserved: map[string]quota.Amounts{"hog": {gpu: 8}, "waiting": {gpu: 16}}}
		nodes := []*planNode{
			{name: "a", room: quota.Amounts{gpu: 8}, unresolvable: true},
			{name: "b", room: quota.Amounts{gpu: 0}, pods: []fwk.PodInfo{hog("old", "b", 4, time.Hour), hog("young", "b", 4, time.Minute)}},
		}
		return r.planRoom(missing, nodes, []corev1.ResourceName{gpu}, now)
	}
	// The launcher's filters rule a out for it: it takes both jobs on b (the hog's 8 GPUs above its
	// share), and the worker goes to a.
	assert.Equal(t, 2, plan(true))
	// The worker preempting: a is ruled out for workers, the launcher may go there, and the
	// worker takes b.
	assert.Equal(t, 2, plan(false))
}
