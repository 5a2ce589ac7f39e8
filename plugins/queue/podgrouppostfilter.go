package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// PodGroupPostFilter preempts for an upstream PodGroup that its pod-group cycle could not place.
func (q *Queue) PodGroupPostFilter(ctx context.Context, cs fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	result, status := q.podGroupPostFilter(ctx, cs, pgInfo, schedule)
	if !status.IsSuccess() {
		for _, m := range pgInfo.GetUnscheduledPods() {
			if !v1alpha1.IsSystemPod(m) && q.ledger.Counts(m) {
				q.shareWaiters.add(q.queueNameOf(m), m)
			}
		}
	}
	return result, status
}

func (q *Queue) podGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	members := pgInfo.GetUnscheduledPods()
	if len(members) == 0 || pgInfo.GetPodGroup() == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: no pod of the group to make room for")
	}
	pod := members[0]
	if v1alpha1.IsSystemPod(pod) || !q.ledger.Counts(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the group counts in no queue")
	}
	for _, m := range members {
		if m.Spec.PreemptionPolicy != nil && *m.Spec.PreemptionPolicy == corev1.PreemptNever {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: pod %s of the group has preemptionPolicy Never", m.Name))
		}
	}
	w, st, leaf, status := q.preemptorQueue(pod)
	if status != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: "+status.Message())
	}
	return q.reclaimer.PreemptGroup(ctx, pgInfo, schedule, reclaim.Preemptor{Pod: pod, Workload: w, Leaf: leaf, Queues: st.queues()}, members)
}
