package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// PreFilter admits the pod into its queue's capacity, or rejects it with the queue's reason.
// For a gang member, the whole minimum still to be placed must fit, so a gang never takes
// quota unless its minimum can.
func (q *Queue) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	result, status := q.preFilter(ctx, cs, pod, nodes)
	return result, q.refusals.Steady(pod, refusal.PreFilter, status)
}

func (q *Queue) preFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !q.ledger.Counts(pod) {
		return nil, nil // a system pod: no queue holds it
	}
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil, status
	}
	if !q.synced() {
		return nil, q.rejectWhileLoading(ctx, pod)
	}
	if _, known := q.ledger.Entry(pod.UID); !known {
		// The scheduler's queue can hand out a pod before the ledger's handler has seen it; its
		// own demand must count, or its queue would seem to deserve nothing.
		q.accounts.feed.ObservePod(pod)
	}
	s := q.snapshotFor(pod)
	leaf, why := s.tree.WorkloadQueue(w.Queue)
	if why != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %s", v1alpha1.ReasonQueueUnavailable, why))
	}
	// Checked again here: the queue's selector may have been set since the pod's PreEnqueue.
	if msg := q.tenancyVerdict(pod, leaf); msg != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	need := q.needOf(pod, w)
	s = s.withDemandFor(leaf.Name, need)
	var freed map[string]quota.Amounts
	if f := reclaim.Freed(ctx); f != nil {
		freed = f // PodGroupPostFilter places the pod's group without its victims
	}
	v := s.decide(leaf, need, freed, false)
	if v.msg == "" {
		return nil, nil
	}
	admission.MarkRefused(cs, v.msg)
	if freed == nil {
		// The pod's own cycle, not PodGroupPostFilter's dry run of its group.
		stateRefusals.WithLabelValues(leaf.Name, v.reason).Inc()
		q.recordHold(pod, v, s)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, v.msg)
}

// needOf is what admitting the pod takes from its queue: its own requests, or for a gang whose
// minimum is not placed yet, what the rest of the minimum needs (minResources less what is
// placed, or the pod's requests times the members still missing, its directly named claims
// once, as the members may share them).
func (q *Queue) needOf(pod *corev1.Pod, w workload) quota.Amounts {
	c := q.ledger.ChargeOf(pod)
	need := c.Requests
	if len(c.Claims) > 0 {
		// A claim the queue counts placed already (another of its pods uses it) takes nothing.
		need = need.Clone()
		placed := q.ledger.PlacedClaimsIn(w.Queue, pod.Namespace, c.Claims)
		need.Sub(placed)
		c.Direct = c.Direct.Clone()
		c.Direct.Sub(placed)
	}
	if w.PodGroup == nil {
		return need
	}
	placed, count := q.ledger.GroupPlacement(w.Group)
	missing := int64(w.PodGroup.Spec.MinMember) - int64(count)
	if missing <= 0 {
		return need
	}
	rest := quota.Amounts{}
	if len(w.PodGroup.Spec.MinResources) > 0 {
		rest = quota.FromList(w.PodGroup.Spec.MinResources)
		rest.Sub(placed)
	} else {
		for name, v := range need {
			rest[name] = (v-c.Direct[name])*missing + c.Direct[name]
		}
	}
	return maxOf(need, rest)
}

func maxOf(a, b quota.Amounts) quota.Amounts {
	out := a.Clone()
	for name, v := range b {
		out[name] = max(out[name], v)
	}
	return out
}

// PreFilterExtensions are not needed: the plugin filters no nodes.
func (q *Queue) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
