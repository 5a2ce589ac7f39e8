// Package podgroup writes the status of every PodGroup from its member pods: its phase, how many
// members run, succeeded and failed, whether its minimum has been scheduled, and why it cannot
// be, as internal/groupstatus decides it. It is the only writer of PodGroup status.
// tephra-scheduler writes nothing to PodGroups: it explains itself in the PodScheduled conditions
// of the pods, which this controller lifts onto the group where users look.
package podgroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groupstatus"
)

// ControllerName names the controller, in logs and as the reporting controller of its events.
const ControllerName = "tephra-podgroup"

// PodGroupIndex is the field index of pods by the name of the PodGroup they belong to (see
// v1alpha1.PodGroupNameOf), registered by SetupWithManager. List a group's members with
// client.InNamespace(ns) and client.MatchingFields{PodGroupIndex: name}.
const PodGroupIndex = "tephra.podgroup"

// Reconciler writes the status of a PodGroup from its member pods.
type Reconciler struct {
	client.Client
	// Recorder records events on PodGroups: phase changes, and new reasons they cannot be placed.
	Recorder events.EventRecorder
	// DefaultReadyTimeout is the ready timeout of groups that set no spec.readyTimeoutSeconds
	// (0: none): see decideReady.
	DefaultReadyTimeout time.Duration
}

// SetupWithManager indexes pods by group, registers the tephra_podgroups metric, and runs the
// reconciler for every PodGroup change and every change of a member pod.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, PodGroupIndex, podGroupIndexValue); err != nil {
		return fmt.Errorf("index pods by pod group: %w", err)
	}
	if err := registerPhaseMetric(mgr.GetCache(), mgr.Elected()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// A new group's first status waits as its members' changes do: its members come within
		// moments (a Job creates its pods right after its group), and a status written before
		// them would only be written again.
		For(&schedulingv1alpha1.PodGroup{}, builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }})).
		Watches(&schedulingv1alpha1.PodGroup{}, createdBatched(memberBatchDelay)).
		// On a label change the handler maps both the old and the new pod, so the group a pod
		// leaves is reconciled too.
		Watches(&corev1.Pod{}, membersBatched(memberBatchDelay)).
		Watches(&schedulingv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(r.requestsForQueue), builder.WithPredicates(queueHoldMayChange)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.requestsForNamespace)).
		// A job's end decides its group's phase.
		Watches(&batchv1alpha1.Job{}, handler.EnqueueRequestsFromMapFunc(requestForJobGroup)).
		Complete(r)
}

// memberBatchDelay is how long a member's change waits before its group's status is written:
// the members of a gang come (and are bound, and start) within moments of each other, and a
// status written for each ("1 of 3 pods exist", "2 of 3") cost the apiserver a custom resource
// update per member, about a tenth of its CPU in make bench-upstream's 3000-gang run.
const memberBatchDelay = 500 * time.Millisecond

// membersBatched maps a pod's changes to its group's reconcile request after delay; on an update
// both the old and the new pod are mapped, so the group a pod leaves is reconciled too. The work
// queue keeps one request per group, so the members' changes meanwhile make one reconcile.
func membersBatched(delay time.Duration) handler.TypedFuncs[client.Object, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
		for _, req := range requestForGroupOf(context.Background(), obj) {
			q.AddAfter(req, delay)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld)
			add(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// createdBatched maps a group's creation to its reconcile request after delay, and nothing else
// (For maps the group's other changes at once).
func createdBatched(delay time.Duration) handler.TypedFuncs[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.AddAfter(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}, delay)
		},
	}
}

// podGroupIndexValue is the PodGroupIndex value of a pod: its group's name, if it has one.
func podGroupIndexValue(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	if name, ok := schedulingv1alpha1.PodGroupNameOf(pod); ok && name != "" {
		return []string{name}
	}
	return nil
}

// requestForGroupOf maps a pod to the reconcile request of its group, if it has one with an
// object: a group a pod carries (schedulingv1alpha1.GroupOnPod) has no status to write.
func requestForGroupOf(_ context.Context, obj client.Object) []reconcile.Request {
	if pod, ok := obj.(*corev1.Pod); ok && schedulingv1alpha1.CarriesGroup(pod) {
		return nil
	}
	names := podGroupIndexValue(obj)
	if len(names) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: names[0]}}}
}

// Reconcile writes the status that the group's members call for, if it differs from the
// group's, and records events for what changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	group := &schedulingv1alpha1.PodGroup{}
	if err := r.Get(ctx, req.NamespacedName, group); err != nil {
		// A deleted group needs nothing: its metric is computed from the cache.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(group.Namespace), client.MatchingFields{PodGroupIndex: group.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list members of pod group %s: %w", req.NamespacedName, err)
	}

	var queues schedulingv1alpha1.QueueList
	if err := r.List(ctx, &queues); err != nil {
		return ctrl.Result{}, fmt.Errorf("list queues: %w", err)
	}
	queuePtrs := make([]*schedulingv1alpha1.Queue, len(queues.Items))
	for i := range queues.Items {
		queuePtrs[i] = &queues.Items[i]
	}
	at := time.Now()
	nsLabels, err := NamespaceLabels(ctx, r, group.Namespace)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read namespace %s: %w", group.Namespace, err)
	}
	jobPhase, err := r.jobPhaseOf(ctx, group)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := groupstatus.Desired(group, pods.Items, groupstatus.HoldOf(group, queuePtrs, nsLabels), jobPhase)
	ready := decideReady(group, pods.Items, r.DefaultReadyTimeout, at)
	recheck := ctrl.Result{RequeueAfter: earliest(earliest(groupstatus.SLARecheck(group, at), groupstatus.RuntimeRecheck(group, at)), applyReady(group, &status, ready, at))}
	if !equality.Semantic.DeepEqual(group.Status, status) {
		previous := group.Status
		group.Status = status
		if err := r.Status().Update(ctx, group); err != nil {
			// A conflict means the group changed since the cache showed it, and that change is
			// on its way to the queue as an event: the next reconcile starts from it. Reporting
			// the error would only add a log line and a rate-limited retry.
			if apierrors.IsConflict(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		// Events come after the write succeeds, so a transition is announced once, not once per
		// attempt.
		r.recordEvents(group, previous, groupstatus.MinMemberOf(group), len(pods.Items))
		if cond, overran := groupstatus.OverranNow(previous, status); overran {
			estimateOverruns.WithLabelValues(group.Spec.Queue).Inc()
			if r.Recorder != nil {
				r.Recorder.Eventf(group, nil, corev1.EventTypeWarning, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded, "Run", "%s", cond.Message)
			}
		}
		if len(ready.evict) > 0 && status.UnreadyEvictions != previous.UnreadyEvictions && r.Recorder != nil {
			r.Recorder.Eventf(group, nil, corev1.EventTypeWarning, schedulingv1alpha1.ReasonPodGroupUnready, "Evict", "%s",
				meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupPodsReady).Message)
		}
	}
	// Evicted only once the status says so: the scheduler's backoff reads it.
	if len(ready.evict) > 0 {
		if err := r.evictUnready(ctx, group, ready.evict); err != nil {
			return ctrl.Result{}, err
		}
	}
	return recheck, nil
}

// ofTephraJob says whether a Tephra Job controls the group.
func ofTephraJob(group *schedulingv1alpha1.PodGroup) bool {
	owner := metav1.GetControllerOf(group)
	return owner != nil && owner.Kind == "Job" && owner.APIVersion == batchv1alpha1.SchemeGroupVersion.String()
}

// jobPhaseOf returns the phase of the Tephra Job that owns the group, "" if none does.
func (r *Reconciler) jobPhaseOf(ctx context.Context, group *schedulingv1alpha1.PodGroup) (batchv1alpha1.JobPhase, error) {
	if !ofTephraJob(group) {
		return "", nil
	}
	owner := metav1.GetControllerOf(group)
	job := &batchv1alpha1.Job{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: group.Namespace, Name: owner.Name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("read job %s/%s: %w", group.Namespace, owner.Name, err)
	}
	if job.UID != owner.UID {
		return "", nil // a new job of the same name: not this group's
	}
	return job.Status.State.Phase, nil
}

// requestForJobGroup maps a Tephra Job to its PodGroup, which has the job's name.
func requestForJobGroup(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}}
}

// earliest is the shorter of two requeue delays, where 0 means none.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// recordEvents announces a phase change (a Warning when the group failed, as it can no longer
// complete) and a new reason the group cannot be placed. A changed message under the same
// reason ("2 of 6 pods exist" becoming "3 of 6") is no news worth an event. The phase changes of
// a Tephra Job's group are not announced unless it failed: the job's own phase changes say as
// much, and in a burst of small jobs every event is a write the apiserver serves before the
// next job's pods.
func (r *Reconciler) recordEvents(group *schedulingv1alpha1.PodGroup, previous schedulingv1alpha1.PodGroupStatus, minMember int32, members int) {
	if r.Recorder == nil {
		return
	}
	status := group.Status
	failed := status.Phase == schedulingv1alpha1.PodGroupFailed
	if status.Phase != previous.Phase && (failed || !ofTephraJob(group)) {
		eventType := corev1.EventTypeNormal
		if failed {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(group, nil, eventType, "PhaseChanged", "UpdateStatus", "%s",
			phaseChangeNote(previous.Phase, status, minMember, members))
	}
	now := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
	before := meta.FindStatusCondition(previous.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
	if now != nil && now.Status == metav1.ConditionTrue && (before == nil || before.Status != metav1.ConditionTrue || before.Reason != now.Reason) {
		r.Recorder.Eventf(group, nil, corev1.EventTypeWarning, now.Reason, "Schedule", "%s", now.Message)
	}
}

// phaseChangeNote reads like "Phase changed from Inqueue to Running: 6 of 6 pods running".
func phaseChangeNote(from schedulingv1alpha1.PodGroupPhase, status schedulingv1alpha1.PodGroupStatus, minMember int32, members int) string {
	note := fmt.Sprintf("Phase changed from %s to %s: %d of %d pods running", from, status.Phase, status.Running, members)
	if from == "" {
		note = fmt.Sprintf("Phase set to %s: %d of %d pods running", status.Phase, status.Running, members)
	}
	if status.Succeeded > 0 {
		note += fmt.Sprintf(", %d succeeded", status.Succeeded)
	}
	if status.Failed > 0 {
		note += fmt.Sprintf(", %d failed", status.Failed)
	}
	if status.Phase == schedulingv1alpha1.PodGroupFailed {
		note += fmt.Sprintf("; fewer than minMember (%d) succeeded", minMember)
	}
	return note
}
