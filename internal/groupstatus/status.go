// Package groupstatus decides the status a PodGroup's members make it: its phase, how many
// members run, succeeded and failed, and its conditions (whether its minimum has been scheduled,
// why it cannot be, its SLA waiting time and its runtime estimate). It decides in one place for
// the PodGroup controller (controllers/podgroup), which writes it, and for those who show or count
// groups whose status nobody writes: the upstream PodGroup adapter (controllers/upstream), the
// Queue controller (controllers/queue) and kubectl tephra.
package groupstatus

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/disruption"
)

// Condition reasons of a PodGroup's status besides the scheduler's (v1alpha1.Reason*).
const (
	// ReasonMinMemberRunning: Scheduled is True, the group's minimum has run.
	ReasonMinMemberRunning = "MinMemberRunning"
	// ReasonMinMemberNotRunning: Scheduled is False, the group's minimum has not run yet.
	ReasonMinMemberNotRunning = "MinMemberNotRunning"
	// ReasonUnschedulable: Unschedulable is True for a reason the scheduler did not name.
	ReasonUnschedulable = corev1.PodReasonUnschedulable
	// ReasonScheduled: Unschedulable is False because the group's minimum has run.
	ReasonScheduled = "Scheduled"
	// ReasonSchedulable: Unschedulable is False because no member is reported unschedulable.
	ReasonSchedulable = "Schedulable"
	// ReasonFinished: Unschedulable is False because every member ended before the minimum ran.
	ReasonFinished = "Finished"
)

// memberCounts sorts a group's members by where they are in their lives.
type memberCounts struct {
	running, succeeded, failed int32
	// waiting members are neither running nor finished: not yet placed, starting, or being
	// deleted (a deleted pod no longer counts as running, and may still end either way).
	waiting int32
}

// live counts the members that can still make up the minimum: all but the failed.
func (c memberCounts) live() int32 { return c.running + c.succeeded + c.waiting }

func (c memberCounts) total() int32 { return c.live() + c.failed }

func countMembers(pods []corev1.Pod) memberCounts {
	var c memberCounts
	for i := range pods {
		c.add(&pods[i])
	}
	return c
}

func (c *memberCounts) add(pod *corev1.Pod) {
	switch {
	case pod.Status.Phase == corev1.PodSucceeded:
		c.succeeded++
	case pod.Status.Phase == corev1.PodFailed:
		c.failed++
	case pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil:
		c.running++
	default:
		c.waiting++
	}
}

// MinMemberOf is spec.minMember, at least 1 as the CRD defaults it (objects that skipped the
// apiserver, as in tests, may hold 0).
func MinMemberOf(group *schedulingv1alpha1.PodGroup) int32 {
	return max(group.Spec.MinMember, 1)
}

// phaseOf decides a group's phase from its members, its minMember, and whether its minimum has
// ever run (hasRun: the Scheduled condition is True). The first rule that matches wins:
//
//   - Pending: the group has no members.
//   - Completed: no member is waiting or running, and at least minMember succeeded.
//   - Failed: no member is waiting or running, and fewer than minMember succeeded: the group can
//     no longer complete.
//   - Running: at least minMember members are running or succeeded, and so are the minimums of
//     all its sub-groups (subGroups.run). This includes a group whose minimum has
//     already succeeded while more members wait: it has not finished.
//   - Unknown: the group has run before and now some, but fewer than minMember, members are
//     running or succeeded: it lost part of its minimum.
//   - Inqueue: at least minMember members that can still make up the minimum exist (failed ones
//     cannot), and so do the minimums of all its sub-groups: the gang is being placed.
//   - Pending: fewer than minMember such members exist; the group waits for more.
func phaseOf(c memberCounts, minMember int32, subGroups subGroupMinimums, hasRun bool) schedulingv1alpha1.PodGroupPhase {
	placed := c.running + c.succeeded
	switch {
	case c.total() == 0:
		return schedulingv1alpha1.PodGroupPending
	case c.waiting == 0 && c.running == 0 && c.succeeded >= minMember:
		return schedulingv1alpha1.PodGroupCompleted
	case c.waiting == 0 && c.running == 0:
		return schedulingv1alpha1.PodGroupFailed
	case placed >= minMember && subGroups.run:
		return schedulingv1alpha1.PodGroupRunning
	case hasRun && placed > 0:
		return schedulingv1alpha1.PodGroupUnknown
	case c.live() >= minMember && subGroups.exist:
		return schedulingv1alpha1.PodGroupInqueue
	default:
		return schedulingv1alpha1.PodGroupPending
	}
}

// Desired decides the status of group from its member pods. It starts from the group's
// current status so that conditions keep their lastTransitionTime while they hold.
//
// A group whose minimum exists enters its queue (Inqueue) only when the queue admits it: hold
// (HoldOf) says why it does not (empty when it does), and the group stays Pending with that
// reason.
//
// jobPhase is the phase of the Tephra Job that owns the group ("" for none): once the job has
// ended, the group says how (phaseOfJob).
func Desired(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod, hold Hold, jobPhase batchv1alpha1.JobPhase) schedulingv1alpha1.PodGroupStatus {
	status := *group.Status.DeepCopy()
	counts := countMembers(pods)
	minMember := MinMemberOf(group)
	hasRun := meta.IsStatusConditionTrue(status.Conditions, schedulingv1alpha1.PodGroupScheduled)

	subGroups := subGroupStatuses(group, pods)
	minimums := subGroupMinimumsOf(group, subGroups)
	status.Phase = phaseOf(counts, minMember, minimums, hasRun)
	if phase, ended := phaseOfJob(jobPhase); ended {
		status.Phase = phase
	} else if jobPhase == batchv1alpha1.JobCompleting && group.Status.Phase != "" &&
		(status.Phase == schedulingv1alpha1.PodGroupFailed || status.Phase == schedulingv1alpha1.PodGroupUnknown) {
		// The job is killing the pods it no longer needs: they do not make the group Failed or
		// Unknown on its way to Completed.
		status.Phase = group.Status.Phase
	}
	if cond, ok := minMemberLoweredCondition(group); ok {
		cond.ObservedGeneration = group.Generation
		meta.SetStatusCondition(&status.Conditions, cond)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, schedulingv1alpha1.PodGroupMinMemberLowered)
	}
	status.Running, status.Succeeded, status.Failed = counts.running, counts.succeeded, counts.failed
	status.SubGroups = subGroups
	status.WholeSubGroups = 0
	for _, sub := range subGroups {
		if sub.Whole {
			status.WholeSubGroups++
		}
	}

	scheduled := scheduledCondition(counts, minMember, minimums.run, hasRun)
	unschedulable := unschedulableCondition(group, pods, counts, status.Phase, scheduled.Status == metav1.ConditionTrue)
	if cond, ok := slaCondition(group, status.Phase, now()); ok {
		cond.ObservedGeneration = group.Generation
		meta.SetStatusCondition(&status.Conditions, cond)
	}
	if phase := held(status.Phase, counts, hold); phase != status.Phase {
		status.Phase = phase
		unschedulable.Status, unschedulable.Reason, unschedulable.Message = metav1.ConditionTrue, hold.Reason, hold.Message
	}
	for _, cond := range []metav1.Condition{scheduled, unschedulable} {
		cond.ObservedGeneration = group.Generation
		meta.SetStatusCondition(&status.Conditions, cond)
	}
	if cond, ok := runtimeCondition(group, &status, now()); ok {
		cond.ObservedGeneration = group.Generation
		meta.SetStatusCondition(&status.Conditions, cond)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, schedulingv1alpha1.PodGroupRuntimeEstimateExceeded)
	}
	return status
}

// Of is the status a group's members call for, as the PodGroup controller decides it for a group
// that no Tephra Job owns, held by its queue as HoldOf decides with queues and nsLabels (the
// labels of its namespace). The upstream PodGroup adapter (controllers/upstream) reads it for
// groups that exist in memory only, whose status nobody writes: their members are all there is to
// read.
func Of(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod, queues []*schedulingv1alpha1.Queue, nsLabels map[string]string) schedulingv1alpha1.PodGroupStatus {
	return Desired(group, pods, HoldOf(group, queues, nsLabels), "")
}

// OfMembers is Of for a group whose queue admits it: the status its members make it, for those
// who show a group that no one writes the status of (kubectl tephra, for upstream PodGroups) and
// do not decide whether its queue admits it.
func OfMembers(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod) schedulingv1alpha1.PodGroupStatus {
	return Desired(group, pods, Hold{}, "")
}

// Phase is the phase a group's members make it, as the PodGroup controller decides it for a group
// that no Tephra Job owns, held by its queue as hold says (an empty Hold: its queue admits it):
// for those who count groups by phase from their pods (the Queue controller, kubectl tephra).
func Phase(group *schedulingv1alpha1.PodGroup, pods []*corev1.Pod, hold Hold) schedulingv1alpha1.PodGroupPhase {
	var c memberCounts
	for _, pod := range pods {
		c.add(pod)
	}
	minimums := subGroupMinimums{run: true, exist: true}
	if len(group.Spec.SubGroups) > 0 {
		values := make([]corev1.Pod, len(pods))
		for i, pod := range pods {
			values[i] = *pod
		}
		minimums = subGroupMinimumsOf(group, subGroupStatuses(group, values))
	}
	phase := phaseOf(c, MinMemberOf(group), minimums, meta.IsStatusConditionTrue(group.Status.Conditions, schedulingv1alpha1.PodGroupScheduled))
	return held(phase, c, hold)
}

// held is the phase of a group whose queue holds it (hold not empty): a group that would be
// Inqueue with nothing of it run stays Pending.
func held(phase schedulingv1alpha1.PodGroupPhase, c memberCounts, hold Hold) schedulingv1alpha1.PodGroupPhase {
	if phase == schedulingv1alpha1.PodGroupInqueue && c.running+c.succeeded == 0 && hold.Reason != "" {
		return schedulingv1alpha1.PodGroupPending
	}
	return phase
}

// subGroupStatuses counts the members of each of the group's sub-groups (nil without any).
func subGroupStatuses(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod) []schedulingv1alpha1.SubGroupStatus {
	if len(group.Spec.SubGroups) == 0 {
		return nil
	}
	bySubGroup := map[string][]corev1.Pod{}
	for i := range pods {
		sub := schedulingv1alpha1.SubGroupOf(&pods[i])
		bySubGroup[sub] = append(bySubGroup[sub], pods[i])
	}
	out := make([]schedulingv1alpha1.SubGroupStatus, 0, len(group.Spec.SubGroups))
	for _, sub := range group.Spec.SubGroups {
		c := countMembers(bySubGroup[sub.Name])
		out = append(out, schedulingv1alpha1.SubGroupStatus{
			Name: sub.Name, Pending: c.waiting, Running: c.running, Succeeded: c.succeeded, Failed: c.failed,
			Whole: c.running+c.succeeded >= max(sub.MinMember, 1),
		})
	}
	return out
}

// subGroupMinimums says whether the minimums of the group's minimum of sub-groups
// (spec.minSubGroups, else all) run (or have succeeded), and whether they exist; both hold for a
// group without sub-groups.
type subGroupMinimums struct{ run, exist bool }

func subGroupMinimumsOf(group *schedulingv1alpha1.PodGroup, subGroups []schedulingv1alpha1.SubGroupStatus) subGroupMinimums {
	run, exist := 0, 0
	for i, sub := range subGroups {
		if sub.Whole {
			run++
		}
		if sub.Pending+sub.Running+sub.Succeeded >= max(group.Spec.SubGroups[i].MinMember, 1) {
			exist++
		}
	}
	want := schedulingv1alpha1.MinSubGroupsOf(&group.Spec)
	return subGroupMinimums{run: run >= want, exist: exist >= want}
}

// phaseOfJob is the phase of a group whose Job has ended. A job ends by its own rules (a
// CompleteJob policy, minSuccess) while members it no longer needs are killed or never ran, which
// the members alone would read as Failed or Unknown: the group of a completed job is Completed,
// of a failed one Failed.
func phaseOfJob(phase batchv1alpha1.JobPhase) (schedulingv1alpha1.PodGroupPhase, bool) {
	switch phase {
	case batchv1alpha1.JobCompleted:
		return schedulingv1alpha1.PodGroupCompleted, true
	case batchv1alpha1.JobFailed:
		return schedulingv1alpha1.PodGroupFailed, true
	}
	return "", false
}

// Reasons of the MinMemberLowered condition.
const (
	ReasonMembersSucceeded = "MembersSucceeded"
	ReasonJobMinimum       = "JobMinimum"
)

// minMemberLoweredCondition compares the group's minMember with its Job's whole minimum
// (annotation JobMinMemberAnnotation, written by the Job controller): ok is false for a group
// without one.
func minMemberLoweredCondition(group *schedulingv1alpha1.PodGroup) (metav1.Condition, bool) {
	value, ok := group.Annotations[schedulingv1alpha1.JobMinMemberAnnotation]
	if !ok {
		return metav1.Condition{}, false
	}
	jobMin, err := strconv.Atoi(value)
	if err != nil {
		return metav1.Condition{}, false
	}
	cond := metav1.Condition{Type: schedulingv1alpha1.PodGroupMinMemberLowered, Status: metav1.ConditionFalse,
		Reason: ReasonJobMinimum, Message: fmt.Sprintf("minMember is the job's minimum, %d", jobMin)}
	if int(group.Spec.MinMember) < jobMin {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonMembersSucceeded
		cond.Message = fmt.Sprintf("minMember is %d, below the job's minimum of %d: pods that succeeded do not run again, and the gang needs only the pods still to run",
			group.Spec.MinMember, jobMin)
	}
	return cond, true
}

// scheduledCondition is True from the first time minMember members are running or succeeded
// (and the minimums of all its sub-groups),
// and stays True: it records that the gang was placed, which phaseOf needs to tell a group that
// lost part of its minimum (Unknown) from one that is still being placed.
func scheduledCondition(c memberCounts, minMember int32, subGroupsRun, hasRun bool) metav1.Condition {
	if hasRun || c.running+c.succeeded >= minMember && subGroupsRun {
		return metav1.Condition{
			Type: schedulingv1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue,
			Reason: ReasonMinMemberRunning, Message: "minMember pods of the group have run",
		}
	}
	return metav1.Condition{
		Type: schedulingv1alpha1.PodGroupScheduled, Status: metav1.ConditionFalse,
		Reason:  ReasonMinMemberNotRunning,
		Message: fmt.Sprintf("%d of %d pods are running or succeeded (minMember %d)", c.running+c.succeeded, minMember, minMember),
	}
}

// unschedulableCondition says why a Pending or Inqueue group cannot be placed. Too few members
// come first: the scheduler cannot place a minimum that does not exist, whatever else it
// reports. Otherwise the group takes the most recent Unschedulable PodScheduled condition of
// its members, by the Tephra reason the scheduler put in its message.
func unschedulableCondition(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod, c memberCounts,
	phase schedulingv1alpha1.PodGroupPhase, scheduled bool) metav1.Condition {
	cond := metav1.Condition{Type: schedulingv1alpha1.PodGroupUnschedulable, Status: metav1.ConditionFalse}
	switch {
	case phase != schedulingv1alpha1.PodGroupPending && phase != schedulingv1alpha1.PodGroupInqueue:
		cond.Reason, cond.Message = ReasonScheduled, "the group's minimum has run"
		if !scheduled {
			cond.Reason, cond.Message = ReasonFinished, "every member ended before the group's minimum ran"
		}
		return cond
	}
	if msg, short := missingMembers(group, pods, c); short {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, schedulingv1alpha1.ReasonWaitingForMembers, msg
		return cond
	}
	podCond := latestUnschedulable(pods)
	if podCond == nil {
		cond.Reason, cond.Message = ReasonSchedulable, "no member is reported unschedulable"
		return cond
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonUnschedulable, podCond.Message
	if reason, from, ok := schedulingv1alpha1.ReasonIn(podCond.Message); ok {
		cond.Reason, cond.Message = reason, from
	} else if strings.Contains(podCond.Message, upstreamMinCountUnmet) {
		// With GenericWorkload on in tephra-scheduler, kube-scheduler's own pod-group cycle
		// reports the group of an upstream PodGroup that does not fit, in its own words.
		cond.Reason = schedulingv1alpha1.ReasonNotEnoughResources
	}
	return cond
}

// upstreamMinCountUnmet is in the message of kube-scheduler's pod-group cycle for a gang whose
// minCount it could not place ("minCount (7) cannot be satisfied: 6 scheduled, 0 remaining").
const upstreamMinCountUnmet = ") cannot be satisfied: "

// missingMembers says how the group falls short of minMember, or of a task's minTaskMember,
// counting the members that can still be placed. short is false when nothing is missing.
func missingMembers(group *schedulingv1alpha1.PodGroup, pods []corev1.Pod, c memberCounts) (msg string, short bool) {
	minMember := MinMemberOf(group)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d pods exist (minMember %d)", c.live(), minMember, minMember)
	if c.failed > 0 {
		// A member that ended because it was disrupted (its node lost, an eviction) is named
		// as such: it is no failure of the workload, and its job may replace it.
		var evicted []string
		for i := range pods {
			if cause, disrupted := disruption.Of(&pods[i]); disrupted && pods[i].Status.Phase == corev1.PodFailed {
				evicted = append(evicted, fmt.Sprintf("%s: %s", pods[i].Name, cause.Message))
			}
		}
		slices.Sort(evicted)
		if failed := int(c.failed) - len(evicted); failed > 0 {
			fmt.Fprintf(&b, ", not counting %d failed", failed)
		}
		if len(evicted) > 0 {
			fmt.Fprintf(&b, ", not counting %d evicted (%s)", len(evicted), strings.Join(evicted, "; "))
		}
	}
	short = c.live() < minMember

	perTask := map[string]int32{}
	for i := range pods {
		if pods[i].Status.Phase != corev1.PodFailed {
			perTask[schedulingv1alpha1.TaskOf(&pods[i])]++
		}
	}
	tasks := make([]string, 0, len(group.Spec.MinTaskMember))
	for task := range group.Spec.MinTaskMember {
		tasks = append(tasks, task)
	}
	slices.Sort(tasks) // a stable message, so that the status is not rewritten for nothing
	for _, task := range tasks {
		if have, want := perTask[task], group.Spec.MinTaskMember[task]; have < want {
			fmt.Fprintf(&b, "; task %s: %d of %d pods exist (minTaskMember %d)", task, have, want, want)
			short = true
		}
	}
	if len(group.Spec.SubGroups) > 0 {
		perSubGroup := map[string]int32{}
		for i := range pods {
			if pods[i].Status.Phase != corev1.PodFailed {
				perSubGroup[schedulingv1alpha1.SubGroupOf(&pods[i])]++
			}
		}
		whole, want := 0, schedulingv1alpha1.MinSubGroupsOf(&group.Spec)
		var lacking []string
		for _, sub := range group.Spec.SubGroups {
			if have, need := perSubGroup[sub.Name], max(sub.MinMember, 1); have >= need {
				whole++
			} else {
				lacking = append(lacking, fmt.Sprintf("%s has %d of %d", sub.Name, have, need))
			}
		}
		if whole < want {
			fmt.Fprintf(&b, "; %d of the %d sub-groups it needs have their minimum of pods (%s)", whole, want, strings.Join(lacking, ", "))
			short = true
		}
	}
	return b.String(), short
}

// latestUnschedulable returns the most recent (by lastTransitionTime, then pod name for a
// stable choice) PodScheduled=False condition with reason Unschedulable among the unbound pods, or
// nil. A bound pod's is stale: kube-scheduler writes it back over the bind when a cycle begun
// before someone else bound the pod fails.
//
// A verdict on the whole group (a reason of Tephra's, or kube-scheduler's pod-group cycle saying
// the group's minCount cannot be satisfied) is preferred to a member's own filter message written
// within a second of it: one failed cycle writes both, the verdict on the members it placed and
// the filter message on the member it could not, and which of them is the later one, or the
// first by name, is chance.
func latestUnschedulable(pods []corev1.Pod) *corev1.PodCondition {
	var latest, verdict *corev1.PodCondition
	var latestPod, verdictPod string
	newer := func(cond *corev1.PodCondition, pod string, than *corev1.PodCondition, thanPod string) bool {
		return than == nil || cond.LastTransitionTime.After(than.LastTransitionTime.Time) ||
			(cond.LastTransitionTime.Equal(&than.LastTransitionTime) && pod < thanPod)
	}
	for i := range pods {
		if pods[i].Spec.NodeName != "" {
			continue
		}
		for j := range pods[i].Status.Conditions {
			cond := &pods[i].Status.Conditions[j]
			if cond.Type != corev1.PodScheduled || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
				continue
			}
			if newer(cond, pods[i].Name, latest, latestPod) {
				latest, latestPod = cond, pods[i].Name
			}
			if isGroupVerdict(cond.Message) && newer(cond, pods[i].Name, verdict, verdictPod) {
				verdict, verdictPod = cond, pods[i].Name
			}
		}
	}
	if verdict != nil && !verdict.LastTransitionTime.Add(time.Second).Before(latest.LastTransitionTime.Time) {
		return verdict
	}
	return latest
}

// isGroupVerdict says whether a member's refusal speaks of its whole group.
func isGroupVerdict(message string) bool {
	_, _, ok := schedulingv1alpha1.ReasonIn(message)
	return ok || strings.Contains(message, upstreamMinCountUnmet)
}

// now is time.Now, replaceable in tests.
var now = time.Now

// slaOf returns the group's SLA waiting time from its annotation (0: none or malformed).
func slaOf(group *schedulingv1alpha1.PodGroup) time.Duration {
	d, err := time.ParseDuration(group.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation])
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// slaCondition says whether a group with an SLA waiting time has waited past it for its minimum;
// ok is false for groups without one.
func slaCondition(group *schedulingv1alpha1.PodGroup, phase schedulingv1alpha1.PodGroupPhase, at time.Time) (metav1.Condition, bool) {
	sla := slaOf(group)
	if sla == 0 {
		return metav1.Condition{}, false
	}
	cond := metav1.Condition{Type: schedulingv1alpha1.PodGroupSLAExceeded, Status: metav1.ConditionFalse, Reason: "WithinSLA",
		Message: fmt.Sprintf("the group's SLA waiting time is %v", sla)}
	waited := at.Sub(group.CreationTimestamp.Time)
	switch {
	case phase != schedulingv1alpha1.PodGroupPending && phase != schedulingv1alpha1.PodGroupInqueue:
		cond.Reason, cond.Message = "MinimumRan", "the group's minimum has run"
	case waited >= sla:
		cond.Status, cond.Reason = metav1.ConditionTrue, "WaitedPastSLA"
		cond.Message = fmt.Sprintf("the group has waited past its SLA waiting time of %v; tephra-scheduler reserves nodes for it and keeps later pods off them until its minimum runs", sla)
	}
	return cond, true
}

// SLARecheck is when the group's SLA condition may change without any event: when its SLA
// waiting time ends while it waits. 0: never.
func SLARecheck(group *schedulingv1alpha1.PodGroup, at time.Time) time.Duration {
	sla := slaOf(group)
	phase := group.Status.Phase
	if sla == 0 || (phase != schedulingv1alpha1.PodGroupPending && phase != schedulingv1alpha1.PodGroupInqueue) {
		return 0
	}
	if left := sla - at.Sub(group.CreationTimestamp.Time); left > 0 {
		return left + 100*time.Millisecond
	}
	return 0
}
