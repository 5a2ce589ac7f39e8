package job

// Lifecycle policies: which policy handles what happened to a job's pods and tasks, and the action
// it takes (restarts within their budgets, or a change of the job's phase).

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// isFailure says whether `*` matches the event: it stands for the events that report trouble.
// TaskCompleted and PodPending match only policies that name them, so that `event: "*"` does not
// restart a job for finishing a task or for a pod that has just been created.
func isFailure(e batchv1alpha1.Event) bool {
	switch e {
	case batchv1alpha1.PodFailedEvent, batchv1alpha1.PodEvictedEvent, batchv1alpha1.PodGroupUnreadyEvent, batchv1alpha1.TaskFailedEvent, batchv1alpha1.UnknownEvent:
		return true
	}
	return false
}

// policyFor finds the policy that handles the event: the first match among its task's policies,
// then among the job's, as in Volcano. A policy matches when it names the event (or `*` for a
// failure), or when its exitCode is the exit code of a failed pod.
func (m *machine) policyFor(ev jobEvent) (*batchv1alpha1.LifecyclePolicy, string) {
	match := func(policies []batchv1alpha1.LifecyclePolicy) *batchv1alpha1.LifecyclePolicy {
		for i := range policies {
			p := &policies[i]
			events := p.Events
			if p.Event != "" {
				events = append(slices.Clone(events), p.Event)
			}
			for _, e := range events {
				if e == ev.event || (e == batchv1alpha1.AnyEvent && isFailure(ev.event)) {
					return p
				}
			}
			if p.ExitCode != nil && ev.event == batchv1alpha1.PodFailedEvent && *p.ExitCode == ev.exitCode {
				return p
			}
		}
		return nil
	}
	if t, ok := m.spec.task(ev.task); ok {
		if p := match(t.spec.Policies); p != nil {
			return p, "task " + t.name
		}
	}
	if p := match(m.job.Spec.Policies); p != nil {
		return p, "job"
	}
	return nil, ""
}

func describePolicy(p *batchv1alpha1.LifecyclePolicy, owner string) string {
	var what string
	switch {
	case p.ExitCode != nil:
		what = fmt.Sprintf("exitCode %d", *p.ExitCode)
	case p.Event != "":
		what = "event " + string(p.Event)
	default:
		names := make([]string, len(p.Events))
		for i, e := range p.Events {
			names[i] = string(e)
		}
		what = "events " + strings.Join(names, ",")
	}
	return fmt.Sprintf("the %s policy on %s", owner, what)
}

// actionRank orders actions when several events call for different ones at once: the one that
// ends or restarts most wins.
func actionRank(a batchv1alpha1.Action) int {
	switch a {
	case batchv1alpha1.TerminateJobAction:
		return 7
	case batchv1alpha1.AbortJobAction:
		return 6
	case batchv1alpha1.CompleteJobAction:
		return 5
	case batchv1alpha1.RestartJobAction:
		return 4
	case batchv1alpha1.RestartTaskAction:
		return 3
	case batchv1alpha1.RestartSubGroupAction:
		return 2
	case batchv1alpha1.RestartPodAction:
		return 1
	}
	return 0
}

func jobLevel(a batchv1alpha1.Action) bool {
	return actionRank(a) >= actionRank(batchv1alpha1.RestartJobAction)
}

// candidate is an event whose policy's action is due.
type candidate struct {
	ev     jobEvent
	action batchv1alpha1.Action
	why    string
}

// handleEvents matches the job's events to policies and takes their actions. A job-level action
// (the highest ranked, if several are due) changes the phase; otherwise tasks and pods are
// restarted within their maxRetry, the restarts written to the run record before any pod is
// deleted. handled returns the failed pods that a policy has taken care of or is waiting on,
// which the default rules must not count as failures.
func (m *machine) handleEvents(p *plan) (handled map[types.UID]bool, next *change) {
	handled, due := m.dueEvents(p)
	r := sortRestarts(due)
	if r.jobAction != nil {
		return handled, m.takeJobAction(*r.jobAction)
	}
	// Restarts within a task's budget; a task out of restarts raises TaskFailed instead.
	outOfRetries := map[string]candidate{}
	m.restartTasksWithinRetries(r.tasks, outOfRetries)
	restartingSubGroups := m.restartSubGroups(r.subGroups, r.tasks, outOfRetries)
	m.restartPodsWithinRetries(r.pods, r.tasks, restartingSubGroups, outOfRetries)
	if next := m.raiseTaskFailed(outOfRetries); next != nil {
		return handled, next
	}
	// A pod that ran out of retries is a plain failure for the default rules.
	for _, pod := range m.pods {
		if pod.kind == current && pod.Status.Phase == corev1.PodFailed && m.rec.Tasks[pod.task].OutOfRetries {
			delete(handled, pod.UID)
		}
	}
	m.pruneRestarting()
	if len(r.tasks) > 0 {
		m.classify() // the restarted tasks' pods are now of an old generation
	}
	return handled, nil
}

// dueEvents are the job's events whose policy's action is due now; an event whose policy has a
// timeout not yet reached requeues the plan for then. handled holds the failed pods a policy
// matched, due or not: the policy takes care of them or is waiting to.
func (m *machine) dueEvents(p *plan) (handled map[types.UID]bool, due []candidate) {
	handled = map[types.UID]bool{}
	for _, ev := range m.podEvents() {
		policy, owner := m.policyFor(ev)
		if policy == nil {
			continue
		}
		if ev.pod != nil && ev.pod.Status.Phase == corev1.PodFailed {
			handled[ev.pod.UID] = true
		}
		if policy.Timeout != nil {
			if left := ev.since.Add(policy.Timeout.Duration).Sub(m.o.Now); left > 0 {
				p.requeueAfter(left)
				continue
			}
		}
		due = append(due, candidate{ev: ev, action: policy.Action, why: describePolicy(policy, owner)})
	}
	return handled, due
}

// dueRestarts are the due actions sorted by what they act on: the job (the highest ranked of the
// job-level actions), tasks, sub-groups and pods, the first candidate of each task or sub-group.
type dueRestarts struct {
	jobAction *candidate
	tasks     map[string]candidate
	subGroups map[subGroupKey]candidate
	pods      []candidate
}

// sortRestarts sorts the due actions by what they act on. An event without the pod or sub-group
// its action restarts restarts the task.
func sortRestarts(due []candidate) dueRestarts {
	r := dueRestarts{tasks: map[string]candidate{}, subGroups: map[subGroupKey]candidate{}}
	for _, c := range due {
		switch c.action {
		case batchv1alpha1.RestartTaskAction:
			if _, ok := r.tasks[c.ev.task]; !ok {
				r.tasks[c.ev.task] = c
			}
		case batchv1alpha1.RestartPodAction:
			if c.ev.pod != nil {
				r.pods = append(r.pods, c)
			} else {
				// A task event has no pod to restart: restart the task.
				r.tasks[c.ev.task] = c
			}
		case batchv1alpha1.RestartSubGroupAction:
			if sub := subGroupOf(c.ev.pod); sub != "" {
				if _, ok := r.subGroups[subGroupKey{c.ev.task, sub}]; !ok {
					r.subGroups[subGroupKey{c.ev.task, sub}] = c
				}
			} else if _, ok := r.tasks[c.ev.task]; !ok {
				// No sub-group to restart (a task event, a task without sub-groups): the task.
				r.tasks[c.ev.task] = c
			}
		default:
			if jobLevel(c.action) && (r.jobAction == nil || actionRank(c.action) > actionRank(r.jobAction.action)) {
				r.jobAction = &c
			}
		}
	}
	return r
}

// restartTasksWithinRetries restarts each task in tasks that has a restart left, in name order,
// and adds the others to outOfRetries.
func (m *machine) restartTasksWithinRetries(tasks map[string]candidate, outOfRetries map[string]candidate) {
	for _, name := range slices.Sorted(maps.Keys(tasks)) {
		c := tasks[name]
		if !m.spendRestart(name) {
			outOfRetries[name] = c
			continue
		}
		m.rec.updateTask(name, func(t *taskRecord) { t.Generation++ })
		t, _ := m.spec.task(name)
		m.d.Actions = append(m.d.Actions, ActionTaken{Action: batchv1alpha1.RestartTaskAction, Event: c.ev.event, Task: name,
			Message: fmt.Sprintf("%s: %s restarts task %s (restart %d of %d)", c.ev.describe(), c.why, name, m.rec.Tasks[name].Restarts, t.maxRetry)})
	}
}

// restartPodsWithinRetries restarts each pod of pods whose task has a restart left, unless its
// task or sub-group restarts as a whole, and adds the tasks out of restarts to outOfRetries.
func (m *machine) restartPodsWithinRetries(pods []candidate, tasks map[string]candidate, restartingSubGroups map[subGroupKey]bool, outOfRetries map[string]candidate) {
	for _, c := range pods {
		if _, ok := tasks[c.ev.task]; ok {
			continue // its task restarts as a whole
		}
		if restartingSubGroups[subGroupKey{c.ev.task, subGroupOf(c.ev.pod)}] {
			continue // its sub-group restarts as a whole
		}
		if !m.spendRestart(c.ev.task) {
			if _, ok := outOfRetries[c.ev.task]; !ok {
				outOfRetries[c.ev.task] = c
			}
			continue
		}
		m.rec.RestartingPods = append(m.rec.RestartingPods, c.ev.pod.UID)
		t, _ := m.spec.task(c.ev.task)
		m.d.Actions = append(m.d.Actions, ActionTaken{Action: batchv1alpha1.RestartPodAction, Event: c.ev.event, Task: c.ev.task,
			Message: fmt.Sprintf("%s: %s restarts the pod (restart %d of %d of task %s)", c.ev.describe(), c.why, m.rec.Tasks[c.ev.task].Restarts, t.maxRetry, c.ev.task)})
	}
}

// subGroupKey names a sub-group of a task.
type subGroupKey struct{ task, subGroup string }

// subGroupOf is the sub-group of a job's pod ("" for none, or no pod).
func subGroupOf(pod *observedPod) string {
	if pod == nil {
		return ""
	}
	return schedulingv1alpha1.SubGroupOf(pod.Pod)
}

// restartSubGroups restarts the sub-groups of subGroups whose task does not restart as a whole,
// each within its task's restart budget (a sub-group restart counts as one restart of its
// task): their current pods are recorded as restarting, to be deleted and created again. Those
// past the budget join outOfRetries. It returns the sub-groups restarting.
func (m *machine) restartSubGroups(subGroups map[subGroupKey]candidate, restartTasks, outOfRetries map[string]candidate) map[subGroupKey]bool {
	keys := slices.SortedFunc(maps.Keys(subGroups), func(a, b subGroupKey) int {
		return cmp.Or(cmp.Compare(a.task, b.task), cmp.Compare(a.subGroup, b.subGroup))
	})
	restarting := map[subGroupKey]bool{}
	for _, key := range keys {
		c := subGroups[key]
		if _, ok := restartTasks[key.task]; ok {
			continue // the task restarts as a whole
		}
		if !m.spendRestart(key.task) {
			if _, ok := outOfRetries[key.task]; !ok {
				outOfRetries[key.task] = c
			}
			continue
		}
		restarting[key] = true
		n := 0
		for _, pod := range m.pods {
			if pod.kind == current && pod.task == key.task && schedulingv1alpha1.SubGroupOf(pod.Pod) == key.subGroup && !m.rec.restarting(pod.UID) {
				m.rec.RestartingPods = append(m.rec.RestartingPods, pod.UID)
				n++
			}
		}
		t, _ := m.spec.task(key.task)
		m.d.Actions = append(m.d.Actions, ActionTaken{Action: batchv1alpha1.RestartSubGroupAction, Event: c.ev.event, Task: key.task,
			Message: fmt.Sprintf("%s: %s restarts sub-group %s (%d pods; restart %d of %d of task %s)", c.ev.describe(), c.why, key.subGroup, n, m.rec.Tasks[key.task].Restarts, t.maxRetry, key.task)})
	}
	return restarting
}

// spendRestart counts a restart of the task if its maxRetry allows it.
func (m *machine) spendRestart(task string) bool {
	t, ok := m.spec.task(task)
	if !ok || m.rec.Tasks[task].OutOfRetries || m.rec.Tasks[task].Restarts >= t.maxRetry {
		return false
	}
	m.rec.updateTask(task, func(r *taskRecord) { r.Restarts++ })
	m.recordChanged = true
	return true
}

// raiseTaskFailed handles the tasks that needed a restart beyond their maxRetry: TaskFailed is
// matched to the policies, and a job-level action there is taken. Without one, the task's failed
// pods stay failed and the default rules decide (the job fails if too few pods can succeed).
// The task is marked in the run record so that TaskFailed is raised once per run.
func (m *machine) raiseTaskFailed(tasks map[string]candidate) *change {
	names := make([]string, 0, len(tasks))
	for name := range tasks {
		names = append(names, name)
	}
	sort.Strings(names)
	var best *candidate
	for _, name := range names {
		if m.rec.Tasks[name].OutOfRetries {
			continue // raised earlier in this run
		}
		cause := tasks[name]
		m.rec.updateTask(name, func(r *taskRecord) { r.OutOfRetries = true })
		m.recordChanged = true
		t, _ := m.spec.task(name)
		ev := jobEvent{event: batchv1alpha1.TaskFailedEvent, task: name, since: m.o.Now}
		m.d.Actions = append(m.d.Actions, ActionTaken{Action: TaskFailedAction, Event: batchv1alpha1.TaskFailedEvent, Task: name,
			Message: fmt.Sprintf("%s: task %s cannot be restarted again (maxRetry %d)", cause.ev.describe(), name, t.maxRetry)})
		if policy, owner := m.policyFor(ev); policy != nil && jobLevel(policy.Action) {
			c := candidate{ev: ev, action: policy.Action, why: describePolicy(policy, owner)}
			if best == nil || actionRank(c.action) > actionRank(best.action) {
				best = &c
			}
		}
	}
	if best != nil {
		// The job-level action replaces the restarts decided alongside.
		m.d.Actions = slices.DeleteFunc(m.d.Actions, func(a ActionTaken) bool {
			return a.Action == batchv1alpha1.RestartTaskAction || a.Action == batchv1alpha1.RestartSubGroupAction || a.Action == batchv1alpha1.RestartPodAction
		})
		return m.takeJobAction(*best)
	}
	return nil
}

// pruneRestarting forgets restarted pods that are gone, so that the record stays small.
func (m *machine) pruneRestarting() {
	if len(m.rec.RestartingPods) == 0 {
		return
	}
	seen := map[types.UID]bool{}
	for _, pod := range slices.Concat(m.pods, m.gone) {
		seen[pod.UID] = true
	}
	kept := m.rec.RestartingPods[:0:0]
	for _, uid := range m.rec.RestartingPods {
		if seen[uid] {
			kept = append(kept, uid)
		}
	}
	if len(kept) != len(m.rec.RestartingPods) {
		m.rec.RestartingPods = kept
		m.recordChanged = true
	}
}

// takeJobAction changes the job's phase for a job-level action. RestartJob counts the retry in
// the same status write that enters Restarting, before any pod is deleted: a controller that
// restarts in between finds the job Restarting and finishes the restart without counting it
// again; once retryCount has reached maxRetry, the job fails instead.
func (m *machine) takeJobAction(c candidate) *change {
	reason := string(c.ev.event)
	taken := ActionTaken{Action: c.action, Event: c.ev.event, Task: c.ev.task}
	var next change
	switch c.action {
	case batchv1alpha1.RestartJobAction:
		if m.d.Status.RetryCount >= m.job.Spec.MaxRetry {
			taken.Message = fmt.Sprintf("%s: %s would restart the job, but it was restarted %d times (maxRetry %d): the job fails",
				c.ev.describe(), c.why, m.d.Status.RetryCount, m.job.Spec.MaxRetry)
			next = change{batchv1alpha1.JobFailed, ReasonRetriesExhausted, taken.Message}
			break
		}
		m.d.Status.RetryCount++
		taken.Message = fmt.Sprintf("%s: %s restarts the job (retry %d of %d)", c.ev.describe(), c.why, m.d.Status.RetryCount, m.job.Spec.MaxRetry)
		next = change{batchv1alpha1.JobRestarting, reason, taken.Message}
	case batchv1alpha1.AbortJobAction:
		taken.Message = fmt.Sprintf("%s: %s aborts the job; resume it with the %s annotation", c.ev.describe(), c.why, ResumeAnnotation)
		next = change{batchv1alpha1.JobAborting, reason, taken.Message}
	case batchv1alpha1.TerminateJobAction:
		taken.Message = fmt.Sprintf("%s: %s terminates the job", c.ev.describe(), c.why)
		next = change{batchv1alpha1.JobTerminating, reason, taken.Message}
	case batchv1alpha1.CompleteJobAction:
		taken.Message = fmt.Sprintf("%s: %s completes the job", c.ev.describe(), c.why)
		next = change{batchv1alpha1.JobCompleting, reason, taken.Message}
	}
	m.d.Actions = append(m.d.Actions, taken)
	return &next
}
