package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PodGroupNameOf returns the name of the PodGroup (in the pod's namespace) that a pod belongs to,
// by Tephra's label or, for manifests written for other schedulers, scheduler-plugins' label or
// Volcano's annotation. ok is false for a pod that names no group: it is a group of one.
func PodGroupNameOf(pod *corev1.Pod) (name string, ok bool) {
	if name, ok = pod.Labels[PodGroupLabel]; ok {
		return name, true
	}
	if name, ok = pod.Labels[CoschedulingPodGroupLabel]; ok {
		return name, true
	}
	name, ok = pod.Annotations[VolcanoGroupNameAnnotation]
	return name, ok
}

// InvalidPodGroupName says why a group name taken from a pod cannot name a PodGroup, or "" if
// it can.
func InvalidPodGroupName(name string) string {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errs[0]
	}
	return ""
}

// TaskOf returns the task a pod belongs to within its group ("" if none).
func TaskOf(pod *corev1.Pod) string {
	return pod.Labels[TaskLabel]
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
	// ReasonTimeout: the group's placed members waited scheduleTimeoutSeconds for the rest.
	ReasonTimeout = "ScheduleTimeout"
)
