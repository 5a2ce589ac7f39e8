package queue

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// EventsToRegister says which cluster events may let a pod this plugin rejected go on.
func (q *Queue) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A queue created, opened, or given more capability or weight.
		{Event: fwk.ClusterEvent{Resource: queueEvent, ActionType: fwk.All}},
		// A pod bound into the queue a held pod yields to may be the workload it waits for.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}, QueueingHintFn: q.isSchedulableAfterPodBound},
		// A pod that stops gives its queue's share back.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: q.isSchedulableAfterAssignedPodDeleted},
		// A pending pod deleted lowers its queue's demand, and so raises other queues' shares.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}},
		// A node added raises root's capacity.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
		// A PodGroup's queue is read when it is created.
		{Event: fwk.ClusterEvent{Resource: podGroupEvent, ActionType: fwk.Add | fwk.Update}},
		// A namespace relabelled may match a queue's namespaceSelector now.
		{Event: fwk.ClusterEvent{Resource: namespaceEvent, ActionType: fwk.Update}, QueueingHintFn: isSchedulableAfterNamespaceChange},
	}, nil
}

// isSchedulableAfterAssignedPodDeleted queues every pod TephraQueue refused when a placed pod
// goes, as the share it held may be what the pod waits for. It first takes the deleted pod out of
// the ledger: the scheduling queue and the ledger's own handler hear of the deletion in no set
// order, and a pod brought back before the ledger's handler ran met its queue still charged for
// the victim it had waited on, was refused again, and waited for the periodic flush.
func (q *Queue) isSchedulableAfterAssignedPodDeleted(_ klog.Logger, _ *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if tombstone, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = tombstone.Obj
	}
	// The scheduling queue asks once per pod TephraQueue refused, with the same deleted pod: only
	// the first asks the ledger.
	if deleted, ok := oldObj.(*corev1.Pod); ok {
		if last := q.lastGone.Load(); last == nil || *last != deleted.UID {
			q.lastGone.Store(&deleted.UID)
			q.ledger.GoneBeforeHandler(deleted)
		}
	}
	return fwk.Queue, nil
}

// queueAdded brings back the pending pods of a queue this plugin's informer now shows. The
// scheduler learns of a new Queue from an informer of its own, which may be ahead of this one: a
// pod it requeued on that event may have been refused again by PreEnqueue (QueueUnavailable),
// with no event left to bring it back (as TephraGang's podGroupAdded for PodGroups).
func (q *Queue) queueAdded(obj any) {
	queue, ok := obj.(*v1alpha1.Queue)
	if !ok || !q.queueRunning.Load() {
		return
	}
	// The tree's own handler on this informer may not have run yet (each handler has its own
	// goroutine): a pod activated now must not meet the tree without the queue, be refused again
	// (QueueUnavailable: queue does not exist) and wait for the 5-minute flush. Found when pods
	// came while the Queue informer still backed off from CRDs installed after the scheduler
	// started: scheduler_perf's SchedulingBasic under Tephra's profile in CI.
	q.accounts.shares.invalidateTree()
	q.activatePending(map[string]bool{queue.Name: true})
}

// podGroupChanged brings back the pending pods of a PodGroup whose queue, minimum or minimum
// resources changed. kube-scheduler requeues them on its own informer's event, in no set order
// with this one: a pod tried first met the ledger's old view of its group (the old queue, a
// minimum that no longer holds) and was refused with no event left to bring it back. The ledger
// follows the change first (its own handler may not have run yet).
func (q *Queue) podGroupChanged(oldObj, newObj any) {
	pg, ok := newObj.(*v1alpha1.PodGroup)
	if !ok || !q.accounts.feed.GroupUpdated(oldObj, newObj) || !q.queueRunning.Load() {
		return
	}
	objs, err := q.accounts.pods.ByIndex(setup.PodGroupIndex, pg.Namespace+"/"+pg.Name)
	if err != nil {
		return
	}
	pending := map[string]*corev1.Pod{}
	for _, obj := range objs {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Spec.SchedulerName == q.handle.ProfileName() {
			pending[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	if len(pending) > 0 {
		q.handle.Activate(klog.Background(), pending)
	}
}

// queueUpdated brings back the pending pods a Queue change may let run: see queueReopened and
// queueShareRose.
func (q *Queue) queueUpdated(oldObj, newObj any) {
	q.queueReopened(oldObj, newObj)
	q.queueShareRose(oldObj, newObj)
}

// queueShareRose brings back the pods PostFilter turned away in a queue whose deserved share, as
// the Queue controller reports it, rose, and in every queue below it. With usage history, shares move with
// time alone, without the pod and node events that bring pods back otherwise: a pod that found
// no room, and no victim while its queue was at its share, was turned away by a Filter plugin
// such as NodeResourcesFit, whose events are only those of pods and nodes (a PostFilter that
// finds no victim does not count among the plugins a pod waits for), so it would wait until the
// scheduler's periodic flush of the unschedulable pods. The controller computes the scheduler's
// shares from the same status, so its Deserved rising is when this scheduler's did.
func (q *Queue) queueShareRose(oldObj, newObj any) {
	old, ok := oldObj.(*v1alpha1.Queue)
	queue, ok2 := newObj.(*v1alpha1.Queue)
	if !ok || !ok2 || !q.queueRunning.Load() || !deservedRose(old.Status.Deserved, queue.Status.Deserved) {
		return
	}
	// As in queueAdded: the pods must meet the shares that rose, not the tree from before.
	q.accounts.shares.invalidateTree()
	waiting := q.shareWaiters.take(subtreeNames(q.currentTree().Get(queue.Name)), q.handle.SharedInformerFactory().Core().V1().Pods().Lister())
	if len(waiting) > 0 {
		q.handle.Activate(klog.Background(), waiting)
	}
}

// subtreeNames names the queue and every queue below it (none for nil).
func subtreeNames(n *quota.Node) map[string]bool {
	names := map[string]bool{}
	var walk func(*quota.Node)
	walk = func(n *quota.Node) {
		names[n.Name] = true
		for _, c := range n.Children {
			walk(c)
		}
	}
	if n != nil {
		walk(n)
	}
	return names
}

// deservedRose says whether after is more than before in some resource.
func deservedRose(before, after corev1.ResourceList) bool {
	for name, v := range after {
		if old, ok := before[name]; !ok || v.Cmp(old) > 0 {
			return true
		}
	}
	return false
}

// queueReopened does what queueAdded does for a queue opened or moved, and every queue below it: closing
// and opening a parent closes and opens its whole subtree (quota.Node.ClosedBy).
func (q *Queue) queueReopened(oldObj, newObj any) {
	old, ok := oldObj.(*v1alpha1.Queue)
	queue, ok2 := newObj.(*v1alpha1.Queue)
	if !ok || !ok2 || !q.queueRunning.Load() || old.Spec.State == queue.Spec.State && old.Spec.Parent == queue.Spec.Parent {
		return
	}
	// The tree as this informer shows it now: the shared cache may not have heard of the change.
	all, err := q.queues.List(labels.Everything())
	if err != nil {
		return
	}
	below := subtreeNames(quota.NewTree(all).Get(queue.Name))
	q.accounts.shares.invalidateTree() // as in queueAdded: the pods must meet the queue opened
	q.activatePending(below)
}

// activatePending moves the pending pods of the named queues back to the active queue.
func (q *Queue) activatePending(queues map[string]bool) {
	objs, err := q.handle.SharedInformerFactory().Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		return
	}
	pending := map[string]*corev1.Pod{}
	for _, pod := range objs {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != q.handle.ProfileName() || !q.ledger.Counts(pod) {
			continue
		}
		if w, status := q.workloadOf(pod); status == nil && queues[w.Queue] {
			pending[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	if len(pending) > 0 {
		q.handle.Activate(klog.Background(), pending)
	}
}
