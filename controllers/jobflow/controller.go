package jobflow

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// ControllerName names the controller, in logs and as the reporting controller of its events.
const ControllerName = "tephra-jobflow"

// Finalizer holds a JobFlow until its Jobs were deleted or released, per its jobRetainPolicy.
const Finalizer = "batch.tephra.dev/jobflow"

// ConditionTemplatesFound is False while a flow that may start has no JobTemplate.
const ConditionTemplatesFound = "TemplatesFound"

// Reconciler runs JobFlows.
type Reconciler struct {
	client.Client
	// APIReader confirms past the cache that a Job the status records as created is gone.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Now is the clock (time.Now if nil).
	Now func() metav1.Time
}

// SetupWithManager runs the reconciler for every change of a JobFlow or of its Jobs, and for
// every JobTemplate change (a flow may wait for its template).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := registerMetrics(mgr.GetCache(), mgr.Elected()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&batchv1alpha1.JobFlow{}).
		Owns(&batchv1alpha1.Job{}).
		Watches(&batchv1alpha1.JobTemplate{}, handler.EnqueueRequestsFromMapFunc(r.flowsOfTemplate)).
		Complete(r)
}

// flowsOfTemplate lists the JobFlows of the template's namespace that have a flow of its name.
func (r *Reconciler) flowsOfTemplate(ctx context.Context, obj client.Object) []reconcile.Request {
	var flows batchv1alpha1.JobFlowList
	if err := r.List(ctx, &flows, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, jf := range flows.Items {
		if slices.ContainsFunc(jf.Spec.Flows, func(f batchv1alpha1.Flow) bool { return f.Name == obj.GetName() }) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: jf.Namespace, Name: jf.Name}})
		}
	}
	return out
}

func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return r.Now()
	}
	return metav1.Now()
}

// Reconcile creates the Jobs whose flows may start and writes the JobFlow's status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	jf := &batchv1alpha1.JobFlow{}
	if err := r.Get(ctx, req.NamespacedName, jf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	jobs, err := r.jobsOf(ctx, jf)
	if err != nil {
		return ctrl.Result{}, err
	}
	if jf.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, jf, jobs)
	}
	if !controllerutil.ContainsFinalizer(jf, Finalizer) {
		controllerutil.AddFinalizer(jf, Finalizer)
		if err := r.Update(ctx, jf); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}

	d := Decide(Observed{Flow: jf, Jobs: jobs, Now: r.now()})
	missing, createErr := r.create(ctx, jf, &d)
	setTemplatesCondition(&d.Status, jf.Generation, missing)
	// A failed creation is tried again with backoff; a missing template, when it is created.
	return ctrl.Result{}, errors.Join(r.writeStatus(ctx, jf, d.Status), createErr)
}

// jobsOf maps flow names to the JobFlow's Jobs. A Job the status records as created but the cache
// does not show is read from the apiserver: it may be one this controller just created.
func (r *Reconciler) jobsOf(ctx context.Context, jf *batchv1alpha1.JobFlow) (map[string]*batchv1alpha1.Job, error) {
	var list batchv1alpha1.JobList
	if err := r.List(ctx, &list, client.InNamespace(jf.Namespace), client.MatchingLabels{batchv1alpha1.JobFlowLabel: jf.Name}); err != nil {
		return nil, fmt.Errorf("list jobs of jobflow %s/%s: %w", jf.Namespace, jf.Name, err)
	}
	jobs := map[string]*batchv1alpha1.Job{}
	for i := range list.Items {
		j := &list.Items[i]
		if metav1.IsControlledBy(j, jf) {
			jobs[j.Labels[batchv1alpha1.FlowLabel]] = j
		}
	}
	for _, s := range jf.Status.JobStatusList {
		if _, seen := jobs[s.Flow]; seen || s.CreationTimestamp == nil || s.State == batchv1alpha1.FlowJobDeleted || finished(s.State) {
			continue
		}
		j := &batchv1alpha1.Job{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: jf.Namespace, Name: s.Name}, j)
		if err == nil && metav1.IsControlledBy(j, jf) {
			jobs[s.Flow] = j
		} else if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read job %s/%s: %w", jf.Namespace, s.Name, err)
		}
	}
	return jobs, nil
}

// create makes the Jobs Decide asks for, from their templates. A flow whose template is missing,
// or whose creation fails, goes back to Waiting with the reason; the names of missing templates
// are returned, and the other failures.
func (r *Reconciler) create(ctx context.Context, jf *batchv1alpha1.JobFlow, d *Decision) (missing []string, failed error) {
	for _, flow := range d.Create {
		entry := entryOf(&d.Status, flow)
		tmpl := &batchv1alpha1.JobTemplate{}
		err := r.Get(ctx, client.ObjectKey{Namespace: jf.Namespace, Name: flow}, tmpl)
		if err != nil {
			if apierrors.IsNotFound(err) {
				missing = append(missing, flow)
				err = fmt.Errorf("JobTemplate %s/%s not found: create it, and the flow starts", jf.Namespace, flow)
			} else {
				failed = errors.Join(failed, err)
			}
			r.notCreated(jf, entry, err)
			continue
		}
		j := newJob(jf, flow, tmpl)
		err = r.Create(ctx, j)
		if apierrors.IsAlreadyExists(err) {
			// Created by an earlier reconcile whose status write was lost, or someone else's.
			have := &batchv1alpha1.Job{}
			if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(j), have); err == nil && !metav1.IsControlledBy(have, jf) {
				err = fmt.Errorf("job %s exists and does not belong to this jobflow: delete it, or rename the jobflow", j.Name)
			} else if err == nil {
				entry.CreationTimestamp = createdAt(have, r.now())
				continue
			}
		}
		if err != nil {
			failed = errors.Join(failed, err)
			r.notCreated(jf, entry, err)
			continue
		}
		entry.CreationTimestamp = createdAt(j, r.now())
		// The Job is the event's related object: events of one reason on one object that differ
		// only in their note would be merged into one series.
		r.eventAbout(jf, j, corev1.EventTypeNormal, "CreatedJob", "Create", "created job %s from JobTemplate %s", j.Name, flow)
	}
	if len(d.Create) > 0 {
		d.Status = summarize(jf, entriesOf(d.Status))
	}
	return missing, failed
}

func (r *Reconciler) notCreated(jf *batchv1alpha1.JobFlow, entry *batchv1alpha1.FlowJobStatus, err error) {
	entry.State, entry.Message, entry.CreationTimestamp = batchv1alpha1.FlowJobWaiting, err.Error(), nil
	r.event(jf, corev1.EventTypeWarning, "FailedCreate", "Create", "flow %s: %v", entry.Flow, err)
}

// newJob is a flow's Job: the template's spec, labels and annotations, with labels naming the
// JobFlow and the flow, controlled by the JobFlow.
func newJob(jf *batchv1alpha1.JobFlow, flow string, tmpl *batchv1alpha1.JobTemplate) *batchv1alpha1.Job {
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	labels[batchv1alpha1.JobFlowLabel] = jf.Name
	labels[batchv1alpha1.FlowLabel] = flow
	var annotations map[string]string
	if len(tmpl.Annotations) > 0 {
		annotations = map[string]string{}
		for k, v := range tmpl.Annotations {
			annotations[k] = v
		}
	}
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: JobName(jf.Name, flow), Namespace: jf.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(jf, batchv1alpha1.SchemeGroupVersion.WithKind("JobFlow"))},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
}

func entryOf(s *batchv1alpha1.JobFlowStatus, flow string) *batchv1alpha1.FlowJobStatus {
	for i := range s.JobStatusList {
		if s.JobStatusList[i].Flow == flow {
			return &s.JobStatusList[i]
		}
	}
	panic("jobflow: no status entry for flow " + flow)
}

func entriesOf(s batchv1alpha1.JobFlowStatus) map[string]*batchv1alpha1.FlowJobStatus {
	out := map[string]*batchv1alpha1.FlowJobStatus{}
	for i := range s.JobStatusList {
		out[s.JobStatusList[i].Flow] = &s.JobStatusList[i]
	}
	return out
}

func setTemplatesCondition(s *batchv1alpha1.JobFlowStatus, generation int64, missing []string) {
	c := metav1.Condition{Type: ConditionTemplatesFound, Status: metav1.ConditionTrue, Reason: "Found",
		Message: "every flow that may start has its JobTemplate", ObservedGeneration: generation}
	if len(missing) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, "TemplateNotFound"
		c.Message = fmt.Sprintf("flows %v may start but have no JobTemplate of their name in the namespace", missing)
	}
	meta.SetStatusCondition(&s.Conditions, c)
}

// writeStatus writes the status if it changed, announcing a new phase.
func (r *Reconciler) writeStatus(ctx context.Context, jf *batchv1alpha1.JobFlow, status batchv1alpha1.JobFlowStatus) error {
	if equality.Semantic.DeepEqual(jf.Status, status) {
		return nil
	}
	previous := jf.Status.State.Phase
	jf.Status = status
	if err := r.Status().Update(ctx, jf); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // the newer JobFlow is on its way as an event
		}
		return err
	}
	if previous != status.State.Phase {
		eventType := corev1.EventTypeNormal
		if status.State.Phase == batchv1alpha1.FlowFailed {
			eventType = corev1.EventTypeWarning
		}
		r.event(jf, eventType, "PhaseChanged", "UpdateStatus", "phase %s (%s): %s", status.State.Phase, status.State.Reason, status.State.Message)
	}
	return nil
}

// finalize deletes or releases the JobFlow's Jobs, per its jobRetainPolicy, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, jf *batchv1alpha1.JobFlow, jobs map[string]*batchv1alpha1.Job) error {
	if !controllerutil.ContainsFinalizer(jf, Finalizer) {
		return nil
	}
	d := Decide(Observed{Flow: jf, Jobs: jobs, Now: r.now()})
	if err := r.writeStatus(ctx, jf, d.Status); err != nil {
		return err
	}
	for _, j := range jobs {
		var err error
		if jf.Spec.JobRetainPolicy == batchv1alpha1.DeleteJobs {
			err = client.IgnoreNotFound(r.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)))
		} else {
			// Retained: the Job loses its owner reference, so the garbage collector keeps it.
			patch := client.MergeFrom(j.DeepCopy())
			j.OwnerReferences = slices.DeleteFunc(j.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == jf.UID })
			err = client.IgnoreNotFound(r.Patch(ctx, j, patch))
		}
		if err != nil {
			return fmt.Errorf("release job %s/%s of jobflow %s: %w", j.Namespace, j.Name, jf.Name, err)
		}
	}
	if len(jobs) > 0 {
		verb := map[bool]string{true: "deleted", false: "kept"}[jf.Spec.JobRetainPolicy == batchv1alpha1.DeleteJobs]
		r.event(jf, corev1.EventTypeNormal, "Finalized", "Delete", "%s %d jobs (jobRetainPolicy %s)", verb, len(jobs), retainPolicy(jf))
	}
	controllerutil.RemoveFinalizer(jf, Finalizer)
	return client.IgnoreNotFound(r.Update(ctx, jf))
}

func retainPolicy(jf *batchv1alpha1.JobFlow) batchv1alpha1.RetainPolicy {
	if jf.Spec.JobRetainPolicy == "" {
		return batchv1alpha1.RetainJobs
	}
	return jf.Spec.JobRetainPolicy
}

func (r *Reconciler) event(jf *batchv1alpha1.JobFlow, eventType, reason, action, note string, args ...any) {
	r.eventAbout(jf, nil, eventType, reason, action, note, args...)
}

// eventAbout records an event on the JobFlow whose related object is related.
func (r *Reconciler) eventAbout(jf *batchv1alpha1.JobFlow, related runtime.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder == nil {
		return
	}
	msg := fmt.Sprintf(note, args...)
	if len(msg) > 1000 {
		msg = msg[:997] + "..."
	}
	r.Recorder.Eventf(jf, related, eventType, reason, action, "%s", msg)
}
