package foreign

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
)

// A JobSet (sigs.k8s.io/jobset) is a gang of its child Jobs. JobSet has no gang API of its own,
// so its pods find their group by JobSet's own labels (schedulingv1alpha1.PodGroupNameOf: the
// JobSet's name, after every other group label; SubGroupOf: "<replicated job>-<index>"), and this
// adapter makes that group: a Tephra PodGroup of the JobSet's name, controlled by it, with a
// sub-group per child Job. Only JobSets whose pods Tephra schedules are mirrored (a template's
// schedulerName among --scheduler-names); the pods of the others count in no queue.
//
// Each child Job's sub-group has the Job's parallelism as its minimum (its completions if fewer).
// scheduling.tephra.dev/exclusive-topology on the JobSet, or on a replicated job's template,
// places each of its Jobs whole in a domain of that node label that no other Job of the JobSet
// shares. JobSet's own alpha.jobset.sigs.k8s.io/exclusive-topology cannot be used with a gang
// (under any gang scheduler): JobSet's webhook refuses a Job's other pods until the Job's first
// pod is bound, and a gang binds none of its pods before they all exist. A JobSet that sets it
// gets a Warning event that names Tephra's annotation instead.

// JobSetControllerName names the JobSet adapter, in logs and as its events' reporter.
const JobSetControllerName = "jobset-adapter"

// JobSetGVK is the JobSet API the adapter reads.
var JobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}

// jobSetExclusiveTopologyAnnotation is JobSet's own exclusive placement (see above).
const jobSetExclusiveTopologyAnnotation = "alpha.jobset.sigs.k8s.io/exclusive-topology"

// ReasonJobSetExclusiveTopology is the Warning on a JobSet that uses JobSet's own exclusive
// placement.
const ReasonJobSetExclusiveTopology = "ExclusiveTopologyBlocksGang"

// maxSubGroups is how many sub-groups a Tephra PodGroup holds (its CRD's maxItems).
const maxSubGroups = 128

// jobSet is what the adapter reads of a JobSet: its replicated jobs. JobSet's Go types are not
// imported (their module's graph is JobSet's own); the fields are read from the object.
type jobSet struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ReplicatedJobs []replicatedJob `json:"replicatedJobs"`
	} `json:"spec"`
}

type replicatedJob struct {
	Name     string                  `json:"name"`
	Replicas *int32                  `json:"replicas,omitempty"`
	Template batchv1.JobTemplateSpec `json:"template"`
}

// JobSetReconciler mirrors the JobSets whose pods Tephra schedules into Tephra PodGroups.
type JobSetReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// SchedulerNames are the schedulers whose pods Tephra places (tephra-controllers'
	// --scheduler-names).
	SchedulerNames []string
}

// SetupWithManager runs the reconciler on changes of JobSets and of their mirrors.
func (r *JobSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	js := &unstructured.Unstructured{}
	js.SetGroupVersionKind(JobSetGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named(JobSetControllerName).
		For(js).
		Owns(&schedulingv1alpha1.PodGroup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: mirror.Workers}).
		Complete(r)
}

// Reconcile mirrors one JobSet.
func (r *JobSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(JobSetGVK)
	if err := r.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if u.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	var js jobSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &js); err != nil {
		mirror.Invalid(r.Recorder, u, "cannot read the JobSet: %v", err)
		return ctrl.Result{}, nil
	}
	if !r.scheduledByTephra(&js) {
		return ctrl.Result{}, nil
	}
	if key := jobSetExclusiveTopology(&js); key != "" {
		r.Recorder.Eventf(u, nil, corev1.EventTypeWarning, ReasonJobSetExclusiveTopology, "Mirror",
			"%s: JobSet creates a Job's other pods only once its first pod is bound, and a gang binds none of its pods before they all exist, so the JobSet cannot start. Use %s: %s instead: each Job then goes whole to a %s domain of its own (docs/gang.md, JobSet)",
			jobSetExclusiveTopologyAnnotation, schedulingv1alpha1.ExclusiveTopologyAnnotation, key, key)
	}
	spec, problem := jobSetGroupSpec(&js)
	if problem != "" {
		mirror.Invalid(r.Recorder, u, "%s", problem)
		return ctrl.Result{}, nil
	}
	_, err := mirror.SyncPodGroup(ctx, r.Client, r.Recorder, u, JobSetGVK, spec, nil)
	return ctrl.Result{}, err
}

// scheduledByTephra says whether Tephra places the JobSet's pods: a template asks for one of its
// schedulers (an unset schedulerName is the default scheduler's).
func (r *JobSetReconciler) scheduledByTephra(js *jobSet) bool {
	for _, rj := range js.Spec.ReplicatedJobs {
		name := rj.Template.Spec.Template.Spec.SchedulerName
		if name == "" {
			name = corev1.DefaultSchedulerName
		}
		if slices.Contains(r.SchedulerNames, name) {
			return true
		}
	}
	return false
}

// jobSetExclusiveTopology is JobSet's own exclusive placement on the JobSet or a replicated job
// ("" if none).
func jobSetExclusiveTopology(js *jobSet) string {
	if key := js.Annotations[jobSetExclusiveTopologyAnnotation]; key != "" {
		return key
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if key := rj.Template.Annotations[jobSetExclusiveTopologyAnnotation]; key != "" {
			return key
		}
	}
	return ""
}

// jobSetGroupSpec is the PodGroup of a JobSet: a sub-group per child Job, whose minimum is the
// pods the Job runs at once, exclusive in a domain of Tephra's exclusive-topology annotation
// where the JobSet or the replicated job sets it; the group's minimum is theirs summed. problem
// says why the JobSet cannot be mirrored.
func jobSetGroupSpec(js *jobSet) (spec schedulingv1alpha1.PodGroupSpec, problem string) {
	spec.Queue = js.Labels[schedulingv1alpha1.QueueLabel]
	var subGroups []schedulingv1alpha1.SubGroup
	for _, rj := range js.Spec.ReplicatedJobs {
		replicas := int32(1)
		if rj.Replicas != nil {
			replicas = *rj.Replicas
		}
		job := rj.Template.Spec
		size := int32(1)
		if job.Parallelism != nil {
			size = *job.Parallelism
		}
		if job.Completions != nil {
			size = min(size, *job.Completions)
		}
		if size < 1 || replicas < 1 {
			continue // a Job that runs no pod
		}
		if spec.PriorityClassName == "" {
			spec.PriorityClassName = job.Template.Spec.PriorityClassName
		}
		key := rj.Template.Annotations[schedulingv1alpha1.ExclusiveTopologyAnnotation]
		if key == "" {
			key = js.Annotations[schedulingv1alpha1.ExclusiveTopologyAnnotation]
		}
		for i := range replicas {
			name := schedulingv1alpha1.JobSetSubGroup(rj.Name, strconv.Itoa(int(i)))
			if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
				return spec, fmt.Sprintf("the sub-group of child Job %d of replicated job %s, %q, is not a label value: %s", i, rj.Name, name, errs[0])
			}
			sub := schedulingv1alpha1.SubGroup{Name: name, MinMember: size}
			if key != "" {
				sub.Topology = &schedulingv1alpha1.PodGroupTopology{Required: key}
				sub.Exclusive = true
			}
			subGroups = append(subGroups, sub)
			spec.MinMember += size
		}
	}
	if len(subGroups) > maxSubGroups {
		for _, sub := range subGroups {
			if sub.Exclusive {
				return spec, fmt.Sprintf("%s places each of its %d child Jobs in a domain of its own, and a Tephra PodGroup holds at most %d sub-groups", schedulingv1alpha1.ExclusiveTopologyAnnotation, len(subGroups), maxSubGroups)
			}
		}
		// Too many Jobs to follow one by one: one gang of all their pods.
		subGroups = nil
	}
	spec.SubGroups = subGroups
	return spec, ""
}
