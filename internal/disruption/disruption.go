// Package disruption tells a pod that was taken away by the infrastructure (its node lost, an
// eviction, a preemption, the kubelet under pressure, a deletion) from a pod whose program
// failed, and says which in words. The Job controller maps the first to the PodEvicted event and
// only the second to PodFailed; PodGroup status and `kubectl tephra why` name the same cause.
//
// Kubernetes marks every pod it disrupts with a DisruptionTarget condition before it ends it,
// whatever phase the pod ends in: the pod garbage collector fails the pods of a deleted node
// with exit code 0 or none, so the phase alone would read as a failure of the job's code.
package disruption

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// The reasons of the DisruptionTarget condition that Kubernetes sets (k8s.io/api/core/v1 names
// them only in comments); ReasonPodGroupUnready is Tephra's own, in apis/scheduling/v1alpha1.
const (
	ReasonDeletionByPodGC        = "DeletionByPodGC"
	ReasonEvictionByEvictionAPI  = "EvictionByEvictionAPI"
	ReasonPreemptionByScheduler  = "PreemptionByScheduler"
	ReasonDeletionByTaintManager = "DeletionByTaintManager"
	ReasonTerminationByKubelet   = "TerminationByKubelet"
)

// Cause is why a pod was disrupted.
type Cause struct {
	// Reason is the DisruptionTarget condition's reason, "Deleted" for a pod deleted while it
	// ran or waited with no such condition, or "Evicted" for a pod the kubelet evicted without
	// one (status.reason Evicted, as kubelets before the condition did).
	Reason string
	// Message says what happened, naming the node where it matters, for "pod X was evicted: ...".
	Message string
}

// Reasons for disruptions without a DisruptionTarget condition.
const (
	ReasonDeleted = "Deleted"
	ReasonEvicted = "Evicted"
)

// Target returns the pod's DisruptionTarget condition if it is True: Kubernetes (or
// tephra-controllers) is about to take the pod away, or did.
func Target(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// Of says whether the pod was disrupted rather than ended by its own program, and why. A pod is
// disrupted when it carries a True DisruptionTarget condition (whatever its phase and exit
// codes), when it is being deleted before it finished, or when the kubelet evicted it.
func Of(pod *corev1.Pod) (Cause, bool) {
	node := pod.Spec.NodeName
	if c := Target(pod); c != nil {
		return Cause{Reason: c.Reason, Message: describe(c, node)}, true
	}
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && !finished:
		if node == "" {
			return Cause{Reason: ReasonDeleted, Message: "it was deleted before it was scheduled"}, true
		}
		return Cause{Reason: ReasonDeleted, Message: fmt.Sprintf("it was deleted while it ran on node %s", node)}, true
	case pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == ReasonEvicted:
		return Cause{Reason: ReasonEvicted, Message: withDetail(fmt.Sprintf("the kubelet on node %s evicted it", node), pod.Status.Message)}, true
	}
	return Cause{}, false
}

func describe(c *corev1.PodCondition, node string) string {
	switch c.Reason {
	case ReasonDeletionByPodGC:
		return fmt.Sprintf("its node %s is gone (the pod garbage collector removed it)", node)
	case ReasonDeletionByTaintManager:
		return withDetail(fmt.Sprintf("its node %s was not ready or unreachable for longer than the pod tolerates", node), c.Message)
	case ReasonEvictionByEvictionAPI:
		return withDetail("it was evicted through the Eviction API (a node drain, the descheduler or an autoscaler)", c.Message)
	case ReasonPreemptionByScheduler:
		return withDetail("the scheduler preempted it for a pod of higher priority or of a queue below its share", c.Message)
	case v1alpha1.ReasonMovedForGang:
		return withDetail("the scheduler moved it to make whole nodes for a waiting gang (it declared itself movable, or ran above its group's minimum)", c.Message)
	case ReasonTerminationByKubelet:
		return withDetail(fmt.Sprintf("the kubelet on node %s ended it (node pressure or shutdown)", node), c.Message)
	}
	return withDetail(fmt.Sprintf("it was disrupted (%s)", c.Reason), c.Message)
}

// withDetail appends what Kubernetes said itself, which often names the taint, the preemptor or
// the pressure.
func withDetail(s, detail string) string {
	if detail == "" {
		return s
	}
	return s + ": " + detail
}
