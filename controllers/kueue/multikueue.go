package kueue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// MultiKueue (Kueue's dispatch across clusters) meets this adapter on both sides:
//   - On the manager cluster a Job has spec.managedBy kueue.x-k8s.io/multikueue. The adapter
//     makes its Workload and suspends and resumes it as Kueue decides, as for any Job, but no pod
//     of it ever runs there: the Job controller leaves it to MultiKueue, which copies it to the
//     worker that admits its Workload and mirrors that copy's status back. So the Job never holds
//     anything on the manager, and an evicted Workload's quota is released at once
//     (runsElsewhere); this is how a lost worker's job goes back to the queue.
//   - On a worker, MultiKueue first copies the manager's Workload, then creates the Job without
//     managedBy and with the label kueue.x-k8s.io/prebuilt-workload-name. The adapter adopts that
//     Workload instead of making one (prebuiltWorkload), as Kueue's jobframework does, and the
//     Job runs there as any Job under Kueue.

// runsElsewhere: another manager runs the Job's pods (spec.managedBy), so none of them is here.
func runsElsewhere(job *batchv1alpha1.Job) bool {
	return ptr.Deref(job.Spec.ManagedBy, batchv1alpha1.JobControllerManager) != batchv1alpha1.JobControllerManager
}

// prebuiltWorkload returns the Workload a Job names by PrebuiltWorkloadLabel, read and raw, once
// it is the Job's: a Workload of no owner yet is adopted (controller reference and job-uid label),
// one that another object controls is not the Job's (nil). A Workload whose pod sets no longer
// match the Job is finished as out of sync, as Kueue does, and is not used.
func (r *Reconciler) prebuiltWorkload(ctx context.Context, job *batchv1alpha1.Job, name string) (*workload, *unstructured.Unstructured, error) {
	raw := newUnstructured(workloadGVK)
	if err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, raw); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading prebuilt Workload %s/%s of job %s: %w", job.Namespace, name, job.Name, err)
	}
	if owner := metav1.GetControllerOfNoCopy(raw); owner != nil && owner.UID != job.UID {
		r.Recorder.Eventf(job, raw, corev1.EventTypeWarning, ReasonWaitingForKueue, "Wait",
			"prebuilt Workload %s belongs to %s %s: the job waits for a Workload of its own", name, owner.Kind, owner.Name)
		return nil, nil, nil
	}
	if !metav1.IsControlledBy(raw, job) {
		refs := append(raw.GetOwnerReferences(), *metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job")))
		labels := raw.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[JobUIDLabel] = string(job.UID)
		if err := r.patch(ctx, raw, map[string]any{"metadata": map[string]any{"ownerReferences": refs, "labels": labels}}); err != nil {
			return nil, nil, fmt.Errorf("adopting prebuilt Workload %s/%s for job %s: %w", job.Namespace, name, job.Name, err)
		}
	}
	wl, err := fromUnstructured(raw)
	if err != nil {
		return nil, nil, err
	}
	if !wl.finished() && !samePodSets(wl.Spec.PodSets, podSets(job)) {
		message := fmt.Sprintf("the prebuilt Workload is out of sync with job %s: its pod sets differ from the job's tasks", job.Name)
		if err := r.finishAs(ctx, raw, wl, "OutOfSync", message); err != nil {
			return nil, nil, err
		}
		r.Recorder.Eventf(job, raw, corev1.EventTypeWarning, ReasonCannotStart, "Adopt", "%s", message)
		return nil, nil, nil
	}
	return wl, raw, nil
}

// samePodSets: the Workload asks for what the Job's tasks are, pod set by pod set (names,
// counts and minimums; a template differs only where Kueue placed it).
func samePodSets(have, want []podSet) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		if have[i].Name != want[i].Name || have[i].Count != want[i].Count ||
			ptr.Deref(have[i].MinCount, -1) != ptr.Deref(want[i].MinCount, -1) {
			return false
		}
	}
	return true
}

// jobsOfWorkload maps a Workload event to the Job it belongs to: its controller, or, for a
// prebuilt Workload not adopted yet, the Jobs that name it.
func (r *Reconciler) jobsOfWorkload(ctx context.Context, o client.Object) []reconcile.Request {
	if owner := metav1.GetControllerOfNoCopy(o); owner != nil {
		if owner.Kind != "Job" || owner.APIVersion != batchv1alpha1.SchemeGroupVersion.String() {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name}}}
	}
	jobs := &batchv1alpha1.JobList{}
	if err := r.List(ctx, jobs, client.InNamespace(o.GetNamespace()), client.MatchingLabels{PrebuiltWorkloadLabel: o.GetName()}); err != nil {
		return nil
	}
	requests := make([]reconcile.Request, 0, len(jobs.Items))
	for _, j := range jobs.Items {
		requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: j.Name}})
	}
	return requests
}
