package reclaim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// A job younger than its queue's reclaim minimum runtime is no victim of reclaim: the Queue's
// reclaimMinRuntimeSeconds, else the plugin's reclaimMinRuntime. The preemptor learns when the
// first spared job may be reclaimed. Among those that may go, the youngest goes first.
func TestAJobYoungerThanItsQueuesMinimumRuntimeIsNotReclaimed(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.QueueSpec{ReclaimMinRuntimeSeconds: ptr.To[int32](600)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}},
	})
	started := map[string]time.Duration{"b-old": time.Hour, "b-young": time.Minute, "a-young": time.Minute, "a-older": 5 * time.Minute}
	units := func(clusterDefault time.Duration) ([]string, int, time.Time) {
		l := ledger.New(v1alpha1.SchedulerName)
		resolve := func(string, string) string { return "" }
		var candidates []fwk.PodInfo
		for _, name := range []string{"b-old", "b-young", "a-young", "a-older"} {
			pod := ledgertest.Pod(name, map[string]string{v1alpha1.QueueLabel: name[:1]}, "node", 1)
			pod.Status.StartTime = &metav1.Time{Time: now.Add(-started[name])}
			l.Observe(pod, resolve)
			info, err := framework.NewPodInfo(pod)
			require.NoError(t, err)
			candidates = append(candidates, info)
		}
		preemptor := ledgertest.Pod("preemptor", map[string]string{v1alpha1.QueueLabel: "waiting"}, "", 1)
		l.Observe(preemptor, resolve)
		r := &run{Reclaimer: &Reclaimer{ledger: l, settings: Settings{MinRuntime: clusterDefault}}}
		r.pod, r.leaf, r.belowShare = preemptor, tree.Get("waiting"), true
		r.state = Queues{Tree: tree}
		var names []string
		for _, u := range r.units(candidates) {
			assert.Equal(t, kindReclaim, u.kind)
			names = append(names, u.pods[0].Name)
		}
		count, first := r.protected.result()
		return names, count[spareYoung], first
	}

	names, count, first := units(0)
	assert.Equal(t, []string{"a-young", "a-older", "b-old"}, names, "b's job of a minute is spared; the youngest of the rest goes first")
	assert.Equal(t, 1, count)
	assert.WithinDuration(t, now.Add(9*time.Minute), first, time.Second, "b-young may be reclaimed once it has run 10 minutes")

	names, count, first = units(3 * time.Minute)
	assert.Equal(t, []string{"a-older", "b-old"}, names, "the plugin's 3 minutes spare a's job of a minute; b's own 10 minutes hold for b")
	assert.Equal(t, 2, count)
	assert.WithinDuration(t, now.Add(2*time.Minute), first, time.Second, "a-young comes of age first")
}

// A gang runs from its last member's start; a pod not started counts from its bind.
func TestAJobRunsFromItsLastMembersStart(t *testing.T) {
	now := time.Now()
	first := ledgertest.Pod("first", nil, "node", 1)
	first.Status.StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
	last := ledgertest.Pod("last", nil, "node", 1)
	last.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	assert.Equal(t, last.Status.StartTime.Time, runningSince([]*corev1.Pod{first, last}, now))

	bound := ledgertest.Pod("bound", nil, "node", 1)
	bound.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: now.Add(-time.Second)}}}
	assert.Equal(t, now.Add(-time.Second), runningSince([]*corev1.Pod{first, bound}, now))
	assert.Equal(t, now, runningSince([]*corev1.Pod{ledgertest.Pod("new", nil, "node", 1)}, now), "a pod with neither runs from now")
}

// Among nodes whose victims are as many and as important, reclaim chooses the node whose victims
// lose least: the youngest job. Without it the scheduler chooses among them at random.
func TestReclaimChoosesTheNodeWhoseVictimsRanLeast(t *testing.T) {
	now := time.Now()
	l := ledger.New(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "" }
	victims := map[string]*extenderv1.Victims{}
	for node, ran := range map[string]time.Duration{"old": time.Hour, "young": time.Minute, "older": 2 * time.Hour} {
		pod := ledgertest.Pod(node+"-pod", map[string]string{v1alpha1.QueueLabel: "a"}, node, 1)
		pod.Status.StartTime = &metav1.Time{Time: now.Add(-ran)}
		l.Observe(pod, resolve)
		victims[node] = &extenderv1.Victims{Pods: []*corev1.Pod{pod}}
	}
	r := &run{Reclaimer: &Reclaimer{ledger: l}}
	best := bestNode(r, victims)
	assert.Equal(t, "young", best)
}

// Reclaim chooses the node whose victims throw away the least work, their sizes times their
// runs, before the one with the fewest victims: eight 1-unit jobs that ran 30 minutes throw away
// 4 unit-hours, one 8-unit job that ran 4 hours 32.
func TestReclaimChoosesTheNodeWhoseVictimsThrowAwayLeastWork(t *testing.T) {
	now := time.Now()
	l := ledger.New(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "" }
	started := func(pod *corev1.Pod, ran time.Duration) *corev1.Pod {
		pod.Status.StartTime = &metav1.Time{Time: now.Add(-ran)}
		l.Observe(pod, resolve)
		return pod
	}
	queue := map[string]string{v1alpha1.QueueLabel: "a"}
	victims := map[string]*extenderv1.Victims{
		"one-old-big-job":  {Pods: []*corev1.Pod{started(ledgertest.Pod("big", queue, "one-old-big-job", 8), 4*time.Hour)}},
		"young-small-jobs": {},
	}
	for i := range 8 {
		pod := started(ledgertest.Pod(fmt.Sprintf("small-%d", i), queue, "young-small-jobs", 1), 30*time.Minute)
		victims["young-small-jobs"].Pods = append(victims["young-small-jobs"].Pods, pod)
	}
	r := &run{Reclaimer: &Reclaimer{ledger: l}, need: quota.Amounts{ledgertest.GPU: 8}}
	r.state.View.Total = quota.Amounts{ledgertest.GPU: 16}
	assert.Equal(t, "young-small-jobs", bestNode(r, victims))
}

// bestNode is the node the preemption evaluator picks by the run's OrderedScoreFuncs: the one
// that scores highest on the first function on which the nodes differ.
func bestNode(r *run, victims map[string]*extenderv1.Victims) string {
	funcs := r.OrderedScoreFuncs(context.Background(), victims)
	best := ""
	for node := range victims {
		if best == "" {
			best = node
			continue
		}
		for _, f := range funcs {
			if f(node) != f(best) {
				if f(node) > f(best) {
					best = node
				}
				break
			}
		}
	}
	return best
}

// Of an elastic job's pods, the one bound but not started yet goes first: it has run nothing,
// and evicting the one running would leave the job with no pod at work (the synthetic day's
// replay restarted an elastic job three times that way, past the limit of two).
func TestAnElasticPodNotStartedGoesBeforeOneRunning(t *testing.T) {
	now := time.Now()
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
	l := ledger.New(v1alpha1.SchedulerName)
	members := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{setup.PodGroupIndex: ledger.IndexByGroup})
	groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, groups.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}))
	resolve := func(string, string) string { return "a" }
	var candidates []fwk.PodInfo
	for _, name := range []string{"running", "bound"} {
		pod := ledgertest.Pod(name, map[string]string{v1alpha1.PodGroupLabel: "job"}, "node", 8)
		if name == "running" {
			pod.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
		}
		require.NoError(t, members.Add(pod))
		l.Observe(pod, resolve)
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		candidates = append(candidates, info)
	}
	preemptor := ledgertest.Pod("preemptor", map[string]string{v1alpha1.QueueLabel: "waiting"}, "", 8)
	l.Observe(preemptor, resolve)
	r := &run{Reclaimer: &Reclaimer{ledger: l, podGroups: schedulinglisters.NewPodGroupLister(groups), members: members}}
	r.pod, r.leaf, r.belowShare = preemptor, tree.Get("waiting"), true
	r.state = Queues{Tree: tree}
	var names []string
	for _, u := range r.units(candidates) {
		assert.True(t, u.elastic, "%s is above the job's minimum of 1", u.pods[0].Name)
		names = append(names, u.pods[0].Name)
	}
	assert.Equal(t, []string{"bound", "running"}, names)
}
