package job

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// podGroupChange compares the job's PodGroup with the spec decided for it, and returns the group
// to write: a new one if it is missing, or the existing one with the minimum the job decides.
// Only those fields are the job's; others (scheduleTimeoutSeconds) are left to whoever set them.
// changed is false when there is nothing to write: spec is nil (the group is left alone), the
// group is as decided, or it is someone else's (returned, not to be written). previousMin is the
// existing group's minMember (0 for a new one).
func (r *Reconciler) podGroupChange(ctx context.Context, job *batchv1alpha1.Job, spec *schedulingv1alpha1.PodGroupSpec, jobMin int32) (groupChange, error) {
	if spec == nil {
		return groupChange{}, nil
	}
	group := &schedulingv1alpha1.PodGroup{}
	err := r.Get(ctx, client.ObjectKeyFromObject(job), group)
	if apierrors.IsNotFound(err) {
		return groupChange{changed: true, group: &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{
				Name: job.Name, Namespace: job.Namespace,
				Labels:      map[string]string{batchv1alpha1.JobNameLabel: job.Name},
				Annotations: groupAnnotations(job, jobMin),
				OwnerReferences: []metav1.OwnerReference{
					*metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job")),
				},
			},
			Spec: *spec,
		}}, nil
	}
	if err != nil {
		return groupChange{}, fmt.Errorf("get pod group %s/%s: %w", job.Namespace, job.Name, err)
	}
	if !metav1.IsControlledBy(group, job) {
		// Someone else's group of the same name: the pods join it as it is.
		return groupChange{group: group, previousMin: group.Spec.MinMember}, nil
	}
	want := group.DeepCopy()
	want.Spec.MinMember, want.Spec.MinTaskMember, want.Spec.MinResources = spec.MinMember, spec.MinTaskMember, spec.MinResources
	want.Spec.Queue, want.Spec.PriorityClassName = spec.Queue, spec.PriorityClassName
	want.Spec.RuntimeEstimateSeconds = spec.RuntimeEstimateSeconds
	want.Spec.SubGroups, want.Spec.DisruptionMode = spec.SubGroups, spec.DisruptionMode
	for _, key := range passedToGroup {
		value, has := job.Annotations[key]
		if old, had := group.Annotations[key]; has && (!had || old != value) {
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			want.Annotations[key] = value
		} else if had && !has {
			delete(want.Annotations, key)
		}
	}
	if minimum := strconv.Itoa(int(jobMin)); jobMin > 0 && want.Annotations[schedulingv1alpha1.JobMinMemberAnnotation] != minimum {
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[schedulingv1alpha1.JobMinMemberAnnotation] = minimum
	}
	changed := !equality.Semantic.DeepEqual(group.Spec, want.Spec) || !equality.Semantic.DeepEqual(group.Annotations, want.Annotations)
	return groupChange{group: want, previousMin: group.Spec.MinMember, changed: changed}, nil
}

// groupChange is what a decision does to the job's PodGroup: the group as it should be (nil for
// none), its minimum before, and whether it must be written.
type groupChange struct {
	group       *schedulingv1alpha1.PodGroup
	previousMin int32
	changed     bool
}

// groupAnnotations are the annotations a job's new PodGroup carries: those passed to the group
// (passedToGroup), and the job's whole minimum, which the PodGroup controller compares minMember
// with (condition MinMemberLowered).
func groupAnnotations(job *batchv1alpha1.Job, jobMin int32) map[string]string {
	out := map[string]string{}
	for _, key := range passedToGroup {
		if value, ok := job.Annotations[key]; ok {
			out[key] = value
		}
	}
	if jobMin > 0 {
		out[schedulingv1alpha1.JobMinMemberAnnotation] = strconv.Itoa(int(jobMin))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// writePodGroup creates or updates the job's PodGroup as podGroupChange decided; created says
// whether it created it.
func (r *Reconciler) writePodGroup(ctx context.Context, job *batchv1alpha1.Job, group *schedulingv1alpha1.PodGroup, previousMin int32) (created bool, err error) {
	if group.ResourceVersion == "" {
		if err := r.Create(ctx, group); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return false, nil // the cache had not shown it yet; the next decision compares with it
			}
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return false, errNamespaceTerminating
			}
			// Said on the job: its pods, created beside the group, wait for it without a word.
			r.event(job, corev1.EventTypeWarning, "FailedCreatePodGroup", "Create", "creating PodGroup %s: %v; the job's pods wait for it, and it is tried again", group.Name, err)
			return false, fmt.Errorf("create pod group %s/%s: %w", job.Namespace, job.Name, err)
		}
		return true, nil
	}
	if err := r.Update(ctx, group); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil // the group's change is on its way as an event
		}
		r.event(job, corev1.EventTypeWarning, "FailedUpdatePodGroup", "Update", "updating PodGroup %s: %v; it is tried again", group.Name, err)
		return false, fmt.Errorf("update pod group %s/%s: %w", job.Namespace, job.Name, err)
	}
	if from, to := previousMin, group.Spec.MinMember; from > 0 && to < from {
		// Never behind the user's back: the minimum of a finishing job falls as its pods succeed.
		msg := fmt.Sprintf("minMember of PodGroup %s lowered from %d to %d as the job's pods succeed: a pod that succeeded does not run again, and the gang needs only the pods still to run",
			group.Name, from, to)
		r.event(job, corev1.EventTypeNormal, "MinMemberLowered", "Update", "%s", msg)
		if r.Recorder != nil {
			r.Recorder.Eventf(group, job, corev1.EventTypeNormal, "MinMemberLowered", "Update", "%s", msg)
		}
	}
	return false, nil
}
