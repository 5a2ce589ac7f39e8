package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// PreEnqueue holds back pods whose queue cannot take them at all: a queue that is missing, not a
// leaf, or closed, or a gang whose minimum is larger than its queue's capability; and, until
// their queue's state changes, the pods PreFilter refused by it (holds.go).
func (q *Queue) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	if !q.queueRunning.Load() {
		q.queueRunning.Store(true)
	}
	if !q.ledger.Counts(pod) {
		return nil // a system pod: no queue holds it
	}
	if q.reclaimer.Preempting(pod.UID) {
		// Its victims are being evicted after its cycle: it comes back when the last one goes.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: waiting for the victims of the pod's preemption to be evicted")
	}
	if q.victims.Holding(pod.UID) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: waiting for the victims of the preemption to be gone")
	}
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil // TephraGang decides about pods whose group is missing
	}
	tree := q.currentTree()
	leaf, why := tree.WorkloadQueue(w.Queue)
	if why != "" {
		msg := fmt.Sprintf("%s: %s; the pod waits", v1alpha1.ReasonQueueUnavailable, why)
		q.podEvent(pod, v1alpha1.ReasonQueueUnavailable, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if msg := q.tenancyVerdict(pod, leaf); msg != "" {
		q.podEvent(pod, v1alpha1.ReasonQueueForbidden, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	c := q.ledger.ChargeOf(pod)
	if msg := q.devicesVerdict(pod, leaf, c); msg != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	need := c.Requests
	if w.PodGroup != nil && len(w.PodGroup.Spec.MinResources) > 0 {
		need = maxOf(need, quota.FromList(w.PodGroup.Spec.MinResources))
	}
	for _, n := range leaf.Ancestry() {
		if over := need.Exceeding(n.Capability); over != "" {
			msg := fmt.Sprintf("%s: the workload needs more than the capability of queue %q (%s); it can never run there", v1alpha1.ReasonNeverFits, n.Name, over)
			q.podEvent(pod, v1alpha1.ReasonNeverFits, msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
	}
	if msg := q.stillHeld(pod, w); msg != "" {
		return fwk.NewStatus(fwk.Unschedulable, msg)
	}
	return nil
}
