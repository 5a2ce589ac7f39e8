package queue

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// The scheduling queue may hear of a victim's deletion before the ledger's own handler of the pod
// informer does (two handlers of one informer, in no set order). The preemptor it brings back
// must meet its queue without the victim: charged for it still, the queue refused the preemptor
// over its share, and no event was left to bring it back before the periodic flush (issue #38). A
// late update of the victim from the ledger's handler must not charge it again, and a pod the
// scheduler assumed and forgot (the same event) stays counted.
func TestADeletedPodLeavesItsQueueWhenTheSchedulingQueueHearsOfIt(t *testing.T) {
	l := ledger.New(v1alpha1.SchedulerName)
	q := &Queue{ledger: l}
	resolve := func(string, string) string { return "" }
	victim := ledgertest.Pod("victim", nil, "n1", 2)
	l.Observe(victim, resolve)
	require.Equal(t, int64(2), l.View().Allocated[v1alpha1.DefaultQueue][gpu], "the bound victim is charged")

	preemptor := ledgertest.Pod("preemptor", nil, "", 2)
	hint, err := q.isSchedulableAfterAssignedPodDeleted(klog.Background(), preemptor, victim, nil)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, hint)
	assert.Zero(t, l.View().Allocated[v1alpha1.DefaultQueue][gpu], "the queue gives the victim's share back before the preemptor is tried again")

	late := victim.DeepCopy()
	late.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	l.Observe(late, resolve)
	assert.Zero(t, l.View().Allocated[v1alpha1.DefaultQueue][gpu], "the ledger's handler, behind, does not charge the deleted victim again")
	assert.Zero(t, l.View().Terminating[v1alpha1.DefaultQueue][gpu])
	l.Forget(victim.UID, victim)
	l.Observe(victim, resolve) // a pod of the same UID, seen again after the handler's deletion
	assert.Equal(t, int64(2), l.View().Allocated[v1alpha1.DefaultQueue][gpu], "the handler's deletion ends the record")
	l.Forget(victim.UID, victim)

	// kube-scheduler sends the same event for a pod whose binding failed, which it forgets: that
	// pod lives on, pending, and its queue keeps counting it.
	pending := ledgertest.Pod("pending", nil, "", 2)
	l.Observe(pending, resolve)
	assumed := pending.DeepCopy()
	assumed.Spec.NodeName = "n2"
	l.Assume(assumed, v1alpha1.DefaultQueue, "")
	_, err = q.isSchedulableAfterAssignedPodDeleted(klog.Background(), preemptor, assumed, nil)
	require.NoError(t, err)
	_, known := l.Entry(pending.UID)
	assert.True(t, known, "a forgotten assumed pod is no deletion")
	assert.Equal(t, int64(2), l.View().Allocated[v1alpha1.DefaultQueue][gpu], "and its queue counts it")
}

// kube-scheduler and TephraQueue watch PodGroups through informers of their own, heard in no set
// order: a pending pod kube-scheduler requeued on its event for a group moved to another queue met
// the ledger's old view (the group's pods in the old queue), and was refused with no event left.
// TephraQueue's own update brings the group's pending pods back, the ledger moved first; an update
// of the status alone brings nobody back (issue #38).
func TestAPodGroupMovedToAnotherQueueBringsItsPendingPodsBack(t *testing.T) {
	s := newScheduler(t)
	h, a := s.profile(t, v1alpha1.SchedulerName)
	recorder := activations{profileHandle: h, mu: &sync.Mutex{}, pods: map[string]*corev1.Pod{}}
	q := &Queue{handle: recorder, ledger: a.ledger, accounts: a}
	q.queueRunning.Store(true)
	groups := s.tephra.Scheduling().V1alpha1().PodGroups().Informer().GetIndexer()
	pods := s.informers.Core().V1().Pods().Informer().GetIndexer()
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Generation: 1}, Spec: v1alpha1.PodGroupSpec{Queue: "team-a", MinMember: 1}}
	require.NoError(t, groups.Add(pg))
	pod := ledgertest.Pod("w0", map[string]string{v1alpha1.PodGroupLabel: "train"}, "", 1)
	require.NoError(t, pods.Add(pod))
	a.feed.ObservePod(pod)
	require.Equal(t, quota.Amounts{gpu: 1}, a.ledger.View().Pending["team-a"])

	moved := pg.DeepCopy()
	moved.Spec.Queue, moved.Generation = "team-b", 2
	require.NoError(t, groups.Update(moved))
	q.podGroupChanged(pg, moved)
	assert.Equal(t, []string{"ns/w0"}, recorder.activated(), "the group's pending pod comes back")
	v := a.ledger.View()
	assert.Empty(t, v.Pending["team-a"], "and meets its new queue")
	assert.Equal(t, quota.Amounts{gpu: 1}, v.Pending["team-b"])

	clear(recorder.pods)
	status := moved.DeepCopy()
	status.Status.Phase = v1alpha1.PodGroupPending
	q.podGroupChanged(moved, status)
	assert.Empty(t, recorder.activated(), "a status update brings nobody back")
}
