package v1alpha1

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// SystemCriticalPriority is the priority of the system-cluster-critical PriorityClass
// (scheduling.SystemCriticalPriority in k8s.io/kubernetes, which the API types do not import).
const SystemCriticalPriority int32 = 2000000000

// PodGroupNameOf returns the name of the PodGroup (in the pod's namespace) that a pod belongs to,
// by Tephra's label or, for manifests written for other schedulers, upstream Kubernetes'
// spec.schedulingGroup.podGroupName (scheduling.k8s.io/v1beta1), scheduler-plugins' label,
// Volcano's annotations (scheduling.k8s.io/group-name, then scheduling.volcano.sh/group-name) or,
// for a pod of a JobSet, its JobSet's name, in that order. Tephra's label wins so that a user can
// always override; the upstream field comes next because it is part of the pod's spec, set by the
// controller that created the pod and immutable, where the labels and annotations are free-form;
// JobSet's label comes last because operators that build on JobSet (Kubeflow Trainer) name a
// group of their own. ok is false for a pod that names no group: it is a group of one.
func PodGroupNameOf(pod *corev1.Pod) (name string, ok bool) {
	name, ok, _ = podGroupOf(pod)
	return name, ok
}

// podGroupOf is PodGroupNameOf, and whether the group is the pod's JobSet's.
func podGroupOf(pod *corev1.Pod) (name string, ok, jobSet bool) {
	if name, ok = pod.Labels[PodGroupLabel]; ok {
		return name, true, false
	}
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName, true, false
	}
	if name, ok = pod.Labels[CoschedulingPodGroupLabel]; ok {
		return name, true, false
	}
	if name, ok = pod.Annotations[VolcanoGroupNameAnnotation]; ok {
		return name, true, false
	}
	if name, ok = pod.Annotations[VolcanoOwnGroupNameAnnotation]; ok {
		return name, true, false
	}
	name, ok = pod.Labels[JobSetNameLabel]
	return name, ok, ok
}

// InvalidPodGroupName says why a group name taken from a pod cannot name a PodGroup, or "" if
// it can.
func InvalidPodGroupName(name string) string {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errs[0]
	}
	return ""
}

// TaskOf returns the task a pod belongs to within its group ("" if none): Tephra's task label,
// else Volcano's volcano.sh/task-spec label or annotation.
func TaskOf(pod *corev1.Pod) string {
	if task, ok := pod.Labels[TaskLabel]; ok {
		return task
	}
	if task, ok := pod.Labels[VolcanoTaskSpecKey]; ok {
		return task
	}
	return pod.Annotations[VolcanoTaskSpecKey]
}

// SubGroupOf returns the sub-group of its group that a pod belongs to ("" if none): its label
// scheduling.tephra.dev/subgroup, else, for a pod in its JobSet's group, its child Job
// (JobSetSubGroup).
func SubGroupOf(pod *corev1.Pod) string {
	if sub, ok := pod.Labels[SubGroupLabel]; ok {
		return sub
	}
	replicatedJob, index := pod.Labels[JobSetReplicatedJobLabel], pod.Labels[JobSetJobIndexLabel]
	if replicatedJob == "" || index == "" {
		return ""
	}
	if _, _, jobSet := podGroupOf(pod); !jobSet {
		return ""
	}
	return JobSetSubGroup(replicatedJob, index)
}

// JobSetSubGroup names the sub-group of a JobSet's child Job in the JobSet's group: its
// replicated job and its index there ("workers-0").
func JobSetSubGroup(replicatedJob, index string) string {
	return replicatedJob + "-" + index
}

// Unschedulable reasons that tephra-scheduler puts at the start of its messages
// ("Reason: details"), so that the PodGroup controller can show them on the group.
const (
	// ReasonNotEnoughResources: fewer than minMember pods of the group could be placed.
	ReasonNotEnoughResources = "NotEnoughResources"
	// ReasonPodGroupNotFound: the pod names a PodGroup that does not exist.
	ReasonPodGroupNotFound = "PodGroupNotFound"
	// ReasonInvalidPodGroup: the pod's group link is malformed.
	ReasonInvalidPodGroup = "InvalidPodGroup"
	// ReasonWaitingForMembers: fewer than minMember (or a task's minTaskMember) pods exist.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonWaitingForPilot: the group's minimum is not placed and another member is tried
	// first; the others follow once it finds room for the minimum.
	ReasonWaitingForPilot = "WaitingForPilot"
	// ReasonTimeout: the group's placed members waited scheduleTimeoutSeconds for the rest.
	ReasonTimeout = "ScheduleTimeout"
	// ReasonQueueForbidden: the pod's namespace may not use its queue (the namespaceSelector of
	// the queue or of an ancestor does not match it).
	ReasonQueueForbidden = "QueueForbidden"
	// ReasonBackingOff: the group waits out its backoff after its bound members were evicted
	// for missing its ready timeout.
	ReasonBackingOff = "BackingOff"
)

// ReasonPodGroupUnready is the reason of the DisruptionTarget condition of a pod that
// tephra-controllers evicts because its group's minimum was not bound and Running within the
// group's ready timeout (spec.readyTimeoutSeconds), and of the Warning event on the group. The Job
// controller reads such an eviction as the PodGroupUnready policy event.
const ReasonPodGroupUnready = "PodGroupUnready"

// ReasonMovedForGang is the reason of the DisruptionTarget condition, and of the Warning event, of
// a pod that tephra-scheduler moves to make whole nodes for a waiting gang: the pod declared
// itself movable (MovableAnnotation) or ran above its group's minimum. The Job controller reads
// the eviction as PodEvicted, and creates the pod again (docs/consolidation.md).
const ReasonMovedForGang = "MovedForGang"

// ReasonConsolidating is the reason of the event on a waiting gang's PodGroup for which pods are
// moved (ReasonMovedForGang), naming them and the nodes reserved for the gang.
const ReasonConsolidating = "Consolidating"

// DeclaresMovable says whether an object (a pod, a PodGroup, a Job) declares its pods movable
// (MovableAnnotation).
func DeclaresMovable(annotations map[string]string) bool {
	return annotations[MovableAnnotation] == "true"
}

// CountsInQueues says whether a pod's requests count against Tephra's queues: pods of a scheduler
// that serves queues (schedulerNames: the profiles of tephra-scheduler that enable TephraQueue,
// "default-scheduler" too when Tephra replaces the default scheduler), and pods of any scheduler
// that name a queue or a pod group (a JobSet's group aside: every JobSet's pods carry its label,
// whichever scheduler they ask for). System pods never count (IsSystemPod). The scheduler's
// ledger and the Queue controller both use this rule, with the same names, so they agree on
// every queue's usage.
func CountsInQueues(pod *corev1.Pod, schedulerNames []string) bool {
	if IsSystemPod(pod) {
		return false
	}
	if slices.Contains(schedulerNames, pod.Spec.SchedulerName) {
		return true
	}
	if _, ok := pod.Labels[QueueLabel]; ok {
		return true
	}
	_, ok, jobSet := podGroupOf(pod)
	return ok && !jobSet
}

// IsSystemPod says whether a pod keeps the cluster itself running: it is in kube-system, or its
// priority is system-cluster-critical or above. No queue or gang holds such a pod back, and it
// preempts as upstream kube-scheduler's would: when Tephra is the default scheduler, DNS, CNI
// and the like must not wait for a queue's capability or a closed default queue.
func IsSystemPod(pod *corev1.Pod) bool {
	return pod.Namespace == metav1.NamespaceSystem || corev1helpers.PodPriority(pod) >= SystemCriticalPriority
}

// QueueOfPod returns the queue of a pod: its PodGroup's spec.queue when it belongs to one
// (groupQueue, "" when the group is unknown), else its queue label, else the default queue.
func QueueOfPod(pod *corev1.Pod, groupQueue string) string {
	if _, grouped := PodGroupNameOf(pod); grouped {
		if groupQueue != "" {
			return groupQueue
		}
		return DefaultQueue
	}
	if q := pod.Labels[QueueLabel]; q != "" {
		return q
	}
	return DefaultQueue
}

// Reasons that tephra-scheduler gives for a workload its queue holds back.
const (
	// ReasonQueueUnavailable: the queue is missing, not a leaf, or closed.
	ReasonQueueUnavailable = "QueueUnavailable"
	// ReasonQueueCapability: the workload would take its queue (or an ancestor) past its capability.
	ReasonQueueCapability = "QueueCapabilityExceeded"
	// ReasonQueueOverShare: the queue uses its deserved share while other queues wait for theirs.
	ReasonQueueOverShare = "QueueOverDeservedShare"
	// ReasonNeverFits: the workload's minimum is larger than its queue's capability.
	ReasonNeverFits = "ExceedsQueueCapability"
	// ReasonDevicesNotAccounted: a ResourceClaim of the pod could not be counted in its queue
	// (its DeviceClass or the claim does not exist). An event, not a scheduling verdict.
	ReasonDevicesNotAccounted = "DevicesNotAccounted"
)

// ReasonElasticWaiting: a pod above its group's minimum waits while another group's minimum may
// take the capacity.
const ReasonElasticWaiting = "ElasticWaiting"
