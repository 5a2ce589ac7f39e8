package queue

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/datawait"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// PostFilter reclaims or preempts for a pod that fits no node. A system pod, which counts in no
// queue, preempts as under upstream's DefaultPreemption: lower-priority pods of any queue. A pod
// that TephraIO keeps waiting for a node that caches its data waits by choice: nothing is evicted
// for it, and its queue is not waiting for room (datawait).
func (q *Queue) PostFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if datawait.Marked(cs) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	result, status := q.postFilter(ctx, cs, pod, m)
	if !status.IsSuccess() && !v1alpha1.IsSystemPod(pod) && q.ledger.Counts(pod) {
		q.shareWaiters.add(q.queueNameOf(pod), pod)
		if result == nil {
			result = q.releaseNomination(cs, pod)
		}
	}
	return result, q.refusals.Steady(pod, refusal.PostFilter, status)
}

func (q *Queue) postFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if v1alpha1.IsSystemPod(pod) {
		return q.systemPreemption.PostFilter(ctx, cs, pod, m)
	}
	// Unschedulable rather than UnschedulableAndUnresolvable when evicting cannot help, so that
	// TephraGang's PostFilter still runs after this one.
	// A PreFilter rejection (the status every node gets, naming its plugin) that no eviction can
	// change: a group backing off, an elastic pod waiting for a minimum. Without a PreFilter
	// rejection, the status of nodes not evaluated is UnschedulableAndUnresolvable by default,
	// and says nothing.
	if s := m.Get(""); s != nil && s.Plugin() != "" && (s.Code() == fwk.UnschedulableAndUnresolvable || strings.HasPrefix(s.Message(), v1alpha1.ReasonElasticWaiting)) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	w, st, leaf, status := q.preemptorQueue(pod)
	if status != nil {
		return nil, status
	}
	return q.reclaimer.Preempt(ctx, cs, reclaim.Preemptor{Pod: pod, Workload: w, Leaf: leaf, Queues: st.queues()}, m)
}

// preemptorQueue resolves the workload of a pod that preempts, the state it decides on, and its
// leaf queue, or says why it cannot preempt.
func (q *Queue) preemptorQueue(pod *corev1.Pod) (workload, state, *quota.Node, *fwk.Status) {
	w, status := q.workloadOf(pod)
	if status != nil {
		return w, state{}, nil, fwk.NewStatus(fwk.Unschedulable, status.Message())
	}
	st := q.snapshotFor(pod)
	leaf, why := st.tree.WorkloadQueue(w.Queue)
	if why != "" {
		return w, st, nil, fwk.NewStatus(fwk.Unschedulable, why)
	}
	return w, st, leaf, nil
}
