package consolidation

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Mover evicts the pods of a plan as kube-scheduler's preemption evicts its victims: a
// DisruptionTarget condition that says why (reason MovedForGang, which the Job controller reads
// as PodEvicted, and replaces the pod), then the deletion, an event on the pod, and the metric.
// The pod's controller creates it again, and the scheduler places the new pod where there is room;
// the gang's reservation keeps it off the nodes made whole.
type Mover struct {
	Client   kubernetes.Interface
	Recorder events.EventRecorder
}

// Move evicts the plan's pods for the gang (namespace/name of its PodGroup), one after another.
// It makes API calls: TephraGang runs it in the background, so that no scheduling cycle waits on
// the apiserver. It returns how many pods it evicted.
func (m *Mover) Move(ctx context.Context, gang string, plan Plan) int {
	logger := klog.FromContext(ctx)
	moved := 0
	for _, move := range plan.Moves {
		pod := move.Pod.Object
		if pod == nil {
			continue
		}
		condition := &corev1.PodCondition{
			Type:    corev1.DisruptionTarget,
			Status:  corev1.ConditionTrue,
			Reason:  v1alpha1.ReasonMovedForGang,
			Message: fmt.Sprintf("%s: moving the pod to make whole nodes for pod group %s", pod.Spec.SchedulerName, gang),
		}
		status := pod.Status.DeepCopy()
		if apipod.UpdatePodCondition(status, condition) {
			if err := schedutil.PatchPodStatus(ctx, m.Client, pod.Name, pod.Namespace, &pod.Status, status); err != nil {
				if !apierrors.IsNotFound(err) {
					logger.Error(err, "Marking a pod moved for a gang", "pod", klog.KObj(pod), "podGroup", gang)
				}
				continue
			}
		}
		if err := schedutil.DeletePod(ctx, m.Client, pod); err != nil {
			if !apierrors.IsNotFound(err) {
				logger.Error(err, "Evicting a pod moved for a gang", "pod", klog.KObj(pod), "podGroup", gang)
			}
			continue
		}
		moved++
		moves.WithLabelValues(move.Pod.movable()).Inc()
		logger.V(2).Info("Moved a pod to make whole nodes for a gang", "pod", klog.KObj(pod), "node", move.Pod.Node, "podGroup", gang, "roomOn", move.To)
		m.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, v1alpha1.ReasonMovedForGang, "Moving",
			"%s: evicted to make room for pod group %s, which fits in the cluster's free capacity but on no set of nodes; the pod %s, "+
				"so its controller creates it again, to be placed where there is room (node %s has room for it now)",
			v1alpha1.ReasonMovedForGang, gang, move.Pod.whyMovable(), move.To)
	}
	return moved
}

// movable is the label of tephra_consolidation_moves_total for the pod.
func (p Pod) movable() string {
	if len(p.Budgets) > 0 {
		return MovableElastic
	}
	return MovableDeclared
}

// whyMovable says why the pod may move, as "the pod …" goes on.
func (p Pod) whyMovable() string {
	if len(p.Budgets) > 0 {
		return fmt.Sprintf("runs above the minimum of its pod group %s", p.Budgets[0])
	}
	return fmt.Sprintf("declared itself movable (%s)", v1alpha1.MovableAnnotation)
}
