package foreign

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
	"github.com/tephra-dev/tephra/controllers/podgroup"
)

// SchedulerPluginsReconciler mirrors scheduler-plugins PodGroups into Tephra PodGroups and
// writes their status back as scheduler-plugins' own PodGroup controller would.
type SchedulerPluginsReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

var schedulerPluginsGVK = schedulerpluginsv1alpha1.SchemeGroupVersion.WithKind("PodGroup")

// SetupWithManager runs the reconciler on changes of the foreign PodGroups, of their mirrors and
// of member pods (the status counts bound pods, which the mirror's status does not).
func (r *SchedulerPluginsReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(SchedulerPluginsControllerName).
		For(&schedulerpluginsv1alpha1.PodGroup{}).
		Owns(&schedulingv1alpha1.PodGroup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: mirror.Workers}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			if name, ok := obj.GetLabels()[schedulingv1alpha1.CoschedulingPodGroupLabel]; ok {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
			}
			return nil
		})).
		Complete(r)
}

// Reconcile translates one scheduler-plugins PodGroup.
func (r *SchedulerPluginsReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pg schedulerpluginsv1alpha1.PodGroup
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
	if name := negativeQuantity(pg.Spec.MinResources); name != "" {
		mirror.Invalid(r.Recorder, &pg, "spec.minResources[%s] is negative", name)
		return ctrl.Result{}, nil
	}
	spec := schedulingv1alpha1.PodGroupSpec{MinMember: pg.Spec.MinMember, MinResources: pg.Spec.MinResources}
	// 0 (the MPI operator's default) or unset: the scheduler's default timeout. Beyond Tephra's
	// maximum: the maximum.
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		spec.ScheduleTimeoutSeconds = new(min(*t, 86400))
	}
	group, err := mirror.SyncPodGroup(ctx, r.Client, r.Recorder, &pg, schedulerPluginsGVK, spec, nil)
	if err != nil || group == nil {
		return ctrl.Result{}, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(pg.Namespace), client.MatchingFields{podgroup.PodGroupIndex: pg.Name}); err != nil {
		return ctrl.Result{}, err
	}
	status := schedulerPluginsStatus(pg.Status, group, pods.Items)
	if apiequality.Semantic.DeepEqual(status, pg.Status) {
		return ctrl.Result{}, nil
	}
	pg.Status = status
	if err := r.Status().Update(ctx, &pg); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// schedulerPluginsStatus is the status of a scheduler-plugins PodGroup whose mirror is group and
// whose members are pods. The phases follow scheduler-plugins' PodGroup controller, from what
// Tephra knows: Pending (fewer than minMember members exist, or the queue holds the group),
// PreScheduling (the minimum exists, none bound), Scheduling (some bound), Scheduled (minMember
// bound, fewer running), Running, Finished (Tephra's Completed) and Failed. A group that lost
// part of its minimum (Tephra's Unknown) shows Scheduling: it is being placed again.
func schedulerPluginsStatus(previous schedulerpluginsv1alpha1.PodGroupStatus, group *schedulingv1alpha1.PodGroup, pods []corev1.Pod) schedulerpluginsv1alpha1.PodGroupStatus {
	status := previous
	status.Running, status.Succeeded, status.Failed = group.Status.Running, group.Status.Succeeded, group.Status.Failed
	status.Scheduled = 0
	for i := range pods {
		if pods[i].Spec.NodeName != "" && pods[i].DeletionTimestamp == nil {
			status.Scheduled++
		}
	}
	minMember := max(group.Spec.MinMember, 1)
	switch group.Status.Phase {
	case schedulingv1alpha1.PodGroupRunning:
		status.Phase = schedulerpluginsv1alpha1.PodGroupRunning
	case schedulingv1alpha1.PodGroupCompleted:
		status.Phase = schedulerpluginsv1alpha1.PodGroupFinished
	case schedulingv1alpha1.PodGroupFailed:
		status.Phase = schedulerpluginsv1alpha1.PodGroupFailed
	case schedulingv1alpha1.PodGroupInqueue, schedulingv1alpha1.PodGroupUnknown:
		switch {
		case status.Scheduled >= minMember:
			status.Phase = schedulerpluginsv1alpha1.PodGroupScheduled
		case status.Scheduled > 0:
			status.Phase = schedulerpluginsv1alpha1.PodGroupScheduling
		default:
			status.Phase = schedulerpluginsv1alpha1.PodGroupPreScheduling
		}
	default:
		status.Phase = schedulerpluginsv1alpha1.PodGroupPending
	}
	if status.Phase != schedulerpluginsv1alpha1.PodGroupPending && status.ScheduleStartTime.IsZero() {
		if c := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable); c != nil {
			status.ScheduleStartTime = c.LastTransitionTime
		} else {
			status.ScheduleStartTime = group.CreationTimestamp
		}
	}
	return status
}
