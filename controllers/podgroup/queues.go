package podgroup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// queueHoldMayChange passes the Queue events that may change a group's groupstatus.Hold: a queue
// created or deleted, its spec changed, or the allocation of a queue with a capability
// (groupstatus.HoldOf reads nothing else of a Queue's status). Status updates of queues without
// a capability, which come with every pod placed, would otherwise bring every waiting group back
// each time.
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
