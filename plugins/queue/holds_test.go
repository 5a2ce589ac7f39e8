package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
)

// A pod its queue's share turns away is held while the share stands, without being decided in
// full again, and let go as soon as what it yields to no longer waits.
func TestAHoldStandsUntilTheWorkloadItYieldsToNoLongerWaits(t *testing.T) {
	s := newScheduler(t)
	h, a := s.profile(t, v1alpha1.SchedulerName)
	queues := s.tephra.Scheduling().V1alpha1().Queues().Informer().GetIndexer()
	for _, name := range []string{"team-a", "team-b"} {
		require.NoError(t, queues.Add(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	}
	a.shares.invalidateTree()
	q := &Queue{handle: h, ledger: a.ledger, accounts: a, podGroups: a.podGroups}
	l := a.ledger
	l.SetNode("n1", corev1.ResourceList{gpu: resource.MustParse("4")})
	resolve := func(string, string) string { return "" }
	in := func(queue string) map[string]string { return map[string]string{v1alpha1.QueueLabel: queue} }

	l.Observe(ledgertest.Pod("a-0", in("team-a"), "n1", 2), resolve)
	waiting := ledgertest.Pod("b-0", in("team-b"), "", 2)
	l.Observe(waiting, resolve)
	pod := ledgertest.Pod("a-1", in("team-a"), "", 1)
	l.Observe(pod, resolve)

	w, status := q.workloadOf(pod)
	require.Nil(t, status)
	st := q.snapshotFor(pod)
	st.placeable = nil
	v := st.decide(st.tree.Get("team-a"), q.needOf(pod, w), nil, false)
	require.Equal(t, v1alpha1.ReasonQueueOverShare, v.reason, v.msg)
	assert.Contains(t, v.msg, `it yields to pod ns/b-0 of queue "team-b"`)
	q.recordHold(pod, v, st)
	assert.Equal(t, v.msg, q.stillHeld(pod, w), "nothing changed: the hold stands as it was")

	// Another pod of its queue arrives: the ledger changed, the hold is checked again and stands.
	l.Observe(ledgertest.Pod("a-2", in("team-a"), "", 1), resolve)
	assert.Contains(t, q.stillHeld(pod, w), `it yields to pod ns/b-0 of queue "team-b"`)

	// Binds bring the held pod back only when they are into the queue it yields to.
	hint, err := q.isSchedulableAfterPodBound(klog.Background(), pod, nil, ledgertest.Pod("a-0", in("team-a"), "n1", 2))
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, hint, "its own queue's bind lifts no hold")
	hint, err = q.isSchedulableAfterPodBound(klog.Background(), pod, nil, waiting)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, hint, "team-b's may be the workload it yields to")

	// The workload it yields to is deleted: the hold no longer stands, and PreFilter decides.
	l.Forget(waiting.UID, waiting)
	assert.Empty(t, q.stillHeld(pod, w))
	_, held := q.holds.get(pod.UID)
	assert.False(t, held, "the hold is gone")
	hint, err = q.isSchedulableAfterPodBound(klog.Background(), pod, nil, waiting)
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, hint, "a pod without a hold waits for no bind")
}

// A capability hold stands while the queue's usage does, and goes when a pod of the queue ends.
func TestACapabilityHoldGoesWhenTheQueueHasRoom(t *testing.T) {
	s := newScheduler(t)
	h, a := s.profile(t, v1alpha1.SchedulerName)
	capped := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "capped"}, Spec: v1alpha1.QueueSpec{Capability: corev1.ResourceList{gpu: resource.MustParse("2")}}}
	require.NoError(t, s.tephra.Scheduling().V1alpha1().Queues().Informer().GetIndexer().Add(capped))
	a.shares.invalidateTree()
	q := &Queue{handle: h, ledger: a.ledger, accounts: a, podGroups: a.podGroups}
	l := a.ledger
	l.SetNode("n1", corev1.ResourceList{gpu: resource.MustParse("8")})
	resolve := func(string, string) string { return "" }
	running := ledgertest.Pod("r", map[string]string{v1alpha1.QueueLabel: "capped"}, "n1", 2)
	l.Observe(running, resolve)
	pod := ledgertest.Pod("p", map[string]string{v1alpha1.QueueLabel: "capped"}, "", 1)
	l.Observe(pod, resolve)

	w, status := q.workloadOf(pod)
	require.Nil(t, status)
	st := q.snapshotFor(pod)
	v := st.decide(st.tree.Get("capped"), q.needOf(pod, w), nil, false)
	require.Equal(t, v1alpha1.ReasonQueueCapability, v.reason, v.msg)
	q.recordHold(pod, v, st)

	l.Observe(ledgertest.Pod("other", nil, "", 1), resolve)
	assert.Contains(t, q.stillHeld(pod, w), "would exceed its capability", "another queue's pod changes nothing for it")
	l.Forget(running.UID, running)
	assert.Empty(t, q.stillHeld(pod, w), "its queue's pod ended: there is room")
}

// A pod a preemption nominated to the room its victims freed, refused in a later cycle by its
// queue's share and held, gives the room up: the scheduler keeps a nominated pod's room from every
// pod of no higher priority, and a held pod would keep it from everyone, the queue it yields to
// included, for as long as it waits.
func TestAHeldPodGivesUpItsNomination(t *testing.T) {
	l := ledger.New(v1alpha1.SchedulerName)
	q := &Queue{ledger: l}
	pod := ledgertest.Pod("p", nil, "", 1)
	l.Observe(pod, func(string, string) string { return "" })
	l.Nominate(pod.UID, "n1", time.Now())

	cs := framework.NewCycleState()
	assert.Nil(t, q.releaseNomination(cs, pod), "not refused by its queue in this cycle: it keeps the room")
	admission.MarkRefused(cs, "QueueOverDeservedShare: …")
	assert.Nil(t, q.releaseNomination(cs, pod), "refused but not held (a preemption's dry run): it keeps the room")

	q.holds.record(pod.UID, hold{verdict: verdict{reason: v1alpha1.ReasonQueueOverShare}})
	result := q.releaseNomination(cs, pod)
	require.NotNil(t, result)
	assert.Equal(t, fwk.ModeOverride, result.Mode())
	assert.Empty(t, result.NominatedNodeName, "the nomination is cleared")
	e, _ := l.Entry(pod.UID)
	assert.False(t, e.Nominated, "and its room no longer counts as on its way to it")
}
