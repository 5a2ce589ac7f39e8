package cronjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// ControllerName names the controller, in logs and as the reporting controller of its events.
const ControllerName = "tephra-cronjob"

// Reconciler runs CronJobs.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// SetupWithManager runs the reconciler for every change of a CronJob or of its Jobs; Decide's
// RequeueAfter brings it back at the next scheduled time.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := registerMetrics(); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&batchv1alpha1.CronJob{}).
		Owns(&batchv1alpha1.Job{}).
		Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile starts the CronJob's due run, if any, and cleans up its history.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cj := &batchv1alpha1.CronJob{}
	if err := r.Get(ctx, req.NamespacedName, cj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var list batchv1alpha1.JobList
	if err := r.List(ctx, &list, client.InNamespace(cj.Namespace), client.MatchingLabels{batchv1alpha1.CronJobLabel: cj.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list jobs of cronjob %s: %w", req.NamespacedName, err)
	}
	var jobs []*batchv1alpha1.Job
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], cj) {
			jobs = append(jobs, &list.Items[i])
		}
	}
	d := Decide(Observed{CronJob: cj, Jobs: jobs, Now: r.now()})
	for _, e := range d.Events {
		r.event(cj, e.Type, e.Reason, "Sync", "%s", e.Message)
	}
	var errs []error
	for _, j := range d.Delete {
		if err := r.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete job %s: %w", j.Name, err))
			continue
		}
		r.eventAbout(cj, j, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "Deleted job %s", j.Name)
	}
	if d.Create != nil {
		if err := r.create(ctx, cj, *d.Create); err != nil {
			// Not started: the status must not say it was, and the next reconcile tries again.
			d.Status.LastScheduleTime = cj.Status.LastScheduleTime
			d.Status.Active = d.Status.Active[:len(d.Status.Active)-1]
			errs = append(errs, err)
		}
	}
	if !equality.Semantic.DeepEqual(cj.Status, d.Status) {
		cj.Status = d.Status
		if err := r.Status().Update(ctx, cj); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, errors.Join(errs...)
}

// create makes the Job of the run scheduled at t. A Job of that name that the CronJob controls
// already is that run: created before a restart.
func (r *Reconciler) create(ctx context.Context, cj *batchv1alpha1.CronJob, t time.Time) error {
	j := NewJob(cj, t)
	err := r.Create(ctx, j)
	if apierrors.IsAlreadyExists(err) {
		have := &batchv1alpha1.Job{}
		if getErr := r.Get(ctx, client.ObjectKeyFromObject(j), have); getErr == nil && metav1.IsControlledBy(have, cj) {
			return nil
		}
		err = fmt.Errorf("job %s exists and does not belong to this cronjob: %w", j.Name, err)
	}
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		r.event(cj, corev1.EventTypeWarning, "FailedCreate", "Create", "Error creating job: %v", err)
		runs.WithLabelValues("failed").Inc()
		return err
	}
	runs.WithLabelValues("created").Inc()
	// The Job is the event's related object: events of one reason on one object that differ
	// only in their note would be merged into one series.
	r.eventAbout(cj, j, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "Created job %s", j.Name)
	return nil
}

// NewJob is the Job of a CronJob's run scheduled at t: the jobTemplate's labels, annotations
// and spec, labelled with the CronJob's name, annotated with the scheduled time, controlled by
// the CronJob.
func NewJob(cj *batchv1alpha1.CronJob, t time.Time) *batchv1alpha1.Job {
	tmpl := cj.Spec.JobTemplate.DeepCopy()
	labels := tmpl.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	labels[batchv1alpha1.CronJobLabel] = cj.Name
	annotations := tmpl.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[batchv1alpha1.ScheduledTimeAnnotation] = t.UTC().Format(time.RFC3339)
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: JobName(cj.Name, t), Namespace: cj.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1alpha1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: tmpl.Spec,
	}
}

func (r *Reconciler) event(cj *batchv1alpha1.CronJob, eventType, reason, action, note string, args ...any) {
	r.eventAbout(cj, nil, eventType, reason, action, note, args...)
}

// eventAbout records an event on the CronJob whose related object is related.
func (r *Reconciler) eventAbout(cj *batchv1alpha1.CronJob, related runtime.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(cj, related, eventType, reason, action, note, args...)
}
