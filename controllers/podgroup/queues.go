package podgroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// queueHold is why a group's queue does not admit its minimum now; empty when it does.
type queueHold struct{ reason, message string }

// queueHoldOf checks the group's minimum against its queue as the Queue controller reports it:
// the queue must be a usable leaf, and minResources must fit under the capability of the queue
// and its ancestors beside what they have allocated. The scheduler applies the same rules when
// it places the pods; this is what users see on the group meanwhile.
//
// nsLabels are the labels of the group's namespace, which the namespaceSelector of its queue and
// their ancestors must match.
func queueHoldOf(group *schedulingv1alpha1.PodGroup, queues []*schedulingv1alpha1.Queue, nsLabels map[string]string) queueHold {
	name := group.Spec.Queue
	if name == "" {
		name = schedulingv1alpha1.DefaultQueue
	}
	tree := quota.NewTree(queues)
	leaf, why := tree.WorkloadQueue(name)
	if why != "" {
		return queueHold{schedulingv1alpha1.ReasonQueueUnavailable, fmt.Sprintf("%s: %s; the group waits", schedulingv1alpha1.ReasonQueueUnavailable, why)}
	}
	if why := leaf.AdmitsNamespace(group.Namespace, nsLabels); why != "" {
		return queueHold{schedulingv1alpha1.ReasonQueueForbidden, fmt.Sprintf("%s: %s; the group waits", schedulingv1alpha1.ReasonQueueForbidden, why)}
	}
	need := quota.FromList(group.Spec.MinResources)
	allocated := map[string]quota.Amounts{}
	for _, q := range queues {
		allocated[q.Name] = quota.FromList(q.Status.Allocated)
	}
	for _, n := range leaf.Ancestry() {
		if over := need.Exceeding(n.Capability); over != "" {
			return queueHold{schedulingv1alpha1.ReasonNeverFits, fmt.Sprintf("%s: the group's minResources exceed the capability of queue %q (%s); it can never run there", schedulingv1alpha1.ReasonNeverFits, n.Name, over)}
		}
		used := allocated[n.Name].Clone()
		for r, v := range need {
			if _, limited := n.Capability[r]; limited {
				used[r] += v
			}
		}
		if over := used.Exceeding(n.Capability); over != "" {
			return queueHold{schedulingv1alpha1.ReasonQueueCapability, fmt.Sprintf("%s: the group's minimum waits for room under the capability of queue %q (%s)", schedulingv1alpha1.ReasonQueueCapability, n.Name, over)}
		}
	}
	return queueHold{}
}

// queueHoldMayChange passes the Queue events that may change a group's queueHold: a queue created
// or deleted, its spec changed, or the allocation of a queue with a capability (queueHoldOf reads
// nothing else of a Queue's status). Status updates of queues without a capability, which come
// with every pod placed, would otherwise bring every waiting group back each time.
var queueHoldMayChange = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok := e.ObjectOld.(*schedulingv1alpha1.Queue)
		q, ok2 := e.ObjectNew.(*schedulingv1alpha1.Queue)
		if !ok || !ok2 {
			return true
		}
		return old.Generation != q.Generation || len(q.Spec.Capability) > 0
	},
}

// requestsForQueue maps a Queue to the groups that are not running yet: a queue created, opened
// or grown may admit them.
func (r *Reconciler) requestsForQueue(ctx context.Context, _ client.Object) []reconcile.Request {
	var groups schedulingv1alpha1.PodGroupList
	// Only read: Queues' status changes with every pod placed, and a deep copy of every PodGroup
	// each time cost 8% of a make bench-upstream run's CPU.
	if err := r.List(ctx, &groups, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, g := range groups.Items {
		if g.Status.Phase == "" || g.Status.Phase == schedulingv1alpha1.PodGroupPending || g.Status.Phase == schedulingv1alpha1.PodGroupInqueue {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
		}
	}
	return out
}

// requestsForNamespace maps a Namespace to its groups that are not running yet: relabelled, it
// may match a queue's namespaceSelector now, or no longer.
func (r *Reconciler) requestsForNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	var groups schedulingv1alpha1.PodGroupList
	if err := r.List(ctx, &groups, client.InNamespace(ns.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, g := range groups.Items {
		if g.Status.Phase == "" || g.Status.Phase == schedulingv1alpha1.PodGroupPending || g.Status.Phase == schedulingv1alpha1.PodGroupInqueue {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
		}
	}
	return out
}

// NamespaceLabels returns the labels of a namespace from the cache (nil if it is gone).
func NamespaceLabels(ctx context.Context, c client.Reader, name string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns.Labels, nil
}

// QueueHold says why the queue of group does not admit its minimum (minResources) now, as the
// PodGroup controller decides it for a group whose members exist: reason and message are empty
// when it does. The Volcano adapter (controllers/foreign) uses it to move a Volcano PodGroup
// without pods to Inqueue, as Volcano's enqueue action does.
func QueueHold(group *schedulingv1alpha1.PodGroup, queues []*schedulingv1alpha1.Queue, nsLabels map[string]string) (reason, message string) {
	hold := queueHoldOf(group, queues, nsLabels)
	return hold.reason, hold.message
}

// StatusOf is the status a group's members call for, as Reconcile decides it for a group that no
// Tephra Job owns, held by its queue as queueHoldOf decides with queues and nsLabels (the labels
// of its namespace). The upstream PodGroup adapter (controllers/upstream) reads it for groups that
// exist in memory only, whose status nobody writes: their members are all there is to read.
func StatusOf(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod, queues []*schedulingv1alpha1.Queue, nsLabels map[string]string) schedulingv1alpha1.PodGroupStatus {
	return desiredStatus(group, pods, queueHoldOf(group, queues, nsLabels), "")
}

// PhaseOf is the phase a group's members make it, as Reconcile decides it for a group that no
// Tephra Job owns and whose queue admits it (a group its queue holds is Pending there, Inqueue
// here): for those who count groups by phase from their pods (the Queue controller, kubectl
// tephra) and do not decide whether their queues admit them.
func PhaseOf(group *schedulingv1alpha1.PodGroup, pods []*corev1.Pod) schedulingv1alpha1.PodGroupPhase {
	var c memberCounts
	for _, pod := range pods {
		c.add(pod)
	}
	minimums := subGroupMinimums{run: true, exist: true}
	if len(group.Spec.SubGroups) > 0 {
		values := make([]corev1.Pod, len(pods))
		for i, pod := range pods {
			values[i] = *pod
		}
		minimums = subGroupMinimumsOf(group, subGroupStatuses(group, values))
	}
	return phaseOf(c, minMemberOf(group), minimums, meta.IsStatusConditionTrue(group.Status.Conditions, schedulingv1alpha1.PodGroupScheduled))
}

// MemberStatus is StatusOf for a group whose queue admits it: the status its members make it, for
// those who show a group that no one writes the status of (kubectl tephra, for upstream
// PodGroups) and do not decide whether its queue admits it.
func MemberStatus(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod) schedulingv1alpha1.PodGroupStatus {
	return desiredStatus(group, pods, queueHold{}, "")
}
