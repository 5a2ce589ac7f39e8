package reclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// evict removes a victim for a preemptor as kube-scheduler's own preemption does (a pod waiting
// at Permit or in PreBind is rejected in memory; a bound one gets a DisruptionTarget condition
// and is deleted), with one event that names the queue it made room for. It runs after the
// scheduling cycle (async), so it reads nothing the next cycle's PostFilter sets.
func (r *Reclaimer) evict(ctx context.Context, pod, victim *corev1.Pod, plugin string, violating int64) (bool, error) {
	queue := r.plugin.QueueOf(pod)
	if waiting := r.handle.GetWaitingPod(victim.UID); waiting != nil && waiting.Preempt(plugin, "preempted") {
		r.evicted(pod, queue, victim, "")
		return true, nil
	}
	if binding := r.handle.GetPodInPreBind(victim.UID); binding != nil && binding.CancelPod("preempted by "+plugin) {
		r.evicted(pod, queue, victim, "")
		return true, nil
	}
	condition := &corev1.PodCondition{
		Type:    corev1.DisruptionTarget,
		Status:  corev1.ConditionTrue,
		Reason:  corev1.PodReasonPreemptionByScheduler,
		Message: fmt.Sprintf("%s: making room in queue %q for pod %s/%s", pod.Spec.SchedulerName, queue, pod.Namespace, pod.Name),
	}
	status := victim.Status.DeepCopy()
	if apipod.UpdatePodCondition(status, condition) {
		if err := schedutil.PatchPodStatus(ctx, r.handle.ClientSet(), victim.Name, victim.Namespace, &victim.Status, status); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
	}
	if err := schedutil.DeletePod(ctx, r.handle.ClientSet(), victim); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	r.evicted(pod, queue, victim, r.budgetNote(victim, violating))
	return false, nil
}

// victimsGoing returns the victims of recent preemptions, forgetting those whose eviction has
// long had time to show.
func (r *Reclaimer) victimsGoing() map[types.UID]bool {
	r.victimsMu.Lock()
	defer r.victimsMu.Unlock()
	going := make(map[types.UID]bool, len(r.inFlight))
	for uid, at := range r.inFlight {
		if time.Since(at) > victimsGrace {
			delete(r.inFlight, uid)
			delete(r.limitNotes, uid)
			continue
		}
		going[uid] = true
	}
	return going
}

// evicted records a victim evicted for a pod of a queue: an event naming the queue that took its
// place (and the budgets it breaks, if it must), and the metric.
func (r *Reclaimer) evicted(pod *corev1.Pod, queue string, victim *corev1.Pod, note string) {
	e, _ := r.ledger.Entry(victim.UID)
	kind := kindPreempt
	if e.Queue != queue {
		kind = kindReclaim
	}
	evictions.WithLabelValues(kind, e.Queue, queue).Inc()
	reason, msg := "Preempted", fmt.Sprintf("Preempted by pod %s/%s of higher priority in queue %q", pod.Namespace, pod.Name, queue)
	if kind == kindReclaim {
		reason = "Reclaimed"
		msg = fmt.Sprintf("Reclaimed by queue %q for pod %s/%s: queue %q used more than its deserved share", queue, pod.Namespace, pod.Name, e.Queue)
	}
	r.handle.EventRecorder().Eventf(victim, pod, corev1.EventTypeWarning, reason, "Evicting", msg+note+r.limitNote(victim.UID))
}

// holdForVictims holds members at PreEnqueue until the victims their preemption evicts are gone
// (plugins/internal/victimwait). Called before the evictions start.
func (r *Reclaimer) holdForVictims(members, victims []*corev1.Pod) {
	r.victims.Hold(members, victims, r.stillBound)
}

// stillBound says whether the informer shows the pod, this very one, bound to a node.
func (r *Reclaimer) stillBound(pod *corev1.Pod) bool {
	now, err := r.podLister.Pods(pod.Namespace).Get(pod.Name)
	return err == nil && now.UID == pod.UID && now.Spec.NodeName != ""
}
