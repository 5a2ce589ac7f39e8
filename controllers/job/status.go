package job

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// taskCounts counts a task's current pods that are not being restarted.
type taskCounts struct {
	pending, running, succeeded, failed, unknown, live int32
	// present counts the task's current pods.
	present int32
}

// counts sums the current pods of all tasks.
func (m *machine) counts() taskCounts {
	var sum taskCounts
	for _, c := range m.countTasks() {
		sum.pending += c.pending
		sum.running += c.running
		sum.succeeded += c.succeeded
		sum.failed += c.failed
		sum.unknown += c.unknown
		sum.live += c.live
		sum.present += c.present
	}
	return sum
}

func (m *machine) countTasks() map[string]taskCounts {
	out := map[string]taskCounts{}
	for _, pod := range m.pods {
		if pod.kind != current {
			continue
		}
		c := out[pod.task]
		c.present++
		switch {
		case m.rec.restarting(pod.UID), evictedFailure(pod.Pod):
			c.live++ // it will be created again
		case pod.Status.Phase == corev1.PodSucceeded:
			c.succeeded++
		case pod.Status.Phase == corev1.PodFailed:
			c.failed++
		case pod.running():
			c.running++
			c.live++
		case pod.Status.Phase == corev1.PodUnknown:
			c.unknown++
			c.live++
		default:
			c.pending++
			c.live++
		}
		out[pod.task] = c
	}
	return out
}

// count writes the pod counts into the status: every pod of the job, including those of an
// earlier run not yet gone.
func (m *machine) count() {
	s := &m.d.Status
	s.Pending, s.Running, s.Succeeded, s.Failed, s.Terminating, s.Unknown = 0, 0, 0, 0, 0, 0
	s.MinAvailable = m.spec.min
	tasks := map[string]batchv1alpha1.TaskState{}
	for _, pod := range m.pods {
		if pod.terminating() {
			s.Terminating++
			continue
		}
		phase := pod.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		switch phase {
		case corev1.PodPending:
			s.Pending++
		case corev1.PodRunning:
			s.Running++
		case corev1.PodSucceeded:
			s.Succeeded++
		case corev1.PodFailed:
			s.Failed++
		default:
			s.Unknown++
		}
		if pod.task == "" {
			continue
		}
		ts := tasks[pod.task]
		if ts.Phase == nil {
			ts.Phase = map[corev1.PodPhase]int32{}
		}
		ts.Phase[phase]++
		tasks[pod.task] = ts
	}
	s.TaskStatusCount = nil
	if len(tasks) > 0 {
		s.TaskStatusCount = tasks
	}
}

func (m *machine) setConditions() {
	s := &m.d.Status
	phase := s.State.Phase
	set := func(condType string, ok bool, reason, message string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		cond := metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message,
			ObservedGeneration: m.job.Generation, LastTransitionTime: m.now}
		if old := meta.FindStatusCondition(s.Conditions, condType); old != nil && old.Status == status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		meta.SetStatusCondition(&s.Conditions, cond)
	}
	running := phase == batchv1alpha1.JobRunning
	runningMsg := fmt.Sprintf("the job is %s", phase)
	if running {
		runningMsg = fmt.Sprintf("%d pods run and %d succeeded (minAvailable %d)", s.Running, s.Succeeded, s.MinAvailable)
	}
	set(ConditionRunning, running, string(phase), runningMsg)
	if m.suspended() && !Finished(phase) {
		set(ConditionSuspended, true, ReasonSuspended, "spec.suspend is true: the job's pods are deleted until it is resumed")
	} else {
		set(ConditionSuspended, false, "NotSuspended", "spec.suspend is not set")
	}
	if Finished(phase) {
		set(ConditionFinished, true, string(phase), s.State.Message)
	} else {
		set(ConditionFinished, false, string(phase), fmt.Sprintf("the job is %s", phase))
	}
}
