// Package jobflow runs JobFlows: it creates each flow's Job from the JobTemplate of the flow's
// name once the Jobs of the flow's targets reached its condition, never twice, and reports the
// flow's phase and each Job's state.
//
// Decide is the whole decision, a pure function of the JobFlow, its Jobs and the time; the
// Reconciler reads those, creates what Decide asks for and writes the status. A Job's name is
// fixed, <jobflow>-<flow>, so a creation repeated after a restart is refused by the apiserver;
// and a flow whose Job the status records as created is never created again, even when the Job
// was deleted since.
package jobflow

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/job"
)

// JobName is the name of a flow's Job.
func JobName(jobFlow, flow string) string { return jobFlow + "-" + flow }

// Observed is what Decide decides from.
type Observed struct {
	Flow *batchv1alpha1.JobFlow
	// Jobs are the JobFlow's Jobs (controlled by it), by flow name.
	Jobs map[string]*batchv1alpha1.Job
	Now  metav1.Time
}

// Decision is the JobFlow's status, and the flows whose Jobs are to be created now. The status
// already counts them as created: the Reconciler moves a flow back to Waiting when its creation
// fails.
type Decision struct {
	Status batchv1alpha1.JobFlowStatus
	Create []string
}

// outcome of a dependency.
type outcome int

const (
	waiting outcome = iota
	met
	unmet
)

// Decide computes the JobFlow's status and the Jobs to create.
func Decide(o Observed) Decision {
	jf := o.Flow
	previous := map[string]batchv1alpha1.FlowJobStatus{}
	for _, s := range jf.Status.JobStatusList {
		previous[s.Flow] = s
	}
	entries := map[string]*batchv1alpha1.FlowJobStatus{}
	for _, f := range jf.Spec.Flows {
		entries[f.Name] = observe(jf.Name, f.Name, o.Jobs[f.Name], previous[f.Name], o.Now)
	}
	// Flows whose Job was never created wait for their targets, start, or are skipped. Targets
	// are resolved first (the CRD refuses cycles; resolving guards against them anyway).
	var d Decision
	resolving := map[string]bool{}
	var resolve func(name string) *batchv1alpha1.FlowJobStatus
	byName := map[string]batchv1alpha1.Flow{}
	for _, f := range jf.Spec.Flows {
		byName[f.Name] = f
	}
	resolve = func(name string) *batchv1alpha1.FlowJobStatus {
		e := entries[name]
		if e.State != "" || resolving[name] {
			return e
		}
		resolving[name] = true
		f := byName[name]
		condition := conditionOf(f)
		var waitFor []string
		for _, target := range targetsOf(f) {
			if _, ok := entries[target]; !ok {
				e.State, e.Message = batchv1alpha1.FlowJobSkipped, fmt.Sprintf("dependsOn names flow %s, which the jobflow does not have", target)
				return e
			}
			t := resolve(target)
			switch dependency(t, condition) {
			case unmet:
				e.State = batchv1alpha1.FlowJobSkipped
				e.Message = fmt.Sprintf("flow %s's job %s, not %s", target, describeState(t), condition)
				return e
			case waiting:
				waitFor = append(waitFor, target)
			}
		}
		if len(waitFor) > 0 {
			e.State = batchv1alpha1.FlowJobWaiting
			e.Message = fmt.Sprintf("waits for the jobs of %s to be %s", strings.Join(waitFor, ", "), condition)
			return e
		}
		e.State = string(batchv1alpha1.JobPending)
		e.Message = ""
		e.CreationTimestamp = o.Now.DeepCopy()
		d.Create = append(d.Create, name)
		return e
	}
	for _, f := range jf.Spec.Flows {
		resolve(f.Name)
	}
	d.Status = summarize(jf, entries)
	return d
}

// observe is a flow's entry from its Job, or from what the status recorded of it: State is empty
// for a flow whose Job was never created.
func observe(jobFlow, flow string, j *batchv1alpha1.Job, prev batchv1alpha1.FlowJobStatus, now metav1.Time) *batchv1alpha1.FlowJobStatus {
	e := &batchv1alpha1.FlowJobStatus{Flow: flow, Name: JobName(jobFlow, flow)}
	if j == nil {
		if prev.CreationTimestamp == nil {
			return e // never created
		}
		// Created, and deleted since: its last state stays if it had finished.
		*e = prev
		if !finished(e.State) && e.State != batchv1alpha1.FlowJobDeleted {
			e.State = batchv1alpha1.FlowJobDeleted
			e.Message = "the job was deleted before it finished; it is not created again"
		}
		return e
	}
	phase := j.Status.State.Phase
	if phase == "" {
		phase = batchv1alpha1.JobPending
	}
	e.State = string(phase)
	e.RestartCount = j.Status.RetryCount
	e.CreationTimestamp = createdAt(j, now)
	e.StartTimestamp, e.EndTimestamp = prev.StartTimestamp, prev.EndTimestamp
	// The Job's own transition times, not this decision's: a status write lost to a conflict
	// would otherwise date the end after a dependent Job created on it.
	if e.StartTimestamp == nil && phase == batchv1alpha1.JobRunning {
		e.StartTimestamp = transitionTime(j, now)
	} else if e.StartTimestamp == nil && (phase == batchv1alpha1.JobCompleting || phase == batchv1alpha1.JobCompleted) {
		e.StartTimestamp = now.DeepCopy()
	}
	if e.EndTimestamp == nil && job.Finished(phase) {
		e.EndTimestamp = transitionTime(j, now)
	}
	return e
}

// transitionTime is when the Job entered its current phase, or now if it does not say.
func transitionTime(j *batchv1alpha1.Job, now metav1.Time) *metav1.Time {
	if t := j.Status.State.LastTransitionTime; !t.IsZero() {
		return t.DeepCopy()
	}
	return now.DeepCopy()
}

// createdAt is when a Job was created, or now for one that does not say (yet): the status
// marks a flow as created by this time being set, so it must never be empty for a Job.
func createdAt(j *batchv1alpha1.Job, now metav1.Time) *metav1.Time {
	if j.CreationTimestamp.IsZero() {
		return now.DeepCopy()
	}
	return j.CreationTimestamp.DeepCopy()
}

func conditionOf(f batchv1alpha1.Flow) batchv1alpha1.FlowCondition {
	if f.DependsOn == nil || f.DependsOn.Condition == "" {
		return batchv1alpha1.FlowOnCompleted
	}
	return f.DependsOn.Condition
}

func targetsOf(f batchv1alpha1.Flow) []string {
	if f.DependsOn == nil {
		return nil
	}
	return f.DependsOn.Targets
}

// failed states: the Job ended without completing.
func failedState(state string) bool {
	return state == string(batchv1alpha1.JobFailed) || state == string(batchv1alpha1.JobTerminated)
}

// finished states will not change: Completed, Failed, Terminated.
func finished(state string) bool { return job.Finished(batchv1alpha1.JobPhase(state)) }

// dependency says whether a target's entry meets a condition, will never meet it, or may yet.
func dependency(t *batchv1alpha1.FlowJobStatus, condition batchv1alpha1.FlowCondition) outcome {
	switch t.State {
	case batchv1alpha1.FlowJobSkipped:
		return unmet
	case batchv1alpha1.FlowJobWaiting, "":
		return waiting
	}
	completed := t.State == string(batchv1alpha1.JobCompleted)
	over := finished(t.State) || t.State == batchv1alpha1.FlowJobDeleted
	switch condition {
	case batchv1alpha1.FlowOnRunning:
		if t.StartTimestamp != nil || completed || t.State == string(batchv1alpha1.JobRunning) {
			return met
		}
	case batchv1alpha1.FlowOnFailed:
		if failedState(t.State) {
			return met
		}
	default:
		if completed {
			return met
		}
	}
	if over {
		return unmet
	}
	return waiting
}

func describeState(t *batchv1alpha1.FlowJobStatus) string {
	switch t.State {
	case batchv1alpha1.FlowJobSkipped:
		return "was skipped"
	case batchv1alpha1.FlowJobDeleted:
		return "was deleted"
	}
	return "is " + t.State
}

// summarize builds the status from the entries: the lists and counts by state, and the phase.
func summarize(jf *batchv1alpha1.JobFlow, entries map[string]*batchv1alpha1.FlowJobStatus) batchv1alpha1.JobFlowStatus {
	s := batchv1alpha1.JobFlowStatus{Flows: int32(len(jf.Spec.Flows)), Conditions: slices.Clone(jf.Status.Conditions)}
	created, open, anyFailed := false, false, false
	for _, f := range jf.Spec.Flows {
		e := entries[f.Name]
		s.JobStatusList = append(s.JobStatusList, *e)
		if e.CreationTimestamp != nil {
			created = true
		}
		switch {
		case e.State == batchv1alpha1.FlowJobWaiting:
			open = true
		case e.State == batchv1alpha1.FlowJobSkipped:
		case e.State == batchv1alpha1.FlowJobDeleted:
			anyFailed = true
		case e.State == string(batchv1alpha1.JobPending):
			open = true
			s.PendingJobs = append(s.PendingJobs, e.Name)
		case e.State == string(batchv1alpha1.JobCompleted):
			s.Completed++
			s.CompletedJobs = append(s.CompletedJobs, e.Name)
		case e.State == string(batchv1alpha1.JobFailed):
			anyFailed = true
			s.Failed++
			s.FailedJobs = append(s.FailedJobs, e.Name)
		case e.State == string(batchv1alpha1.JobTerminated):
			anyFailed = true
			s.Failed++
			s.TerminatedJobs = append(s.TerminatedJobs, e.Name)
		default:
			open = true
			s.Running++
			s.RunningJobs = append(s.RunningJobs, e.Name)
		}
	}
	switch {
	case jf.DeletionTimestamp != nil:
		s.State = batchv1alpha1.JobFlowState{Phase: batchv1alpha1.FlowTerminating, Reason: "Deleting",
			Message: fmt.Sprintf("the jobflow is being deleted; its jobs are %s", map[bool]string{true: "deleted", false: "kept"}[jf.Spec.JobRetainPolicy == batchv1alpha1.DeleteJobs])}
	case !created:
		s.State = batchv1alpha1.JobFlowState{Phase: batchv1alpha1.FlowPending, Reason: "NoJobYet", Message: "no job was created yet"}
	case open:
		s.State = batchv1alpha1.JobFlowState{Phase: batchv1alpha1.FlowRunning, Reason: "JobsRunning",
			Message: fmt.Sprintf("%d of %d flows completed", s.Completed, len(jf.Spec.Flows))}
	case anyFailed:
		var names []string
		for _, f := range jf.Spec.Flows {
			if e := entries[f.Name]; failedState(e.State) || e.State == batchv1alpha1.FlowJobDeleted {
				names = append(names, fmt.Sprintf("%s (%s)", e.Name, e.State))
			}
		}
		s.State = batchv1alpha1.JobFlowState{Phase: batchv1alpha1.FlowFailed, Reason: "JobFailed",
			Message: "nothing more will start, and jobs did not complete: " + strings.Join(names, ", ")}
	default:
		s.State = batchv1alpha1.JobFlowState{Phase: batchv1alpha1.FlowSucceed, Reason: "AllDone",
			Message: fmt.Sprintf("%d of %d flows completed; nothing more will start", s.Completed, len(jf.Spec.Flows))}
	}
	slices.Sort(s.PendingJobs)
	return s
}
