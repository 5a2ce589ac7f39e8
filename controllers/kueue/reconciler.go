// Package kueue runs Tephra Jobs under Kueue's admission: Kueue's contract for a job kind of an
// external framework (Kueue's `integrations.externalFrameworks`, as its own jobframework keeps it
// for the kinds it integrates). A Job that names a LocalQueue (label kueue.x-k8s.io/queue-name)
// is created suspended (SuspendDefaulter); this adapter makes it a Workload with a pod set per
// task, and resumes the Job once Kueue admits the Workload, on the flavors Kueue assigned. Kueue's
// eviction or preemption suspends it again, which makes the Job controller delete its pods whole;
// once none is left the Workload's quota is released and Kueue may admit it again. A Job that
// finishes finishes its Workload. Kueue decides admission and quota; Tephra gangs and places
// what Kueue admitted (docs/kueue.md).
package kueue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// ControllerName names the adapter, in logs and as the reporting controller of its events.
const ControllerName = "tephra-kueue-job"

// Event reasons on the Job.
const (
	ReasonCreatedWorkload  = "CreatedWorkload"
	ReasonAdmitted         = "Admitted"
	ReasonWaitingForKueue  = "WaitingForKueue"
	ReasonEvicted          = "Evicted"
	ReasonFinishedWorkload = "FinishedWorkload"
	ReasonCannotStart      = "CannotStart"
)

// Reconciler keeps each Kueue-managed Tephra Job and its Workload in step.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// SetupWithManager runs the adapter on the Jobs that name a LocalQueue and on the Workloads they
// own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&batchv1alpha1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[QueueNameLabel] != ""
		}))).
		// Owned Workloads, and a prebuilt one before the Job adopts it.
		Watches(newUnstructured(workloadGVK), handler.EnqueueRequestsFromMapFunc(r.jobsOfWorkload)).
		Complete(r)
}

// Reconcile takes one step of Kueue's contract for a Job.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := &batchv1alpha1.Job{}
	err := r.Get(ctx, req.NamespacedName, job)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.releaseOrphans(ctx, req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	queue := job.Labels[QueueNameLabel]
	if queue == "" {
		return ctrl.Result{}, nil
	}
	wl, raw, err := r.workloadOf(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if job.DeletionTimestamp != nil {
		return ctrl.Result{}, r.dropFinalizer(ctx, raw)
	}
	if done, success, message := finished(job); done {
		if wl != nil && !wl.finished() {
			if err := r.finish(ctx, raw, wl, success, message); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(job, raw, corev1.EventTypeNormal, ReasonFinishedWorkload, "Finish",
				"Workload %s is finished: its quota returns to ClusterQueue %s", wl.Name, clusterQueue(wl))
		}
		return ctrl.Result{}, r.dropFinalizer(ctx, raw)
	}
	if wl == nil {
		// Kueue's contract: a job with no Workload does not run.
		if err := r.stop(ctx, job, nil); err != nil {
			return ctrl.Result{}, err
		}
		if name := job.Labels[PrebuiltWorkloadLabel]; name != "" {
			// Made by whoever made the job (MultiKueue, before it creates the job): its
			// creation is an event of this controller.
			r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonWaitingForKueue, "Wait",
				"the job waits for its prebuilt Workload %s (label %s)", name, PrebuiltWorkloadLabel)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.createWorkload(ctx, job, queue)
	}
	if wl.finished() {
		return ctrl.Result{}, nil
	}
	if evicted := wl.condition(conditionEvicted); evicted != nil && evicted.Status == metav1.ConditionTrue {
		if !suspended(job) {
			r.Recorder.Eventf(job, raw, corev1.EventTypeNormal, ReasonEvicted, "Suspend",
				"Kueue evicted Workload %s (%s: %s): the job is suspended and its pods deleted", wl.Name, evicted.Reason, evicted.Message)
		}
		if err := r.stop(ctx, job, wl); err != nil {
			return ctrl.Result{}, err
		}
		if wl.reserved() && !active(job) {
			return ctrl.Result{}, r.releaseQuota(ctx, raw, wl, evicted)
		}
		return ctrl.Result{}, nil
	}
	if suspended(job) {
		if wl.admitted() {
			return ctrl.Result{}, r.start(ctx, job, raw, wl)
		}
		if wl.Spec.QueueName != queue {
			return ctrl.Result{}, r.patch(ctx, raw, map[string]any{"spec": map[string]any{"queueName": queue}})
		}
		if c := wl.condition(conditionQuotaReserved); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
			// Why Kueue does not admit it, e.g. "LocalQueue team-a doesn't exist" (the recorder
			// folds repeats of one message into a series).
			r.Recorder.Eventf(job, raw, corev1.EventTypeWarning, ReasonWaitingForKueue, "Wait",
				"Workload %s waits for Kueue: %s", wl.Name, c.Message)
		}
		return ctrl.Result{}, nil
	}
	if !wl.admitted() {
		return ctrl.Result{}, r.stop(ctx, job, wl)
	}
	return ctrl.Result{}, nil
}

func suspended(job *batchv1alpha1.Job) bool { return ptr.Deref(job.Spec.Suspend, false) }

// active: the Job may still have pods. A suspended Job is Aborted once the Job controller has
// deleted them all. A Job another manager runs has none here, whatever the status mirrored from
// where it runs says.
func active(job *batchv1alpha1.Job) bool {
	if runsElsewhere(job) {
		return false
	}
	s := job.Status
	if s.Pending+s.Running+s.Terminating+s.Unknown > 0 {
		return true
	}
	switch s.State.Phase {
	case batchv1alpha1.JobAborted, batchv1alpha1.JobCompleted, batchv1alpha1.JobFailed, batchv1alpha1.JobTerminated:
		return false
	}
	return true
}

// finished says whether the Job ended for good, and how.
func finished(job *batchv1alpha1.Job) (done, success bool, message string) {
	state := job.Status.State
	switch state.Phase {
	case batchv1alpha1.JobCompleted:
		return true, true, cmp.Or(state.Message, "the job completed")
	case batchv1alpha1.JobFailed, batchv1alpha1.JobTerminated:
		return true, false, cmp.Or(state.Message, "the job "+strings.ToLower(string(state.Phase)))
	}
	return false, false, ""
}

func clusterQueue(wl *workload) string {
	if wl.Status.Admission != nil {
		return wl.Status.Admission.ClusterQueue
	}
	return "(none)"
}

// WorkloadName is the name of a Job's Workload: the Job's name and a hash of its UID, so that a
// Job created again under the same name gets a Workload of its own.
func WorkloadName(job *batchv1alpha1.Job) string {
	sum := sha256.Sum256([]byte(job.UID))
	suffix := hex.EncodeToString(sum[:])[:5]
	name := "job-" + job.Name
	if max := 253 - len(suffix) - 1; len(name) > max {
		name = name[:max]
	}
	return name + "-" + suffix
}

// workloadOf returns the Job's Workload (nil if none), read and raw: the one it owns, or the
// prebuilt one it names.
func (r *Reconciler) workloadOf(ctx context.Context, job *batchv1alpha1.Job) (*workload, *unstructured.Unstructured, error) {
	if name := job.Labels[PrebuiltWorkloadLabel]; name != "" {
		return r.prebuiltWorkload(ctx, job, name)
	}
	list := newUnstructured(workloadListGVK)
	ulist := &unstructured.UnstructuredList{Object: list.Object}
	if err := r.List(ctx, ulist, client.InNamespace(job.Namespace), client.MatchingLabels{JobUIDLabel: string(job.UID)}); err != nil {
		return nil, nil, fmt.Errorf("listing the Workloads of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	for i := range ulist.Items {
		raw := &ulist.Items[i]
		if !metav1.IsControlledBy(raw, job) {
			continue
		}
		wl, err := fromUnstructured(raw)
		if err != nil {
			return nil, nil, err
		}
		return wl, raw, nil
	}
	return nil, nil, nil
}

// createWorkload makes the Job's Workload: one pod set per task, with the task's minimum as the
// pod set's minimum count (Kueue's partial admission), and the Job's priority.
func (r *Reconciler) createWorkload(ctx context.Context, job *batchv1alpha1.Job, queue string) error {
	wl := workload{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: workloadGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:       WorkloadName(job),
			Namespace:  job.Namespace,
			Labels:     map[string]string{JobUIDLabel: string(job.UID)},
			Finalizers: []string{ResourceInUseFinalizer},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job,
				batchv1alpha1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: workloadSpec{QueueName: queue, PodSets: podSets(job)},
	}
	var err error
	if wl.Spec.PriorityClassRef, wl.Spec.Priority, err = r.priority(ctx, job); err != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonCannotStart, "CreateWorkload", "%v", err)
		return err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wl)
	if err != nil {
		return err
	}
	delete(obj, "status")
	raw := &unstructured.Unstructured{Object: obj}
	if err := r.Create(ctx, raw); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache is behind: the next event shows it
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonCannotStart, "CreateWorkload",
			"cannot create Workload %s for LocalQueue %s: %v", wl.Name, queue, err)
		return fmt.Errorf("creating Workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	r.Recorder.Eventf(job, raw, corev1.EventTypeNormal, ReasonCreatedWorkload, "CreateWorkload",
		"created Workload %s in LocalQueue %s: the job stays suspended until Kueue admits it", wl.Name, queue)
	return nil
}

// podSetName is a task's pod set: Kueue's pod set names are lowercase DNS labels.
func podSetName(task string) string { return strings.ToLower(task) }

// podSets are the Job's tasks as Kueue's pod sets.
func podSets(job *batchv1alpha1.Job) []podSet {
	sets := make([]podSet, 0, len(job.Spec.Tasks))
	for _, t := range job.Spec.Tasks {
		ps := podSet{Name: podSetName(t.Name), Template: *t.Template.DeepCopy(), Count: t.Replicas}
		if t.MinAvailable != nil && *t.MinAvailable < t.Replicas {
			ps.MinCount = ptr.To(*t.MinAvailable)
		}
		sets = append(sets, ps)
	}
	return sets
}

// priority is the Workload's priority: a WorkloadPriorityClass the Job names by label (Kueue's
// own rule), else the PriorityClass of its pods.
func (r *Reconciler) priority(ctx context.Context, job *batchv1alpha1.Job) (*priorityClassRef, *int32, error) {
	if name := job.Labels[PriorityClassLabel]; name != "" {
		wpc := newUnstructured(GroupVersion.WithKind("WorkloadPriorityClass"))
		if err := r.Get(ctx, types.NamespacedName{Name: name}, wpc); err != nil {
			return nil, nil, fmt.Errorf("WorkloadPriorityClass %s of label %s: %w", name, PriorityClassLabel, err)
		}
		value, _, _ := unstructured.NestedInt64(wpc.Object, "value")
		return &priorityClassRef{Group: GroupVersion.Group, Kind: "WorkloadPriorityClass", Name: name}, ptr.To(int32(value)), nil
	}
	if name := job.Spec.PriorityClassName; name != "" {
		pc := &schedulingv1.PriorityClass{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, pc); err != nil {
			return nil, nil, fmt.Errorf("PriorityClass %s of spec.priorityClassName: %w", name, err)
		}
		return &priorityClassRef{Group: schedulingv1.GroupName, Kind: "PriorityClass", Name: name}, ptr.To(pc.Value), nil
	}
	return nil, nil, nil
}

// start resumes an admitted Job on what Kueue assigned: each task on its flavors' node labels
// and tolerations, and with the count admitted when Kueue admitted fewer than its replicas.
func (r *Reconciler) start(ctx context.Context, job *batchv1alpha1.Job, raw *unstructured.Unstructured, wl *workload) error {
	if wl.Status.Admission == nil {
		return nil // Admitted with no admission yet: Kueue writes both, and the next event has it
	}
	updated := job.DeepCopy()
	assignments := map[string]podSetAssignment{}
	for _, a := range wl.Status.Admission.PodSetAssignments {
		assignments[a.Name] = a
	}
	flavors := map[string]*resourceFlavor{}
	for i := range updated.Spec.Tasks {
		t := &updated.Spec.Tasks[i]
		a, ok := assignments[podSetName(t.Name)]
		if !ok {
			r.Recorder.Eventf(job, raw, corev1.EventTypeWarning, ReasonCannotStart, "Start",
				"Workload %s admits no pod set %s for task %s", wl.Name, podSetName(t.Name), t.Name)
			return nil
		}
		names := slices.Sorted(maps.Values(a.Flavors))
		for _, name := range slices.Compact(names) {
			f, err := r.flavor(ctx, flavors, name)
			if err != nil {
				return err
			}
			for k, v := range f.Spec.NodeLabels {
				if t.Template.Spec.NodeSelector == nil {
					t.Template.Spec.NodeSelector = map[string]string{}
				}
				t.Template.Spec.NodeSelector[k] = v
			}
			t.Template.Spec.Tolerations = append(t.Template.Spec.Tolerations, f.Spec.Tolerations...)
		}
		if a.Count != nil && *a.Count < t.Replicas {
			t.Replicas = *a.Count
		}
	}
	updated.Spec.Suspend = ptr.To(false)
	if err := r.Patch(ctx, updated, client.MergeFromWithOptions(job, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsInvalid(err) {
			r.Recorder.Eventf(job, raw, corev1.EventTypeWarning, ReasonCannotStart, "Start",
				"Kueue admitted Workload %s but the job cannot take what it assigned: %v", wl.Name, err)
		}
		return fmt.Errorf("starting job %s/%s: %w", job.Namespace, job.Name, err)
	}
	where := "the job runs"
	if runsElsewhere(job) {
		where = fmt.Sprintf("%s runs the job on worker cluster %s", *job.Spec.ManagedBy, ptr.Deref(wl.Status.ClusterName, "(unknown)"))
	}
	r.Recorder.Eventf(job, raw, corev1.EventTypeNormal, ReasonAdmitted, "Start",
		"Kueue admitted Workload %s in ClusterQueue %s: %s", wl.Name, wl.Status.Admission.ClusterQueue, where)
	return nil
}

func (r *Reconciler) flavor(ctx context.Context, seen map[string]*resourceFlavor, name string) (*resourceFlavor, error) {
	if f := seen[name]; f != nil {
		return f, nil
	}
	u := newUnstructured(resourceFlavorGVK)
	if err := r.Get(ctx, types.NamespacedName{Name: name}, u); err != nil {
		return nil, fmt.Errorf("ResourceFlavor %s: %w", name, err)
	}
	f := &resourceFlavor{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, f); err != nil {
		return nil, fmt.Errorf("ResourceFlavor %s: %w", name, err)
	}
	seen[name] = f
	return f, nil
}

// stop suspends the Job, which makes the Job controller delete its pods, and gives its tasks back
// the templates and replicas they had before Kueue's assignment (the Workload's pod sets).
func (r *Reconciler) stop(ctx context.Context, job *batchv1alpha1.Job, wl *workload) error {
	updated := job.DeepCopy()
	updated.Spec.Suspend = ptr.To(true)
	if wl != nil {
		sets := map[string]podSet{}
		for _, ps := range wl.Spec.PodSets {
			sets[ps.Name] = ps
		}
		for i := range updated.Spec.Tasks {
			t := &updated.Spec.Tasks[i]
			ps, ok := sets[podSetName(t.Name)]
			if !ok {
				continue
			}
			t.Template.Spec.NodeSelector = ps.Template.Spec.NodeSelector
			t.Template.Spec.Tolerations = ps.Template.Spec.Tolerations
			t.Replicas = ps.Count
		}
	}
	if apiequality.Semantic.DeepEqual(updated.Spec, job.Spec) {
		return nil
	}
	if err := r.Patch(ctx, updated, client.MergeFromWithOptions(job, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("suspending job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// releaseQuota gives back the quota of an evicted Workload whose Job has no pods left, as
// Kueue's job integrations do: no reservation, QuotaReserved false, and Requeued for an eviction
// by preemption or node failure (Kueue may admit it again).
func (r *Reconciler) releaseQuota(ctx context.Context, raw *unstructured.Unstructured, wl *workload, evicted *metav1.Condition) error {
	now := metav1.Now()
	conditions := slices.Clone(wl.Status.Conditions)
	set := func(c metav1.Condition) {
		c.LastTransitionTime, c.ObservedGeneration = now, wl.Generation
		for i := range conditions {
			if conditions[i].Type == c.Type {
				if conditions[i].Status == c.Status {
					c.LastTransitionTime = conditions[i].LastTransitionTime
				}
				conditions[i] = c
				return
			}
		}
		conditions = append(conditions, c)
	}
	requeued := metav1.ConditionFalse
	if evicted.Reason == "Preempted" || evicted.Reason == "NodeFailures" {
		requeued = metav1.ConditionTrue
	}
	set(metav1.Condition{Type: conditionRequeued, Status: requeued, Reason: evicted.Reason, Message: truncate(evicted.Message)})
	set(metav1.Condition{Type: conditionQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: truncate(evicted.Message)})
	if wl.admitted() {
		set(metav1.Condition{Type: conditionAdmitted, Status: metav1.ConditionFalse, Reason: "NoReservation", Message: "The workload has no reservation"})
	}
	return r.patchStatus(ctx, raw, map[string]any{"admission": nil, "conditions": conditions})
}

// finish marks the Workload finished, which returns its quota.
func (r *Reconciler) finish(ctx context.Context, raw *unstructured.Unstructured, wl *workload, success bool, message string) error {
	reason := "Succeeded"
	if !success {
		reason = "Failed"
	}
	return r.finishAs(ctx, raw, wl, reason, message)
}

// finishAs marks the Workload finished for a reason of Kueue's (Succeeded, Failed, OutOfSync).
func (r *Reconciler) finishAs(ctx context.Context, raw *unstructured.Unstructured, wl *workload, reason, message string) error {
	conditions := slices.DeleteFunc(slices.Clone(wl.Status.Conditions), func(c metav1.Condition) bool { return c.Type == conditionFinished })
	conditions = append(conditions, metav1.Condition{
		Type: conditionFinished, Status: metav1.ConditionTrue, Reason: reason, Message: truncate(message),
		LastTransitionTime: metav1.Now(), ObservedGeneration: wl.Generation,
	})
	return r.patchStatus(ctx, raw, map[string]any{"conditions": conditions})
}

// dropFinalizer removes Kueue's resource-in-use finalizer once the Job ended or is going: its
// quota is no longer in use.
func (r *Reconciler) dropFinalizer(ctx context.Context, raw *unstructured.Unstructured) error {
	if raw == nil || !slices.Contains(raw.GetFinalizers(), ResourceInUseFinalizer) {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(raw.GetFinalizers()), func(f string) bool { return f == ResourceInUseFinalizer })
	return client.IgnoreNotFound(r.patch(ctx, raw, map[string]any{"metadata": map[string]any{"finalizers": kept}}))
}

// releaseOrphans drops the finalizer of Workloads whose Job is gone (a Job deleted while the
// adapter was down, or removed by the garbage collector before this adapter saw it go).
func (r *Reconciler) releaseOrphans(ctx context.Context, key types.NamespacedName) error {
	list := newUnstructured(workloadListGVK)
	ulist := &unstructured.UnstructuredList{Object: list.Object}
	if err := r.List(ctx, ulist, client.InNamespace(key.Namespace)); err != nil {
		return err
	}
	for i := range ulist.Items {
		raw := &ulist.Items[i]
		owner := metav1.GetControllerOf(raw)
		if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1alpha1.SchemeGroupVersion.String() || owner.Name != key.Name {
			continue
		}
		if err := r.dropFinalizer(ctx, raw); err != nil {
			return err
		}
	}
	return nil
}

// patch merges fields into a Workload, on the version read (a conflict retries the step).
func (r *Reconciler) patch(ctx context.Context, raw *unstructured.Unstructured, fields map[string]any) error {
	return r.Patch(ctx, raw, mergePatch(raw, fields))
}

// patchStatus merges fields into a Workload's status, on the version read.
func (r *Reconciler) patchStatus(ctx context.Context, raw *unstructured.Unstructured, status map[string]any) error {
	return r.Status().Patch(ctx, raw, mergePatch(raw, map[string]any{"status": status}))
}

func mergePatch(raw *unstructured.Unstructured, fields map[string]any) client.Patch {
	metadata, _ := fields["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
	}
	metadata["resourceVersion"] = raw.GetResourceVersion()
	fields["metadata"] = metadata
	data, _ := json.Marshal(fields)
	return client.RawPatch(types.MergePatchType, data)
}

// truncate keeps a condition message within the API's 32 KiB.
func truncate(message string) string {
	const limit = 32 * 1024
	if len(message) <= limit {
		return message
	}
	return message[:limit-3] + "..."
}
