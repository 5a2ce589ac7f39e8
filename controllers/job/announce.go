package job

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// made is what a decision created: the job's PodGroup (nil if none) and pods, of run run.
type made struct {
	group *schedulingv1alpha1.PodGroup
	pods  []createdPod
	run   int32
}

// createdPod is a pod a decision created, of task task.
type createdPod struct {
	name, task string
}

// groupNote says what PodGroup was created: "created PodGroup train: minMember 6 (ps 2,
// worker 4) in queue default" ("" without one).
func (m made) groupNote() string {
	if m.group == nil {
		return ""
	}
	return fmt.Sprintf("created PodGroup %s: minMember %d%s%s in queue %s", m.group.Name, m.group.Spec.MinMember,
		describeTaskMembers(m.group.Spec.MinTaskMember), describeSubGroups(m.group), m.group.Spec.Queue)
}

// podsNote says what pods were created: "created 6 pods for run 0: train-ps-0, …" ("" without
// any).
func (m made) podsNote() string {
	if len(m.pods) == 0 {
		return ""
	}
	names := make([]string, len(m.pods))
	for i, p := range m.pods {
		names[i] = p.name
	}
	return fmt.Sprintf("created %d pods for run %d: %s", len(names), m.run, abbreviate(names))
}

// announce announces what a decision created: events PodGroupCreated and CreatedPods.
func (r *Reconciler) announce(job *batchv1alpha1.Job, m made) {
	if note := m.groupNote(); note != "" {
		r.event(job, corev1.EventTypeNormal, "PodGroupCreated", "Create", "%s", note)
	}
	if note := m.podsNote(); note != "" {
		r.event(job, corev1.EventTypeNormal, "CreatedPods", "Create", "%s", note)
	}
}

// countCreated counts pods just created in the status, as Pending: the phase a new pod has.
func countCreated(s *batchv1alpha1.JobStatus, pods []createdPod) {
	for _, p := range pods {
		s.Pending++
		if p.task == "" {
			continue
		}
		if s.TaskStatusCount == nil {
			s.TaskStatusCount = map[string]batchv1alpha1.TaskState{}
		}
		ts := s.TaskStatusCount[p.task]
		if ts.Phase == nil {
			ts.Phase = map[corev1.PodPhase]int32{}
		}
		ts.Phase[corev1.PodPending]++
		s.TaskStatusCount[p.task] = ts
	}
}

// recordDecision announces phase changes and actions as events on the job, and counts restarts.
// It runs once the status is written, or for a job's first decision once its PodGroup and pods
// are created (createsFirst), so that each is announced once. What the decision created (m) is
// said by its last phase change, in the same event; without a phase change, by announce.
func (r *Reconciler) recordDecision(job *batchv1alpha1.Job, previous *batchv1alpha1.JobStatus, d Decision, m made) {
	for _, a := range d.Actions {
		eventType := corev1.EventTypeWarning
		if a.Action == batchv1alpha1.CompleteJobAction {
			eventType = corev1.EventTypeNormal
		}
		r.event(job, eventType, string(a.Action), string(a.Action), "%s", a.Message)
		switch a.Action {
		case batchv1alpha1.RestartJobAction, batchv1alpha1.RestartTaskAction, batchv1alpha1.RestartSubGroupAction, batchv1alpha1.RestartPodAction:
			restarts.WithLabelValues(queueOf(job), string(a.Action)).Inc()
		}
	}
	last := -1
	for i, t := range d.Transitions {
		if t.From != t.To {
			last = i
		}
	}
	if last < 0 {
		r.announce(job, m)
	}
	for i, t := range d.Transitions {
		if t.From == t.To {
			continue
		}
		eventType := corev1.EventTypeNormal
		switch t.To {
		case batchv1alpha1.JobFailed, batchv1alpha1.JobAborting, batchv1alpha1.JobTerminating, batchv1alpha1.JobRestarting:
			eventType = corev1.EventTypeWarning
		}
		note := fmt.Sprintf("Phase set to %s (%s): %s", t.To, t.Reason, t.Message)
		if t.From != "" {
			note = fmt.Sprintf("Phase changed from %s to %s (%s): %s", t.From, t.To, t.Reason, t.Message)
		}
		if i == last {
			for _, made := range []string{m.groupNote(), m.podsNote()} {
				if made != "" {
					note += "; " + made
				}
			}
		}
		r.event(job, eventType, "PhaseChanged", "UpdateStatus", "%s", note)
	}
	if previous.State.Phase == d.Status.State.Phase && previous.State.Reason != d.Status.State.Reason &&
		d.Status.State.Reason == ReasonSuspended {
		r.event(job, corev1.EventTypeNormal, ReasonSuspended, "UpdateStatus", "%s", d.Status.State.Message)
	}
}

func (r *Reconciler) event(job *batchv1alpha1.Job, eventType, reason, action, note string, args ...any) {
	if r.Recorder == nil {
		return
	}
	msg := fmt.Sprintf(note, args...)
	// An event's note is limited to 1 kB.
	if len(msg) > 1000 {
		msg = msg[:997] + "..."
	}
	r.Recorder.Eventf(job, nil, eventType, reason, action, "%s", msg)
}

// abbreviate lists names, the first few of a long list.
func abbreviate(names []string) string {
	const most = 8
	if len(names) <= most {
		return strings.Join(sortedStrings(names), ", ")
	}
	sorted := sortedStrings(names)
	return fmt.Sprintf("%s and %d more", strings.Join(sorted[:most], ", "), len(names)-most)
}

func describeTaskMembers(m map[string]int32) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, t := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", t, m[t]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// describeSubGroups says how many sub-groups a group has: ", 4 sub-groups" ("" without any).
func describeSubGroups(group *schedulingv1alpha1.PodGroup) string {
	if n := len(group.Spec.SubGroups); n > 0 {
		return fmt.Sprintf(", %d sub-groups", n)
	}
	return ""
}
