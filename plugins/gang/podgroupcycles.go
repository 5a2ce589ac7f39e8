package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// With kube-scheduler's GenericWorkload feature gate on, the pods of an upstream PodGroup (those
// naming it in spec.schedulingGroup) are scheduled together, in pod-group cycles of
// kube-scheduler's own: its GangScheduling plugin holds them until the group's minCount exists
// (PreEnqueue), and the cycle places all of them or none (GangScheduling is the only plugin
// kube-scheduler asks whether a placement meets the group's constraint, PlacementFeasible). A
// group the cycle cannot place preempts through TephraQueue's PodGroupPostFilter, for the whole
// group at once.
//
// TephraGang then steps aside for those pods: gating them again at PreEnqueue, or holding them
// again at Permit, would stack a second gang on the first (measured: gangs of 1000 timed out at
// TephraGang's Permit). It still orders the queue, keeps them off nodes reserved for other
// groups, and counts them in their jobs' shares. With the gate off, kube-scheduler has no pod-group
// cycle, and TephraGang gangs those pods like any other group's. The pods of Tephra's own and of
// foreign PodGroups go through TephraGang with the gate on or off: kube-scheduler knows no group
// but spec.schedulingGroup's.

// inPodGroupCycles says whether kube-scheduler schedules the pod in pod-group cycles of its own,
// which gang it: TephraGang then neither gates nor holds it.
func (g *groupManager) inPodGroupCycles(pod *corev1.Pod) bool {
	return g.podGroupCycles && pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil
}

// reportMissingGroup tells, in an event, why a pod that kube-scheduler schedules in pod-group
// cycles waits while its upstream PodGroup does not exist: kube-scheduler's queue parks such a pod
// before any plugin's PreEnqueue, without a word, where TephraGang says PodGroupNotFound for the
// pods it gates.
func (g *groupManager) reportMissingGroup(pod *corev1.Pod) {
	if g.upstreamGroups == nil || !g.inPodGroupCycles(pod) || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != g.handle.ProfileName() {
		return
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	if _, err := g.upstreamGroups.PodGroups(pod.Namespace).Get(name); !apierrors.IsNotFound(err) {
		return
	}
	g.podEvent(pod, corev1.EventTypeWarning, v1alpha1.ReasonPodGroupNotFound, fmt.Sprintf("%s: pod group %q does not exist in namespace %q; the pod waits for it",
		v1alpha1.ReasonPodGroupNotFound, name, pod.Namespace))
}
