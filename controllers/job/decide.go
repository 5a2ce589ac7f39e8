package job

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Observed is everything the state machine decides from: the job, the pods it controls, and
// the time.
type Observed struct {
	Job *batchv1alpha1.Job
	// Pods are the pods controlled by the job (its controller owner reference).
	Pods []corev1.Pod
	// Gone are pods of the job deleted by others since the controller last decided, as it last
	// saw them: a pod force-deleted, or failed and deleted at once by the pod garbage collector
	// when its node went away, may be gone before any decision saw it end.
	Gone []corev1.Pod
	// NodesDown are the nodes of the job's terminating pods that are gone or not Ready: a pod
	// on such a node never finishes terminating, as no kubelet confirms it.
	NodesDown map[string]bool
	Now       time.Time
	// GroupObjects makes every job's group a PodGroup object, none carried by a pod (groupOnPod).
	GroupObjects bool
}

// Decision is what the state machine decided for a job. The reconciler applies it in order:
// Record and resume annotation, then Status (the intent, written before anything is done), then
// the PodGroup, deletions and creations.
type Decision struct {
	// Status is the job's new status (equal to the old one when nothing changed).
	Status batchv1alpha1.JobStatus
	// Record is the new value of RestartsAnnotation, nil to leave it as it is.
	Record *string
	// ConsumeResume removes ResumeAnnotation.
	ConsumeResume bool
	// PodGroup is the spec the job's PodGroup must have (created if missing); nil leaves the
	// group as it is.
	PodGroup *schedulingv1alpha1.PodGroupSpec
	// JobMinMember is the job's whole minimum, which PodGroup's minMember falls below once pods
	// have succeeded; the group records it (JobMinMemberAnnotation).
	JobMinMember int32
	// Delete lists pods to delete, by name and UID (a pod of the same name created since is
	// not touched).
	Delete []PodDeletion
	// Create lists the slots to create pods for.
	Create []Slot
	// Transitions are the phase changes decided, in order, for events.
	Transitions []Transition
	// Actions are the policy actions taken, for events and metrics.
	Actions []ActionTaken
	// RequeueAfter asks to decide again after this long (a policy timeout, a TTL): 0 for not.
	RequeueAfter time.Duration
	// DeleteJob deletes the job: its ttlSecondsAfterFinished has passed.
	DeleteJob bool
	// Finished says the job has reached a final phase: its plugins may clean up.
	Finished bool
}

// PodDeletion is a pod to delete and why.
type PodDeletion struct {
	Name   string
	UID    types.UID
	Reason string
	// Force deletes the pod at once (grace period 0): its node is down and will never confirm
	// a graceful deletion.
	Force bool
}

// Slot is a task's pod index.
type Slot struct {
	Task  string
	Index int32
	// Generation is the task's generation the pod is created for.
	Generation int32
}

// Transition is a phase change.
type Transition struct {
	From, To        batchv1alpha1.JobPhase
	Reason, Message string
}

// ActionTaken is a policy action the state machine took (or TaskFailed, when a task ran out of
// restarts), with the event that caused it.
type ActionTaken struct {
	Action  batchv1alpha1.Action
	Event   batchv1alpha1.Event
	Task    string
	Message string
}

// TaskFailedAction is recorded in Decision.Actions when a task runs out of restarts.
const TaskFailedAction batchv1alpha1.Action = "TaskFailed"

// Reasons of phase transitions besides events' names.
const (
	ReasonCreated          = "Created"
	ReasonRunning          = "MinAvailableRunning"
	ReasonRestarted        = "Restarted"
	ReasonResumed          = "Resumed"
	ReasonSuspended        = "Suspended"
	ReasonPodsSucceeded    = "PodsSucceeded"
	ReasonMinSuccess       = "MinSuccessReached"
	ReasonTooManyFailed    = "TooManyPodsFailed"
	ReasonRetriesExhausted = "RetriesExhausted"
	ReasonInvalidJob       = "InvalidJob"
	ReasonPluginError      = "PluginError"
)

// Why pods are deleted (PodDeletion.Reason), besides RestartPod.
const (
	// ReasonStale: the pod is of an earlier run or task generation, or of a slot the spec no
	// longer has.
	ReasonStale = "Stale"
	// ReasonPhaseCleanup: the job is ending, aborted or finished, and the pod still runs.
	ReasonPhaseCleanup = "JobNotRunning"
	// ReasonRestartingAllPods: RestartJob or a resume starts the job from nothing.
	ReasonRestartingAllPods = "RestartingJob"
	// ReasonReplaceEvicted: the pod ended because it was disrupted, and no policy handles
	// PodEvicted: it is replaced, not counted as a failure.
	ReasonReplaceEvicted = "Evicted"
	// ReasonNodeDown: the pod was deleted, its grace period is over, and its node is gone or
	// not Ready: no kubelet will confirm the deletion, so it is forced.
	ReasonNodeDown = "NodeDown"
)

// Condition types of a Job.
const (
	// ConditionRunning is True while the job's minimum of pods runs (or has succeeded).
	ConditionRunning = "Running"
	// ConditionSuspended is True while spec.suspend holds the job.
	ConditionSuspended = "Suspended"
	// ConditionFinished is True once the job is Completed, Failed or Terminated; its reason is
	// the phase.
	ConditionFinished = "Finished"
)

// Finished says whether a phase is final: the job will not run again (Aborted can be resumed,
// so it is not final).
func Finished(phase batchv1alpha1.JobPhase) bool {
	switch phase {
	case batchv1alpha1.JobCompleted, batchv1alpha1.JobFailed, batchv1alpha1.JobTerminated:
		return true
	}
	return false
}

// Decide is the job's state machine: from the job and its pods it decides the job's next
// status and what to do to its pods and PodGroup. It is a pure function, so that every decision
// can be tested without a cluster, and so that a restarted controller decides the same from the
// same objects.
func Decide(o Observed) Decision {
	m := newMachine(o)
	m.run()
	return m.d
}

type machine struct {
	o    Observed
	job  *batchv1alpha1.Job
	spec jobSpec
	// rec is the run record as it will be written; recordChanged says it differs from the job's.
	rec           runRecord
	recordChanged bool
	pods          []observedPod
	// gone are the observed pods of Observed.Gone, classified as pods are, each with a
	// deletionTimestamp (goneDeleted).
	gone        []observedPod
	goneDeleted []corev1.Pod
	d           Decision
	now         metav1.Time
}

func newMachine(o Observed) *machine {
	m := &machine{o: o, job: o.Job, spec: viewSpec(o.Job), now: metav1.NewTime(o.Now).Rfc3339Copy()}
	m.rec = readRecord(o.Job).clone()
	// A gone pod was deleted, whether or not the last state seen of it says so: a force
	// deletion leaves no terminating state to see.
	for _, pod := range o.Gone {
		if pod.DeletionTimestamp == nil {
			pod = *pod.DeepCopy()
			pod.DeletionTimestamp = &m.now
		}
		m.goneDeleted = append(m.goneDeleted, pod)
	}
	m.d.Status = *o.Job.Status.DeepCopy()
	m.classify()
	return m
}

// classify sorts the pods by the run being decided: a RestartJob decided in this same decision
// makes every pod of the previous retry stale.
func (m *machine) classify() {
	m.pods = classify(m.job, &m.spec, m.d.Status.RetryCount, m.rec, m.o.Pods)
	m.gone = classify(m.job, &m.spec, m.d.Status.RetryCount, m.rec, m.goneDeleted)
}

// plan is what one phase wants done to the pods and group, before the machine knows whether
// the phase holds.
type plan struct {
	deletes  []PodDeletion
	creates  []Slot
	podGroup *schedulingv1alpha1.PodGroupSpec
	requeue  time.Duration
}

func (p *plan) delete(pod observedPod, reason string) {
	if pod.terminating() {
		return // already on its way out
	}
	p.deletes = append(p.deletes, PodDeletion{Name: pod.Name, UID: pod.UID, Reason: reason})
}

func (p *plan) requeueAfter(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if p.requeue == 0 || d < p.requeue {
		p.requeue = d
	}
}

// change is a phase transition a phase asks for.
type change struct {
	to              batchv1alpha1.JobPhase
	reason, message string
}

func (m *machine) run() {
	if m.d.Status.State.Phase == "" {
		m.transition(change{batchv1alpha1.JobPending, ReasonCreated, "the job was created"})
	}
	if m.spec.invalid != "" && !Finished(m.d.Status.State.Phase) {
		m.transition(change{batchv1alpha1.JobFailed, ReasonInvalidJob, m.spec.invalid})
	}
	_, resume := m.job.Annotations[ResumeAnnotation]
	// A resume asked for during Aborting waits until the job is Aborted.
	m.d.ConsumeResume = resume && m.d.Status.State.Phase != batchv1alpha1.JobAborting

	var p plan
	// A phase may hand over to the next at once (Running to Restarting to Pending): each step
	// either keeps its phase and gives the plan, or changes phase. Phases form no loop without
	// a pod changing, so a few steps always suffice.
	for range 8 {
		var next *change
		p, next = m.step(resume)
		if next == nil {
			break
		}
		m.transition(*next)
	}
	m.forceStuck(&p)
	m.d.Delete, m.d.Create, m.d.PodGroup, m.d.RequeueAfter = p.deletes, p.creates, p.podGroup, p.requeue
	m.d.JobMinMember = m.spec.min
	if m.recordChanged {
		v := m.rec.encode()
		m.d.Record = &v
	}
	m.count()
	m.setConditions()
	m.d.Finished = Finished(m.d.Status.State.Phase)
}

func (m *machine) phase() batchv1alpha1.JobPhase { return m.d.Status.State.Phase }

func (m *machine) suspended() bool { return m.job.Spec.Suspend != nil && *m.job.Spec.Suspend }

func (m *machine) transition(c change) {
	from := m.d.Status.State.Phase
	m.d.Status.State = batchv1alpha1.JobState{Phase: c.to, Reason: c.reason, Message: c.message, LastTransitionTime: m.now}
	m.d.Transitions = append(m.d.Transitions, Transition{From: from, To: c.to, Reason: c.reason, Message: c.message})
}

func (m *machine) step(resume bool) (plan, *change) {
	switch phase := m.phase(); phase {
	case batchv1alpha1.JobPending, batchv1alpha1.JobRunning:
		return m.active()
	case batchv1alpha1.JobRestarting:
		return m.restarting()
	case batchv1alpha1.JobCompleting:
		return m.ending(batchv1alpha1.JobCompleted)
	case batchv1alpha1.JobTerminating:
		return m.ending(batchv1alpha1.JobTerminated)
	case batchv1alpha1.JobAborting:
		return m.ending(batchv1alpha1.JobAborted)
	case batchv1alpha1.JobAborted:
		return m.aborted(resume)
	case batchv1alpha1.JobCompleted, batchv1alpha1.JobFailed, batchv1alpha1.JobTerminated:
		return m.finished()
	default:
		// A phase this controller does not know (written by hand): start over as a new job would.
		return plan{}, &change{batchv1alpha1.JobPending, ReasonCreated, fmt.Sprintf("unknown phase %q", phase)}
	}
}

// deleteLive deletes the pods that still run or wait to, keeping finished ones for their logs
// (but not stale ones: those of a slot the spec no longer has, or of an earlier run). It says
// whether any pod still holds resources (live, or finished but not yet gone).
func (m *machine) deleteLive(p *plan, reason string) (busy bool) {
	for _, pod := range m.pods {
		switch {
		case pod.live():
			p.delete(pod, reason)
			busy = true
		case pod.kind == stale:
			p.delete(pod, ReasonStale)
		case pod.terminating():
			busy = true
		}
	}
	return busy
}

// ending is Completing, Terminating and Aborting: the job's live pods are deleted, then the job
// reaches the final phase, keeping the reason and message of why it ended.
func (m *machine) ending(final batchv1alpha1.JobPhase) (plan, *change) {
	var p plan
	if m.deleteLive(&p, ReasonPhaseCleanup) {
		return p, nil
	}
	state := m.d.Status.State
	return p, &change{final, state.Reason, state.Message}
}

// aborted keeps the job without pods until it is resumed: by ResumeAnnotation, or by
// spec.suspend going from true to false (a job aborted by a policy and then suspended records
// Suspended as its reason, so that unsuspending it resumes it too).
func (m *machine) aborted(resume bool) (plan, *change) {
	var p plan
	m.deleteLive(&p, ReasonPhaseCleanup)
	reason := m.d.Status.State.Reason
	switch {
	case m.suspended() && reason != ReasonSuspended:
		m.d.Status.State.Reason = ReasonSuspended
		m.d.Status.State.Message = "the job is suspended; set spec.suspend to false to resume it"
	case !m.suspended() && (reason == ReasonSuspended || resume):
		how := "spec.suspend was set to false"
		if resume {
			how = "the " + ResumeAnnotation + " annotation was set"
		}
		return p, &change{batchv1alpha1.JobRestarting, ReasonResumed, how + ": the job starts again (no retry is counted)"}
	}
	return p, nil
}

// restarting deletes every pod of the job, finished or not, so that the next run starts from
// nothing; once none is left the job is Pending again and its run record starts empty. The
// retryCount was counted in the same status write that entered Restarting.
func (m *machine) restarting() (plan, *change) {
	var p plan
	if m.suspended() {
		return p, &change{batchv1alpha1.JobAborting, ReasonSuspended, "the job was suspended while restarting"}
	}
	for _, pod := range m.pods {
		p.delete(pod, ReasonRestartingAllPods)
	}
	if len(m.pods) > 0 {
		return p, nil
	}
	if len(m.rec.Tasks) > 0 || len(m.rec.RestartingPods) > 0 || m.rec.Retry != m.d.Status.RetryCount {
		m.rec = runRecord{Retry: m.d.Status.RetryCount}
		m.recordChanged = true
		m.classify()
	}
	if m.d.Status.State.Reason == ReasonResumed {
		return p, &change{batchv1alpha1.JobPending, ReasonResumed, "the job was resumed"}
	}
	return p, &change{batchv1alpha1.JobPending, ReasonRestarted,
		fmt.Sprintf("the job was restarted (retry %d of %d)", m.d.Status.RetryCount, m.job.Spec.MaxRetry)}
}

// finished deletes what may still run and, with ttlSecondsAfterFinished, the job itself.
func (m *machine) finished() (plan, *change) {
	var p plan
	m.deleteLive(&p, ReasonPhaseCleanup)
	if ttl := m.job.Spec.TTLSecondsAfterFinished; ttl != nil {
		deadline := m.d.Status.State.LastTransitionTime.Add(time.Duration(*ttl) * time.Second)
		if left := deadline.Sub(m.o.Now); left > 0 {
			p.requeueAfter(left)
		} else {
			m.d.DeleteJob = true
		}
	}
	return p, nil
}

// active is Pending and Running: the job's pods are created, watched and acted on.
func (m *machine) active() (plan, *change) {
	var p plan
	if m.suspended() {
		return p, &change{batchv1alpha1.JobAborting, ReasonSuspended, "the job was suspended: its pods are deleted until it is resumed"}
	}
	handled, next := m.handleEvents(&p)
	if next != nil {
		return plan{}, next
	}
	for _, pod := range m.pods {
		switch {
		case pod.kind == stale:
			p.delete(pod, ReasonStale)
		case m.rec.restarting(pod.UID):
			p.delete(pod, string(batchv1alpha1.RestartPodAction))
		case pod.kind == current && evictedFailure(pod.Pod) && !handled[pod.UID]:
			p.delete(pod, ReasonReplaceEvicted)
		}
	}
	if next := m.outcome(handled); next != nil {
		return plan{}, next
	}
	released := m.released()
	m.createMissing(&p, released)
	m.planPodGroup(&p, released)
	if m.phase() == batchv1alpha1.JobPending {
		if c := m.counts(); c.running+c.succeeded >= max(1, m.minInPlay(released)) {
			return p, &change{batchv1alpha1.JobRunning, ReasonRunning,
				fmt.Sprintf("%d pods are running and %d succeeded (minAvailable %d)", c.running, c.succeeded, m.spec.min)}
		}
	}
	return p, nil
}

// released says which tasks may have pods: those without dependsOn, those whose dependencies
// run (all their pods, or any one, Running or Succeeded), and those that already have pods, so
// that a dependency ending later does not take its dependents' pods away.
func (m *machine) released() map[string]bool {
	counts := m.countTasks()
	out := map[string]bool{}
	for _, t := range m.spec.tasks {
		if len(t.dependsOn) == 0 || counts[t.name].present > 0 {
			out[t.name] = true
			continue
		}
		satisfied := t.waitsForAll
		if !t.waitsForAll {
			// any: one pod of the named tasks runs, or they have no pods at all to wait for.
			var want int32
			for _, dep := range t.dependsOn {
				d, _ := m.spec.task(dep)
				want += d.replicas
				satisfied = satisfied || counts[dep].running+counts[dep].succeeded > 0
			}
			satisfied = satisfied || want == 0
		} else {
			// all: every pod of the named tasks runs or succeeded.
			for _, dep := range t.dependsOn {
				d, _ := m.spec.task(dep)
				satisfied = satisfied && counts[dep].running+counts[dep].succeeded >= d.replicas
			}
		}
		out[t.name] = satisfied
	}
	return out
}

// minInPlay is the minimum of pods that must run at once among the tasks that may start.
func (m *machine) minInPlay(released map[string]bool) int32 {
	var sum int32
	for _, t := range m.spec.tasks {
		if released[t.name] {
			sum += t.min
		}
	}
	return min(m.spec.min, sum)
}

// createMissing plans a pod for every empty slot of a task that may start. A slot whose old
// pod is still on its way out stays empty until it is gone: names are fixed.
func (m *machine) createMissing(p *plan, released map[string]bool) {
	taken := make(map[string]bool, len(m.pods))
	for _, pod := range m.pods {
		taken[pod.Name] = true
	}
	for _, t := range m.spec.tasks {
		if !released[t.name] {
			continue
		}
		for i := range t.replicas {
			if !taken[PodName(m.job.Name, t.name, i)] {
				p.creates = append(p.creates, Slot{Task: t.name, Index: i, Generation: m.rec.generation(t.name)})
			}
		}
	}
}

// planPodGroup asks for the PodGroup of the job's minimum still to be placed (see podGroupSpec),
// unless the job's one pod carries its group.
func (m *machine) planPodGroup(p *plan, released map[string]bool) {
	if groupOnPod(m.job, m.o.GroupObjects) {
		return // its pod carries it
	}
	counts := m.countTasks()
	need := map[string]int32{}
	var succeeded int32
	for _, t := range m.spec.tasks {
		succeeded += counts[t.name].succeeded
		if released[t.name] {
			need[t.name] = max(0, t.min-counts[t.name].succeeded)
		}
	}
	if spec, ok := podGroupSpec(m.job, &m.spec, need, m.spec.min-succeeded); ok {
		p.podGroup = &spec
	}
}

// outcome applies the rules that end a job when no policy did: it completes once minSuccess
// pods succeeded, or once every pod has ended and enough succeeded (minSuccess, or else
// minAvailable and each task's own minAvailable); it fails as soon as too many pods failed for
// that to happen. Failed pods that a policy is still waiting on (a timeout) are not counted.
func (m *machine) outcome(handled map[types.UID]bool) *change {
	tasks := m.countTasks()
	var succeeded, failed, live int32
	for _, t := range m.spec.tasks {
		c := tasks[t.name]
		succeeded += c.succeeded
		live += c.live
	}
	failedByTask := map[string]int32{}
	for _, pod := range m.pods {
		if pod.kind == current && pod.Status.Phase == corev1.PodFailed && !evictedFailure(pod.Pod) && !m.rec.restarting(pod.UID) && !handled[pod.UID] {
			failed++
			failedByTask[pod.task]++
		}
	}
	needed := m.spec.min
	if m.spec.minSuccess > 0 {
		needed = m.spec.minSuccess
		if succeeded >= needed {
			return &change{batchv1alpha1.JobCompleting, ReasonMinSuccess,
				fmt.Sprintf("%d pods succeeded (minSuccess %d)", succeeded, needed)}
		}
	}
	if m.spec.replicas-failed < needed {
		return &change{batchv1alpha1.JobFailed, ReasonTooManyFailed,
			fmt.Sprintf("%d pods failed: at most %d of %d pods can succeed, fewer than the %d needed", failed, m.spec.replicas-failed, m.spec.replicas, needed)}
	}
	if m.spec.minSuccess == 0 {
		for _, t := range m.spec.tasks {
			if t.spec.MinAvailable != nil && t.replicas-failedByTask[t.name] < t.min {
				return &change{batchv1alpha1.JobFailed, ReasonTooManyFailed,
					fmt.Sprintf("task %s: %d pods failed: at most %d of its %d pods can succeed, fewer than its minAvailable %d", t.name, failedByTask[t.name], t.replicas-failedByTask[t.name], t.replicas, t.min)}
			}
		}
	}
	// Ended: nothing runs or will be created. A task that waits for dependencies that have all
	// ended cannot start any more.
	if live > 0 || len(handled) > 0 {
		return nil
	}
	released := m.released()
	for _, t := range m.spec.tasks {
		if released[t.name] && tasks[t.name].present < t.replicas {
			return nil
		}
	}
	for _, pod := range m.pods {
		if pod.kind == stale && pod.live() {
			return nil
		}
	}
	if succeeded >= needed {
		return &change{batchv1alpha1.JobCompleted, ReasonPodsSucceeded,
			fmt.Sprintf("every pod ended: %d succeeded, %d failed", succeeded, failed)}
	}
	return &change{batchv1alpha1.JobFailed, ReasonTooManyFailed,
		fmt.Sprintf("every pod ended: %d succeeded, fewer than the %d needed", succeeded, needed)}
}
