package foreign

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
	"github.com/tephra-dev/tephra/controllers/podgroup"
	"github.com/tephra-dev/tephra/internal/groupstatus"
	"github.com/tephra-dev/tephra/internal/topology"
)

// VolcanoPodGroupReconciler mirrors Volcano PodGroups into Tephra PodGroups and writes their
// status back with Volcano's phases.
type VolcanoPodGroupReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

var volcanoPodGroupGVK = volcanov1beta1.SchemeGroupVersion.WithKind("PodGroup")

// SetupWithManager runs the reconciler on changes of the foreign PodGroups, of their mirrors and
// of Tephra's Queues (a queue with room moves a waiting group to Inqueue).
func (r *VolcanoPodGroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(VolcanoPodGroupControllerName).
		For(&volcanov1beta1.PodGroup{}).
		Owns(&schedulingv1alpha1.PodGroup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: mirror.Workers}).
		Watches(&schedulingv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(r.pendingGroups)).
		Watches(&schedulingv1alpha1.Topology{}, handler.EnqueueRequestsFromMapFunc(r.networkTopologyGroups)).
		Complete(r)
}

// networkTopologyGroups are the Volcano PodGroups with a networkTopology: a changed Topology maps
// their tiers onto other levels.
func (r *VolcanoPodGroupReconciler) networkTopologyGroups(ctx context.Context, _ client.Object) []reconcile.Request {
	var groups volcanov1beta1.PodGroupList
	if err := r.List(ctx, &groups); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, g := range groups.Items {
		if g.Spec.NetworkTopology != nil {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&g)})
		}
	}
	return requests
}

// pendingGroups are the Volcano PodGroups that have not left Pending.
func (r *VolcanoPodGroupReconciler) pendingGroups(ctx context.Context, _ client.Object) []reconcile.Request {
	var groups volcanov1beta1.PodGroupList
	if err := r.List(ctx, &groups); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, g := range groups.Items {
		if g.Status.Phase == "" || g.Status.Phase == volcanov1beta1.PodGroupPending {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&g)})
		}
	}
	return requests
}

// VolcanoQueueOf is the queue a Volcano PodGroup names: spec.queue, else the label
// volcano.sh/queue-name, else the annotation scheduling.volcano.sh/queue-name, else "default".
func VolcanoQueueOf(pg *volcanov1beta1.PodGroup) string {
	for _, q := range []string{pg.Spec.Queue, pg.Labels[volcanov1beta1.QueueNameLabel], pg.Annotations[volcanov1beta1.QueueNameAnnotation]} {
		if q != "" {
			return q
		}
	}
	return schedulingv1alpha1.DefaultQueue
}

// Reconcile translates one Volcano PodGroup.
func (r *VolcanoPodGroupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pg volcanov1beta1.PodGroup
	if err := r.Get(ctx, req.NamespacedName, &pg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pg.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if pg.Spec.MinMember < 0 {
		mirror.Invalid(r.Recorder, &pg, "spec.minMember is %d; it must be at least 0 (0 and 1 both mean one pod)", pg.Spec.MinMember)
		return ctrl.Result{}, nil
	}
	spec := schedulingv1alpha1.PodGroupSpec{
		MinMember:         pg.Spec.MinMember,
		MinTaskMember:     positiveCounts(pg.Spec.MinTaskMember),
		Queue:             VolcanoQueueOf(&pg),
		PriorityClassName: pg.Spec.PriorityClassName,
	}
	if pg.Spec.MinResources != nil {
		if name := negativeQuantity(*pg.Spec.MinResources); name != "" {
			mirror.Invalid(r.Recorder, &pg, "spec.minResources[%s] is negative", name)
			return ctrl.Result{}, nil
		}
		spec.MinResources = *pg.Spec.MinResources
	}
	if nt := pg.Spec.NetworkTopology; nt != nil {
		topo, problem := topology.FromVolcano(nt.Mode, nt.HighestTierAllowed, mirror.TopologyLookup(ctx, r.Client))
		if problem != "" {
			mirror.Invalid(r.Recorder, &pg, "%s", problem)
			return ctrl.Result{}, nil
		}
		spec.Topology = topo
	}
	group, err := mirror.SyncPodGroup(ctx, r.Client, r.Recorder, &pg, volcanoPodGroupGVK, spec, nil)
	if err != nil || group == nil {
		return ctrl.Result{}, err
	}
	admitted := false
	if group.Status.Phase == "" || group.Status.Phase == schedulingv1alpha1.PodGroupPending {
		if err := r.warnLWSExclusiveTopology(ctx, &pg); err != nil {
			return ctrl.Result{}, err
		}
		var queues schedulingv1alpha1.QueueList
		if err := r.List(ctx, &queues); err != nil {
			return ctrl.Result{}, err
		}
		list := make([]*schedulingv1alpha1.Queue, len(queues.Items))
		for i := range queues.Items {
			list[i] = &queues.Items[i]
		}
		nsLabels, err := podgroup.NamespaceLabels(ctx, r, group.Namespace)
		if err != nil {
			return ctrl.Result{}, err
		}
		admitted = groupstatus.HoldOf(group, list, nsLabels).Reason == ""
	}
	status := volcanoStatus(pg.Status, group, admitted)
	if apiequality.Semantic.DeepEqual(status, pg.Status) {
		return ctrl.Result{}, nil
	}
	pg.Status = status
	if err := r.Status().Update(ctx, &pg); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// volcanoStatus is the status of a Volcano PodGroup whose mirror is group. Tephra's phases are
// Volcano's, with one difference: Tephra keeps a group without enough members Pending, while
// Volcano's enqueue action moves a group to Inqueue as soon as its queue can hold its
// minResources, pods or not (operators such as the Kubeflow training-operator create the pods
// only then). So a Pending mirror shows Inqueue when its queue admits it (admitted), and a group
// once Inqueue does not go back to Pending, as in Volcano.
func volcanoStatus(previous volcanov1beta1.PodGroupStatus, group *schedulingv1alpha1.PodGroup, admitted bool) volcanov1beta1.PodGroupStatus {
	status := *previous.DeepCopy()
	status.Running, status.Succeeded, status.Failed = group.Status.Running, group.Status.Succeeded, group.Status.Failed
	switch phase := group.Status.Phase; phase {
	case schedulingv1alpha1.PodGroupInqueue, schedulingv1alpha1.PodGroupRunning, schedulingv1alpha1.PodGroupCompleted,
		schedulingv1alpha1.PodGroupFailed, schedulingv1alpha1.PodGroupUnknown:
		status.Phase = volcanov1beta1.PodGroupPhase(phase)
	default:
		if admitted || previous.Phase == volcanov1beta1.PodGroupInqueue {
			status.Phase = volcanov1beta1.PodGroupInqueue
		} else {
			status.Phase = volcanov1beta1.PodGroupPending
		}
	}
	var conditions []volcanov1beta1.PodGroupCondition
	for _, c := range group.Status.Conditions {
		if c.Type != schedulingv1alpha1.PodGroupUnschedulable && c.Type != schedulingv1alpha1.PodGroupScheduled {
			continue
		}
		conditions = append(conditions, volcanov1beta1.PodGroupCondition{
			Type: c.Type, Status: corev1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: c.LastTransitionTime,
		})
	}
	status.Conditions = conditions
	return status
}
