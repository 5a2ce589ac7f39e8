package quota

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests are the requests a pod counts for in its queue. A bound pod counts as the node
// counts it: during an in-place resize (GA in 1.37) the larger of what its spec asks for and what
// the kubelet has allocated, and what is allocated when the resize is infeasible, so that a queue
// is charged for a resize as soon as its node is, and no longer than that. The scheduler's ledger
// and the Queue controller share it, so their sums agree.
func PodRequests(pod *corev1.Pod) Amounts {
	return FromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: pod.Spec.NodeName != ""}))
}

// Gated says whether a pod waits behind scheduling gates: it cannot be scheduled yet, so it is no
// demand, and it counts as no member a group could run with.
func Gated(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && len(pod.Spec.SchedulingGates) > 0
}
