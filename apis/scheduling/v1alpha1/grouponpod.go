package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GroupOnPod returns the group of one that a pod carries (GroupOnPodAnnotation), as the PodGroup
// it stands for: named by the pod's PodGroupLabel, of minMember 1, in the pod's queue (its
// QueueLabel, else the default queue) at the pod's priority class, created with the pod, with the
// pod's SLAWaitingTimeAnnotation and MovableAnnotation. Its GroupOnPodAnnotation names the pod,
// so that what is said about the group can be said on the pod. Its status is what the PodGroup
// controller would write for one member: Scheduled once the pod is bound, and the pod's phase.
// ok is false for a pod that carries no group.
func GroupOnPod(pod *corev1.Pod) (group *PodGroup, ok bool) {
	if !CarriesGroup(pod) {
		return nil, false
	}
	name, queue := pod.Labels[PodGroupLabel], CarriedQueue(pod)
	annotations := map[string]string{GroupOnPodAnnotation: pod.Name}
	for _, key := range []string{SLAWaitingTimeAnnotation, MovableAnnotation} {
		if v, has := pod.Annotations[key]; has {
			annotations[key] = v
		}
	}
	group = &PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, Annotations: annotations,
			OwnerReferences: pod.OwnerReferences,
		},
		Spec: PodGroupSpec{MinMember: 1, Queue: queue, PriorityClassName: pod.Spec.PriorityClassName},
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		group.Status.Phase, group.Status.Running = PodGroupRunning, 1
	case corev1.PodSucceeded:
		group.Status.Phase, group.Status.Succeeded = PodGroupCompleted, 1
	case corev1.PodFailed:
		group.Status.Phase, group.Status.Failed = PodGroupFailed, 1
	default:
		group.Status.Phase = PodGroupPending
	}
	if pod.Spec.NodeName != "" {
		meta.SetStatusCondition(&group.Status.Conditions, metav1.Condition{
			Type: PodGroupScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled",
			Message: "its pod " + pod.Name + " is bound to node " + pod.Spec.NodeName, LastTransitionTime: pod.CreationTimestamp,
		})
	}
	return group, true
}

// CarriesGroup says whether a pod carries its group of one (GroupOnPod).
func CarriesGroup(pod *corev1.Pod) bool {
	_, named := pod.Labels[PodGroupLabel]
	return named && pod.Annotations[GroupOnPodAnnotation] == "true"
}

// CarriedQueue is the queue of the group a pod carries: its QueueLabel, else the default queue.
func CarriedQueue(pod *corev1.Pod) string {
	if q := pod.Labels[QueueLabel]; q != "" {
		return q
	}
	return DefaultQueue
}

// CarriedBy names the pod that carries a group of one (GroupOnPod), "" for a PodGroup object.
func CarriedBy(group *PodGroup) string {
	return group.Annotations[GroupOnPodAnnotation]
}
