// Package upstream mirrors upstream Kubernetes' gang API (scheduling.k8s.io/v1beta1 PodGroup, and
// its Workload for the queue label) into Tephra's own PodGroups, so that tephra-scheduler keeps
// one internal model. Each upstream PodGroup gets a Tephra PodGroup of the same namespace and name,
// controlled by it (deleted as soon as the upstream PodGroup is being deleted, which
// kube-controller-manager's PodGroup protection holds until its pods end; else by the garbage
// collector):
//
//   - minMember: spec.schedulingPolicy.gang.minCount; 1 for the basic policy (every pod on its own);
//   - queue: the label scheduling.tephra.dev/queue on the PodGroup, else on the Workload named by
//     spec.workloadRef, else Tephra's default queue;
//   - priorityClassName: spec.priorityClassName.
//
// Back on the upstream PodGroup it sets the condition PodGroupInitiallyScheduled, the only status
// upstream defines: True once Tephra's PodGroup has been Scheduled (terminal, as upstream says),
// False with reason Unschedulable and Tephra's message while it cannot be placed (only if no one
// set the condition before). It never turns a True condition back, so it agrees with upstream's
// scheduler if that also writes it.
package upstream

import (
	"context"
	"fmt"

	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
)

// ControllerName names the adapter, in logs and as the reporting controller of its events.
const ControllerName = "tephra-upstream-podgroup"

// GroupVersion is the upstream API the adapter reads.
var GroupVersion = upstreamv1beta1.SchemeGroupVersion

// Served says whether the apiserver serves scheduling.k8s.io/v1beta1 podgroups (it does only with
// the GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1beta1=true), and
// workloads beside them.
func Served(config *rest.Config) (podGroups, workloads bool, err error) {
	served, err := servedResources(config, GroupVersion.String())
	return served["podgroups"], served["workloads"], err
}

// servedResources lists the resources the apiserver serves in a group version (none when it
// does not serve the group version).
func servedResources(config *rest.Config, groupVersion string) (map[string]bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	list, err := dc.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", groupVersion, err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	return served, nil
}

// Reconciler mirrors upstream PodGroups into Tephra PodGroups and writes their status back.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Workloads says whether Workloads are served and read for the queue label.
	Workloads bool
}

// SetupWithManager runs the adapter for every change of an upstream PodGroup, of its mirror, and
// (when served) of a Workload its PodGroups refer to.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&upstreamv1beta1.PodGroup{}).
		Owns(&schedulingv1alpha1.PodGroup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: mirror.Workers})
	if r.Workloads {
		b = b.Watches(&upstreamv1beta1.Workload{}, handler.EnqueueRequestsFromMapFunc(r.requestsForWorkload))
	}
	return b.Complete(r)
}

// requestsForWorkload maps a Workload to the upstream PodGroups that refer to it.
func (r *Reconciler) requestsForWorkload(ctx context.Context, obj client.Object) []reconcile.Request {
	var list upstreamv1beta1.PodGroupList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, pg := range list.Items {
		if ref := pg.Spec.WorkloadRef; ref != nil && ref.WorkloadName == obj.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}})
		}
	}
	return reqs
}

// Reconcile brings the mirror of one upstream PodGroup in line with it, and its status back.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var up upstreamv1beta1.PodGroup
	if err := r.Get(ctx, req.NamespacedName, &up); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if up.DeletionTimestamp != nil {
		// kube-controller-manager's PodGroup protection keeps a deleted PodGroup until its pods
		// have ended; its gang is over now, so the mirror goes at once and the members it held
		// wait for their group again (PodGroupNotFound) without holding capacity.
		return reconcile.Result{}, deleteMirrorOf(ctx, r.Client, &up)
	}
	if isCompositeChild(&up) {
		// Its CompositePodGroup's mirror, with a sub-group for it, stands for it (composite.go).
		return reconcile.Result{}, nil
	}
	spec, invalid, err := r.desiredSpec(ctx, &up)
	if err != nil {
		return reconcile.Result{}, err
	}
	if invalid != "" {
		mirror.Invalid(r.Recorder, &up, "Tephra cannot schedule this PodGroup: %s", invalid)
		return reconcile.Result{}, nil
	}
	group, err := mirror.SyncPodGroup(ctx, r.Client, r.Recorder, &up, GroupVersion.WithKind("PodGroup"), spec, map[string]string{MirrorLabel: "true"})
	if err != nil || group == nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, writeInitiallyScheduled(ctx, r.Client, &up, group)
}

// MirrorLabel marks the Tephra PodGroups that mirror an upstream PodGroup.
const MirrorLabel = "scheduling.tephra.dev/mirror-of-upstream"

// desiredSpec is the mirror's spec, or why the upstream PodGroup cannot be mirrored.
func (r *Reconciler) desiredSpec(ctx context.Context, up *upstreamv1beta1.PodGroup) (schedulingv1alpha1.PodGroupSpec, string, error) {
	spec := schedulingv1alpha1.PodGroupSpec{MinMember: 1, PriorityClassName: up.Spec.PriorityClassName}
	if gang := up.Spec.SchedulingPolicy.Gang; gang != nil {
		if gang.MinCount < 1 {
			return spec, fmt.Sprintf("spec.schedulingPolicy.gang.minCount is %d; it must be at least 1", gang.MinCount), nil
		}
		spec.MinMember = gang.MinCount
	}
	workload := ""
	if up.Spec.WorkloadRef != nil {
		workload = up.Spec.WorkloadRef.WorkloadName
	}
	queue, invalid, err := queueOf(ctx, r.Client, r.Workloads, up, "the PodGroup", workload)
	if err != nil || invalid != "" {
		return spec, invalid, err
	}
	spec.Queue = queue
	// The upstream constraint is one node label whose domain must hold the whole group: Tephra's
	// required.
	if c := up.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		spec.Topology = &schedulingv1alpha1.PodGroupTopology{Required: c.Topology[0].Key}
	}
	return spec, "", nil
}

// queueOf is the queue an upstream object names: its label scheduling.tephra.dev/queue, else the
// label of the Workload it was made from (when Workloads are read), else "" (the default queue);
// or why the label cannot name a queue.
func queueOf(ctx context.Context, c client.Reader, readWorkloads bool, obj client.Object, what, workload string) (queue, invalid string, err error) {
	queue, has := obj.GetLabels()[schedulingv1alpha1.QueueLabel]
	from := what
	if !has && readWorkloads && workload != "" {
		var w upstreamv1beta1.Workload
		err := c.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: workload}, &w)
		if err != nil && !apierrors.IsNotFound(err) {
			return "", "", err
		}
		queue, from = w.Labels[schedulingv1alpha1.QueueLabel], "Workload "+w.Name
	}
	if queue != "" {
		if errs := validation.IsDNS1123Subdomain(queue); len(errs) > 0 {
			return "", fmt.Sprintf("label %s=%q on %s is not a queue name: %s", schedulingv1alpha1.QueueLabel, queue, from, errs[0]), nil
		}
	}
	return queue, "", nil
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

// writeInitiallyScheduled sets PodGroupInitiallyScheduled on the upstream PodGroup from its
// mirror's status (its CompositePodGroup's mirror for a child).
func writeInitiallyScheduled(ctx context.Context, c client.Client, up *upstreamv1beta1.PodGroup, group *schedulingv1alpha1.PodGroup) error {
	if meta.IsStatusConditionTrue(up.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled) {
		return nil // terminal
	}
	want := metav1.Condition{Type: upstreamv1beta1.PodGroupInitiallyScheduled, ObservedGeneration: up.Generation}
	if c := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupScheduled); c != nil && c.Status == metav1.ConditionTrue {
		want.Status, want.Reason, want.Message = metav1.ConditionTrue, "Scheduled", "Tephra placed the gang's minimum"
	} else if c := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable); c != nil && c.Status == metav1.ConditionTrue {
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
