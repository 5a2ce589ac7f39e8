package queue

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Reserve records the pod in its queue's ledger, before the next cycle can look.
func (q *Queue) Reserve(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	if !q.ledger.Counts(pod) {
		return nil
	}
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil
	}
	q.ledger.Assume(pod, w.Queue, w.Group)
	q.refusals.Forget(pod.UID)
	q.shareWaiters.forget(pod.UID)
	q.holds.forget(pod.UID)
	return nil
}

// Unreserve gives the pod's share back.
func (q *Queue) Unreserve(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	q.ledger.Unassume(pod.UID)
}
