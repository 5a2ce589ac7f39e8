package job

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/disruption"
)

// jobEvent is something that happened to a pod or task, for the policies.
type jobEvent struct {
	event    batchv1alpha1.Event
	task     string
	pod      *observedPod
	exitCode int32
	// since is when the event started to hold; a policy's timeout counts from it.
	since time.Time
	// cause says why a pod was evicted (PodEvicted).
	cause string
}

func (e jobEvent) describe() string {
	switch {
	case e.pod != nil && e.event == batchv1alpha1.PodFailedEvent:
		return fmt.Sprintf("pod %s failed (exit code %d)", e.pod.Name, e.exitCode)
	case e.pod != nil && e.event == batchv1alpha1.PodEvictedEvent:
		if e.cause != "" {
			return fmt.Sprintf("pod %s was evicted: %s", e.pod.Name, e.cause)
		}
		return fmt.Sprintf("pod %s was evicted", e.pod.Name)
	case e.pod != nil && e.event == batchv1alpha1.PodGroupUnreadyEvent:
		return fmt.Sprintf("pod %s was evicted: its pod group's minimum was not bound and Running within its ready timeout", e.pod.Name)
	case e.pod != nil && e.event == batchv1alpha1.PodPendingEvent:
		return fmt.Sprintf("pod %s has been pending since %s", e.pod.Name, e.since.UTC().Format(time.RFC3339))
	case e.pod != nil && e.event == batchv1alpha1.UnknownEvent:
		return fmt.Sprintf("pod %s is in phase Unknown", e.pod.Name)
	case e.event == batchv1alpha1.TaskCompletedEvent:
		return fmt.Sprintf("task %s completed", e.task)
	case e.event == batchv1alpha1.TaskFailedEvent:
		return fmt.Sprintf("task %s ran out of restarts", e.task)
	}
	return string(e.event)
}

// podEvents lists what happened to the job's current pods, those still there and those gone
// since the controller last saw them, and the tasks whose pods all succeeded, in a stable order.
func (m *machine) podEvents() []jobEvent {
	var events []jobEvent
	for _, pods := range [][]observedPod{m.pods, m.gone} {
		for i := range pods {
			pod := &pods[i]
			if pod.kind != current || m.rec.restarting(pod.UID) {
				continue
			}
			if ev, ok := podEvent(pod); ok {
				events = append(events, ev)
			}
		}
	}
	counts := m.countTasks()
	for _, t := range m.spec.tasks {
		if t.replicas > 0 && counts[t.name].succeeded == t.replicas {
			var last time.Time
			for _, pod := range m.pods {
				if pod.kind == current && pod.task == t.name && finishTime(pod.Pod).After(last) {
					last = finishTime(pod.Pod)
				}
			}
			events = append(events, jobEvent{event: batchv1alpha1.TaskCompletedEvent, task: t.name, since: last})
		}
	}
	return events
}

// podEvent is what happened to one pod. A disruption (its node lost or not ready, an eviction, a
// preemption, a deletion while it ran) is PodEvicted whatever the phase and exit code it ended
// with, never PodFailed: a lost node is not a failed job.
func podEvent(pod *observedPod) (jobEvent, bool) {
	ev := jobEvent{task: pod.task, pod: pod}
	target := disruption.Target(pod.Pod)
	cause, disrupted := disruption.Of(pod.Pod)
	switch {
	case target != nil && target.Reason == schedulingv1alpha1.ReasonPodGroupUnready:
		// tephra-controllers evicts the bound pods of a group that missed its ready timeout.
		ev.event, ev.since = batchv1alpha1.PodGroupUnreadyEvent, target.LastTransitionTime.Time
	case target != nil:
		ev.event, ev.since, ev.cause = batchv1alpha1.PodEvictedEvent, target.LastTransitionTime.Time, cause.Message
	case disrupted && pod.DeletionTimestamp != nil:
		// The controller deletes only stale pods and those it restarts while the job runs:
		// someone else is taking this one away.
		ev.event, ev.since, ev.cause = batchv1alpha1.PodEvictedEvent, pod.DeletionTimestamp.Time, cause.Message
	case disrupted:
		ev.event, ev.since, ev.cause = batchv1alpha1.PodEvictedEvent, finishTime(pod.Pod), cause.Message
	case pod.Status.Phase == corev1.PodFailed:
		ev.event, ev.since, ev.exitCode = batchv1alpha1.PodFailedEvent, finishTime(pod.Pod), exitCode(pod.Pod)
	case pod.Status.Phase == corev1.PodUnknown:
		ev.event, ev.since = batchv1alpha1.UnknownEvent, pod.CreationTimestamp.Time
	case pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "":
		ev.event, ev.since = batchv1alpha1.PodPendingEvent, pod.CreationTimestamp.Time
	default:
		return ev, false
	}
	return ev, true
}

// evictedFailure says whether a pod ended Failed because it was disrupted: it is replaced rather
// than counted as a failure of the job, unless a policy handles its PodEvicted event.
func evictedFailure(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodFailed {
		return false
	}
	_, disrupted := disruption.Of(pod)
	return disrupted
}

// exitCode is the first non-zero exit code of the pod's containers, in the order of the spec
// (Volcano reads the first container's).
func exitCode(pod *corev1.Pod) int32 {
	for _, c := range pod.Spec.Containers {
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == c.Name && s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
				return s.State.Terminated.ExitCode
			}
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
			return s.State.Terminated.ExitCode
		}
	}
	return 0
}

// finishTime is when the pod's last container ended, or failing that when it stopped being
// ready, or was created.
func finishTime(pod *corev1.Pod) time.Time {
	var last time.Time
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil && s.State.Terminated.FinishedAt.After(last) {
			last = s.State.Terminated.FinishedAt.Time
		}
	}
	if !last.IsZero() {
		return last
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && c.LastTransitionTime.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	if !last.IsZero() {
		return last
	}
	return pod.CreationTimestamp.Time
}
