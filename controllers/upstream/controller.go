// Package upstream adapts upstream Kubernetes' gang API (scheduling.k8s.io/v1beta1 PodGroup, and
// its Workload for the queue label) to Tephra. Both binaries read an upstream PodGroup in memory as
// the Tephra PodGroup it translates into (v1alpha1.FromUpstream, read through internal/groups): no
// Tephra object is written for it. What this adapter writes is the one status upstream defines,
// the condition PodGroupInitiallyScheduled on the upstream PodGroup, from the group's members as
// the PodGroup controller reads a Tephra PodGroup's (groupstatus.Of): True once the gang's
// minimum has run (terminal, as upstream says), False with reason Unschedulable and Tephra's
// message while it cannot be placed (only if no one set the condition before). It never turns a
// True condition back, so it agrees with upstream's scheduler if that also writes it.
//
// An upstream PodGroup that cannot be translated gets a Warning event; so does one whose name a
// Tephra PodGroup of the user's has, which wins. A Tephra PodGroup left from a version of Tephra
// that mirrored upstream PodGroups into objects (labelled MirrorLabel and controlled by the
// upstream PodGroup) is deleted.
//
// CompositePodGroups (composite.go) are still mirrored into a Tephra PodGroup object.
package upstream

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
	"github.com/tephra-dev/tephra/controllers/podgroup"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/groupstatus"
)

// ControllerName names the adapter, in logs and as the reporting controller of its events.
const ControllerName = "tephra-upstream-podgroup"

// GroupVersion is the upstream API the adapter reads.
var GroupVersion = groups.UpstreamGroupVersion

// Reconciler writes the condition PodGroupInitiallyScheduled of upstream PodGroups.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Workloads says whether Workloads are served and read for the queue label.
	Workloads bool

	// said keeps, by PodGroup (namespace/name), the last warning the adapter recorded on it (with
	// the PodGroup's UID), so that the changes of its pods, which reconcile it too, do not repeat
	// it.
	said sync.Map
}

// memberBatchDelay is how long a member's change waits before its group is reconciled: the members
// of a gang come, are bound and start within moments of each other (as the PodGroup controller's).
const memberBatchDelay = 500 * time.Millisecond

// SetupWithManager runs the adapter for every change of an upstream PodGroup, of a pod of one
// (batched), of a Tephra PodGroup it controls (an earlier version's mirror, to be deleted) and
// (when served) of a Workload its PodGroups refer to. The pods of a group are read through the
// PodGroup controller's field index (podgroup.PodGroupIndex).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&upstreamv1beta1.PodGroup{}).
		Owns(&schedulingv1alpha1.PodGroup{}).
		Watches(&corev1.Pod{}, r.membersBatched()).
		WithOptions(controller.Options{MaxConcurrentReconciles: mirror.Workers})
	if r.Workloads {
		b = b.Watches(&upstreamv1beta1.Workload{}, handler.EnqueueRequestsFromMapFunc(r.requestsForWorkload))
	}
	return b.Complete(r)
}

// membersBatched maps a pod's changes to its upstream PodGroup's reconcile request after
// memberBatchDelay: the work queue keeps one request per group.
func (r *Reconciler) membersBatched() handler.TypedFuncs[client.Object, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		name, grouped := schedulingv1alpha1.PodGroupNameOf(pod)
		if !grouped {
			return
		}
		key := types.NamespacedName{Namespace: pod.Namespace, Name: name}
		var up upstreamv1beta1.PodGroup
		if err := r.Get(context.Background(), key, &up); err != nil || meta.IsStatusConditionTrue(up.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled) {
			return // not an upstream PodGroup's, or its condition is final
		}
		q.AddAfter(reconcile.Request{NamespacedName: key}, memberBatchDelay)
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// requestsForWorkload maps a Workload to the upstream PodGroups that refer to it.
func (r *Reconciler) requestsForWorkload(ctx context.Context, obj client.Object) []reconcile.Request {
	var list upstreamv1beta1.PodGroupList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, pg := range list.Items {
		if schedulingv1alpha1.UpstreamWorkloadName(&pg) == obj.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}})
		}
	}
	return reqs
}

// Reconcile writes an upstream PodGroup's PodGroupInitiallyScheduled from its members, says why it
// cannot be scheduled as it is, and deletes what an earlier version of Tephra mirrored it into.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var up upstreamv1beta1.PodGroup
	if err := r.Get(ctx, req.NamespacedName, &up); err != nil {
		if apierrors.IsNotFound(err) {
			r.said.Delete(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	own, err := r.ownPodGroup(ctx, &up)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Being deleted, it is no group any more (kube-controller-manager's PodGroup protection keeps
	// it until its pods have ended); one of a CompositePodGroup is the composite's sub-group
	// (composite.go); once True, its condition is final.
	if up.DeletionTimestamp != nil || schedulingv1alpha1.IsCompositeChild(&up) ||
		meta.IsStatusConditionTrue(up.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled) {
		return reconcile.Result{}, nil
	}
	workload, err := r.workloadOf(ctx, &up)
	if err != nil {
		return reconcile.Result{}, err
	}
	group, invalid := schedulingv1alpha1.FromUpstream(&up, workload)
	if invalid != "" {
		r.warnOnce(&up, nil, mirror.ReasonInvalid, "Tephra cannot schedule this PodGroup: "+invalid)
		return reconcile.Result{}, nil
	}
	if own != nil {
		r.warnOnce(&up, own, mirror.ReasonConflict, fmt.Sprintf("Tephra PodGroup %s/%s exists and is not this PodGroup's: it decides how the pods are scheduled", own.Namespace, own.Name))
		return reconcile.Result{}, nil
	}
	r.said.Delete(req.NamespacedName)
	status, err := r.statusOf(ctx, group)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, writeInitiallyScheduled(ctx, r.Client, &up, status.Conditions)
}

// ownPodGroup returns the Tephra PodGroup object of the upstream PodGroup's name that is not a
// mirror of it, nil if there is none; a mirror an earlier version of Tephra wrote is deleted.
func (r *Reconciler) ownPodGroup(ctx context.Context, up *upstreamv1beta1.PodGroup) (*schedulingv1alpha1.PodGroup, error) {
	var group schedulingv1alpha1.PodGroup
	if err := r.Get(ctx, client.ObjectKeyFromObject(up), &group); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&group, up) || group.Labels[MirrorLabel] != "true" {
		return &group, nil
	}
	if group.DeletionTimestamp == nil {
		if err := r.Delete(ctx, &group, client.Preconditions{UID: &group.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete the mirror of an earlier version: %w", err)
		}
	}
	return nil, nil
}

// workloadOf is the Workload an upstream PodGroup was made from, nil when it has none, it does
// not exist, or Workloads are not read.
func (r *Reconciler) workloadOf(ctx context.Context, up *upstreamv1beta1.PodGroup) (*upstreamv1beta1.Workload, error) {
	name := schedulingv1alpha1.UpstreamWorkloadName(up)
	if name == "" || !r.Workloads {
		return nil, nil
	}
	var w upstreamv1beta1.Workload
	if err := r.Get(ctx, types.NamespacedName{Namespace: up.Namespace, Name: name}, &w); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &w, nil
}

// statusOf is the status of the group, as the PodGroup controller decides a Tephra PodGroup's from
// its members and its queue.
func (r *Reconciler) statusOf(ctx context.Context, group *schedulingv1alpha1.PodGroup) (schedulingv1alpha1.PodGroupStatus, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(group.Namespace), client.MatchingFields{podgroup.PodGroupIndex: group.Name}); err != nil {
		return schedulingv1alpha1.PodGroupStatus{}, fmt.Errorf("list members of pod group %s/%s: %w", group.Namespace, group.Name, err)
	}
	var queues schedulingv1alpha1.QueueList
	if err := r.List(ctx, &queues); err != nil {
		return schedulingv1alpha1.PodGroupStatus{}, fmt.Errorf("list queues: %w", err)
	}
	nsLabels, err := podgroup.NamespaceLabels(ctx, r, group.Namespace)
	if err != nil {
		return schedulingv1alpha1.PodGroupStatus{}, err
	}
	queuePtrs := make([]*schedulingv1alpha1.Queue, len(queues.Items))
	for i := range queues.Items {
		queuePtrs[i] = &queues.Items[i]
	}
	return groupstatus.Of(group, pods.Items, queuePtrs, nsLabels), nil
}

// warnOnce records a Warning on the upstream PodGroup, unless it was the last one recorded there.
func (r *Reconciler) warnOnce(up *upstreamv1beta1.PodGroup, related runtime.Object, reason, message string) {
	key, said := client.ObjectKeyFromObject(up), string(up.UID)+" "+reason+" "+message
	if last, ok := r.said.Load(key); ok && last == said {
		return
	}
	r.said.Store(key, said)
	r.Recorder.Eventf(up, related, corev1.EventTypeWarning, reason, "Translate", "%s", message)
}

// MirrorLabel marks the Tephra PodGroups that mirror a CompositePodGroup (composite.go), and those
// an earlier version of Tephra wrote for upstream PodGroups, which the adapter deletes.
const MirrorLabel = "scheduling.tephra.dev/mirror-of-upstream"

// queueOf is the queue an upstream object names (v1alpha1.UpstreamQueue), with the Workload it was
// made from read through c when readWorkloads; or why the label cannot name a queue.
func queueOf(ctx context.Context, c client.Reader, readWorkloads bool, obj client.Object, what, workload string) (queue, invalid string, err error) {
	var w *upstreamv1beta1.Workload
	if _, has := obj.GetLabels()[schedulingv1alpha1.QueueLabel]; !has && readWorkloads && workload != "" {
		var got upstreamv1beta1.Workload
		err := c.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: workload}, &got)
		if client.IgnoreNotFound(err) != nil {
			return "", "", err
		}
		if err == nil {
			w = &got
		}
	}
	queue, invalid = schedulingv1alpha1.UpstreamQueue(obj, what, w)
	return queue, invalid, nil
}

// deleteMirrorOf deletes the mirror that owner controls, once owner is being deleted.
func deleteMirrorOf(ctx context.Context, c client.Client, owner client.Object) error {
	var group schedulingv1alpha1.PodGroup
	if err := c.Get(ctx, client.ObjectKeyFromObject(owner), &group); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&group, owner) || group.DeletionTimestamp != nil {
		return nil
	}
	return client.IgnoreNotFound(c.Delete(ctx, &group, client.Preconditions{UID: &group.UID}))
}

// writeInitiallyScheduled sets PodGroupInitiallyScheduled on the upstream PodGroup from the
// conditions of its group (its CompositePodGroup's mirror for a child).
func writeInitiallyScheduled(ctx context.Context, c client.Client, up *upstreamv1beta1.PodGroup, conditions []metav1.Condition) error {
	if meta.IsStatusConditionTrue(up.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled) {
		return nil // terminal
	}
	want := metav1.Condition{Type: upstreamv1beta1.PodGroupInitiallyScheduled, ObservedGeneration: up.Generation}
	if c := meta.FindStatusCondition(conditions, schedulingv1alpha1.PodGroupScheduled); c != nil && c.Status == metav1.ConditionTrue {
		want.Status, want.Reason, want.Message = metav1.ConditionTrue, "Scheduled", "Tephra placed the gang's minimum"
	} else if c := meta.FindStatusCondition(conditions, schedulingv1alpha1.PodGroupUnschedulable); c != nil && c.Status == metav1.ConditionTrue && c.Reason != schedulingv1alpha1.ReasonWaitingForMembers {
		// A gang short of its members is not tried: it waits for them, and says nothing yet.
		want.Status, want.Reason, want.Message = metav1.ConditionFalse, upstreamv1beta1.PodGroupReasonUnschedulable, c.Message
	} else {
		return nil
	}
	// False is written only where nobody has written the condition yet: with GenericWorkload on in
	// the scheduler, kube-scheduler's pod-group cycle writes it too, and the two must not flap.
	if old := meta.FindStatusCondition(up.Status.Conditions, want.Type); old != nil && want.Status == metav1.ConditionFalse {
		return nil
	}
	meta.SetStatusCondition(&up.Status.Conditions, want)
	return client.IgnoreNotFound(c.Status().Update(ctx, up))
}
