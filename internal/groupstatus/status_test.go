package groupstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const testNamespace = "team-a"

var t0 = metav1.NewTime(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))

// member is a pod of group "train" in phase, with options applied.
func member(name string, phase corev1.PodPhase, opts ...func(*corev1.Pod)) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace,
			Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, opt := range opts {
		opt(&pod)
	}
	return pod
}

func inTask(task string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[schedulingv1alpha1.TaskLabel] = task }
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &t0 }

func unschedulable(message string, at metav1.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: message, LastTransitionTime: at,
		})
	}
}

func pods(phases ...corev1.PodPhase) []corev1.Pod {
	var out []corev1.Pod
	for i, phase := range phases {
		out = append(out, member(string(rune('a'+i)), phase))
	}
	return out
}

func group(minMember int32, minTaskMember map[string]int32) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: testNamespace, Generation: 3},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, MinTaskMember: minTaskMember},
	}
}

func TestCountMembers(t *testing.T) {
	got := countMembers([]corev1.Pod{
		member("run", corev1.PodRunning),
		member("run-deleted", corev1.PodRunning, deleting),
		member("pending", corev1.PodPending),
		member("unknown", corev1.PodUnknown),
		member("ok", corev1.PodSucceeded),
		member("ok-deleted", corev1.PodSucceeded, deleting),
		member("bad", corev1.PodFailed),
	})
	assert.Equal(t, memberCounts{running: 1, succeeded: 2, failed: 1, waiting: 3}, got)
}

func TestPhaseOf(t *testing.T) {
	const (
		pending   = schedulingv1alpha1.PodGroupPending
		inqueue   = schedulingv1alpha1.PodGroupInqueue
		running   = schedulingv1alpha1.PodGroupRunning
		completed = schedulingv1alpha1.PodGroupCompleted
		failed    = schedulingv1alpha1.PodGroupFailed
		unknown   = schedulingv1alpha1.PodGroupUnknown
	)
	cases := []struct {
		name   string
		counts memberCounts
		hasRun bool
		want   schedulingv1alpha1.PodGroupPhase
	}{
		{"no members", memberCounts{}, false, pending},
		{"no members after running", memberCounts{}, true, pending},
		{"fewer than minMember exist", memberCounts{waiting: 3}, false, pending},
		{"failed members do not make up the minimum", memberCounts{waiting: 3, failed: 1}, false, pending},
		{"some placed, too few exist, never ran", memberCounts{running: 2, waiting: 1}, false, pending},
		{"minMember exist, none placed", memberCounts{waiting: 4}, false, inqueue},
		{"minMember exist, some placed", memberCounts{running: 2, waiting: 2}, false, inqueue},
		{"succeeded members count as existing", memberCounts{succeeded: 1, waiting: 3}, false, inqueue},
		{"all placed members lost after running, minimum recreated", memberCounts{waiting: 4}, true, inqueue},
		{"all placed members lost after running, too few recreated", memberCounts{waiting: 2}, true, pending},
		{"minMember running", memberCounts{running: 4}, false, running},
		{"more than minMember, some waiting", memberCounts{running: 4, waiting: 2}, false, running},
		{"running plus succeeded make the minimum", memberCounts{running: 1, succeeded: 3}, false, running},
		{"minimum succeeded, one still waiting", memberCounts{succeeded: 4, waiting: 1}, true, running},
		{"lost part of the minimum after running", memberCounts{running: 2, waiting: 2}, true, unknown},
		{"lost part of the minimum, one finished", memberCounts{running: 1, succeeded: 1, failed: 2}, true, unknown},
		{"all succeeded", memberCounts{succeeded: 4}, true, completed},
		{"minimum succeeded, extras failed", memberCounts{succeeded: 4, failed: 2}, true, completed},
		{"too few succeeded", memberCounts{succeeded: 3, failed: 1}, true, failed},
		{"all failed before running", memberCounts{failed: 4}, false, failed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, phaseOf(tc.counts, 4, subGroupMinimums{run: true, exist: true}, tc.hasRun))
		})
	}
}

func TestTephraReasonIn(t *testing.T) {
	cases := []struct {
		message, reason, from string
	}{
		{
			"0/4 nodes are available: 4 Insufficient cpu. NotEnoughResources: 3 of 6 pods could be placed",
			"NotEnoughResources", "NotEnoughResources: 3 of 6 pods could be placed",
		},
		{"PodGroupNotFound: pod group team-a/x does not exist", "PodGroupNotFound", "PodGroupNotFound: pod group team-a/x does not exist"},
		{
			"0/4 nodes are available: InvalidPodGroup: bad name. preemption: not helpful",
			"InvalidPodGroup", "InvalidPodGroup: bad name. preemption: not helpful",
		},
		{
			"ScheduleTimeout: waited 60s; WaitingForMembers: 2 of 6 pods exist",
			"ScheduleTimeout", "ScheduleTimeout: waited 60s; WaitingForMembers: 2 of 6 pods exist",
		},
		{"0/4 nodes are available: 4 Insufficient cpu.", "", ""},
		{"MyNotEnoughResources: inside a word", "", ""},
		{"NotEnoughResources without a colon", "", ""},
	}
	for _, tc := range cases {
		reason, from, ok := schedulingv1alpha1.ReasonIn(tc.message)
		assert.Equal(t, tc.reason != "", ok, tc.message)
		assert.Equal(t, tc.reason, reason, tc.message)
		assert.Equal(t, tc.from, from, tc.message)
	}
}

func TestUnschedulableCondition(t *testing.T) {
	later := metav1.NewTime(t0.Add(time.Minute))
	cases := []struct {
		name      string
		group     *schedulingv1alpha1.PodGroup
		pods      []corev1.Pod
		phase     schedulingv1alpha1.PodGroupPhase
		scheduled bool
		status    metav1.ConditionStatus
		reason    string
		message   string
	}{
		{
			name: "no members", group: group(6, nil), phase: schedulingv1alpha1.PodGroupPending,
			status: metav1.ConditionTrue, reason: "WaitingForMembers", message: "0 of 6 pods exist (minMember 6)",
		},
		{
			name: "too few members win over the scheduler's reason", group: group(6, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, unschedulable("NotEnoughResources: 1 of 6 pods could be placed", t0)),
				member("b", corev1.PodPending), member("c", corev1.PodFailed),
			},
			phase:  schedulingv1alpha1.PodGroupPending,
			status: metav1.ConditionTrue, reason: "WaitingForMembers", message: "2 of 6 pods exist (minMember 6), not counting 1 failed",
		},
		{
			name: "a member lost with its node is evicted, not failed", group: group(3, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodRunning), member("b", corev1.PodFailed),
				member("c", corev1.PodFailed, func(p *corev1.Pod) {
					p.Spec.NodeName = "node-7"
					p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
						Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC"})
				}),
			},
			phase:  schedulingv1alpha1.PodGroupPending,
			status: metav1.ConditionTrue, reason: "WaitingForMembers",
			message: "1 of 3 pods exist (minMember 3), not counting 1 failed, not counting 1 evicted (c: its node node-7 is gone (the pod garbage collector removed it))",
		},
		{
			name:  "short tasks are named, in order",
			group: group(3, map[string]int32{"worker": 2, "ps": 1, "chief": 1}),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, inTask("worker")), member("b", corev1.PodPending, inTask("chief")),
				member("c", corev1.PodPending, inTask("evaluator")), member("d", corev1.PodFailed, inTask("worker")),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "WaitingForMembers",
			message: "3 of 3 pods exist (minMember 3), not counting 1 failed; task ps: 0 of 1 pods exist (minTaskMember 1); task worker: 1 of 2 pods exist (minTaskMember 2)",
		},
		{
			name: "the most recent pod condition gives the Tephra reason", group: group(2, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, unschedulable("PodGroupNotFound: old news", t0)),
				member("b", corev1.PodPending, unschedulable("0/4 nodes are available: 4 Insufficient cpu. NotEnoughResources: 1 of 2 pods could be placed; preemption: no victims", later)),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "NotEnoughResources",
			message: "NotEnoughResources: 1 of 2 pods could be placed; preemption: no victims",
		},
		{
			name: "kube-scheduler's own pod-group cycle: not enough resources", group: group(7, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, unschedulable("pod group is unschedulable, minCount (7) cannot be satisfied: 6 scheduled, 0 remaining", t0)),
				member("b", corev1.PodPending), member("c", corev1.PodPending), member("d", corev1.PodPending),
				member("e", corev1.PodPending), member("f", corev1.PodPending), member("g", corev1.PodPending),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "NotEnoughResources",
			message: "pod group is unschedulable, minCount (7) cannot be satisfied: 6 scheduled, 0 remaining",
		},
		{
			name: "one failed pod-group cycle: its verdict on the group, not the member it could not place", group: group(3, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, unschedulable("0/1 nodes are available: 1 Insufficient cpu.", metav1.NewTime(t0.Add(500*time.Millisecond)))),
				member("b", corev1.PodPending, unschedulable("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining", t0)),
				member("c", corev1.PodPending, unschedulable("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining", t0)),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "NotEnoughResources",
			message: "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
		},
		{
			name: "a member's own message well after the group's verdict is the news", group: group(2, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, unschedulable("0/1 nodes are available: 1 Insufficient cpu.", later)),
				member("b", corev1.PodPending, unschedulable("NotEnoughResources: 1 of 2 pods could be placed", t0)),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "Unschedulable", message: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "a bound member's Unschedulable, written back over its bind by a stale cycle, is old news", group: group(3, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodRunning, unschedulable("PodGroupNotFound: written back after the bind", later),
					func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }),
				member("b", corev1.PodPending, unschedulable("NotEnoughResources: 1 of 3 pods could be placed", t0)),
				member("c", corev1.PodPending),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "NotEnoughResources", message: "NotEnoughResources: 1 of 3 pods could be placed",
		},
		{
			name: "equal times: the first pod by name", group: group(2, nil),
			pods: []corev1.Pod{
				member("b", corev1.PodPending, unschedulable("InvalidPodGroup: from b", t0)),
				member("a", corev1.PodPending, unschedulable("PodGroupNotFound: from a", t0)),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "PodGroupNotFound", message: "PodGroupNotFound: from a",
		},
		{
			name: "no Tephra reason: the pod's reason and message", group: group(2, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodPending, unschedulable("0/4 nodes are available: 4 Insufficient cpu.", t0)),
				member("b", corev1.PodPending),
			},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionTrue, reason: "Unschedulable", message: "0/4 nodes are available: 4 Insufficient cpu.",
		},
		{
			name: "nobody reported unschedulable", group: group(2, nil),
			pods:   []corev1.Pod{member("a", corev1.PodPending), member("b", corev1.PodRunning)},
			phase:  schedulingv1alpha1.PodGroupInqueue,
			status: metav1.ConditionFalse, reason: "Schedulable", message: "no member is reported unschedulable",
		},
		{
			name: "a running group is not unschedulable, whatever its pods say", group: group(1, nil),
			pods: []corev1.Pod{
				member("a", corev1.PodRunning),
				member("b", corev1.PodPending, unschedulable("NotEnoughResources: 0 of 1", t0)),
			},
			phase: schedulingv1alpha1.PodGroupRunning, scheduled: true,
			status: metav1.ConditionFalse, reason: "Scheduled", message: "the group's minimum has run",
		},
		{
			name: "failed before running", group: group(2, nil), pods: pods(corev1.PodFailed, corev1.PodFailed),
			phase:  schedulingv1alpha1.PodGroupFailed,
			status: metav1.ConditionFalse, reason: "Finished", message: "every member ended before the group's minimum ran",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := unschedulableCondition(tc.group, tc.pods, countMembers(tc.pods), tc.phase, tc.scheduled)
			assert.Equal(t, metav1.Condition{
				Type: "Unschedulable", Status: tc.status, Reason: tc.reason, Message: tc.message,
			}, got)
		})
	}
}

func TestDesiredStatus(t *testing.T) {
	t.Run("the minimum runs", func(t *testing.T) {
		pg := group(2, nil)
		status := Desired(pg, pods(corev1.PodRunning, corev1.PodRunning, corev1.PodPending), Hold{}, "")

		assert.Equal(t, schedulingv1alpha1.PodGroupRunning, status.Phase)
		assert.Equal(t, [3]int32{2, 0, 0}, [3]int32{status.Running, status.Succeeded, status.Failed})
		scheduled := meta.FindStatusCondition(status.Conditions, "Scheduled")
		require.NotNil(t, scheduled)
		assert.Equal(t, metav1.ConditionTrue, scheduled.Status)
		assert.Equal(t, "MinMemberRunning", scheduled.Reason)
		assert.Equal(t, int64(3), scheduled.ObservedGeneration)
		unsched := meta.FindStatusCondition(status.Conditions, "Unschedulable")
		require.NotNil(t, unsched)
		assert.Equal(t, metav1.ConditionFalse, unsched.Status)
		assert.Equal(t, "Scheduled", unsched.Reason)
		assert.Equal(t, int64(3), unsched.ObservedGeneration)
	})

	t.Run("Scheduled stays True once the minimum ran, and the group becomes Unknown", func(t *testing.T) {
		pg := group(2, nil)
		pg.Status = Desired(pg, pods(corev1.PodRunning, corev1.PodRunning), Hold{}, "")
		since := meta.FindStatusCondition(pg.Status.Conditions, "Scheduled").LastTransitionTime

		status := Desired(pg, pods(corev1.PodRunning, corev1.PodPending), Hold{}, "")

		assert.Equal(t, schedulingv1alpha1.PodGroupUnknown, status.Phase)
		scheduled := meta.FindStatusCondition(status.Conditions, "Scheduled")
		assert.Equal(t, metav1.ConditionTrue, scheduled.Status)
		assert.Equal(t, since, scheduled.LastTransitionTime)
	})

	t.Run("not scheduled yet", func(t *testing.T) {
		status := Desired(group(3, nil), pods(corev1.PodRunning, corev1.PodPending, corev1.PodPending), Hold{}, "")

		assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, status.Phase)
		scheduled := meta.FindStatusCondition(status.Conditions, "Scheduled")
		require.NotNil(t, scheduled)
		assert.Equal(t, metav1.ConditionFalse, scheduled.Status)
		assert.Equal(t, "MinMemberNotRunning", scheduled.Reason)
		assert.Equal(t, "1 of 3 pods are running or succeeded (minMember 3)", scheduled.Message)
	})

	t.Run("unset minMember counts as 1", func(t *testing.T) {
		status := Desired(group(0, nil), pods(corev1.PodSucceeded), Hold{}, "")
		assert.Equal(t, schedulingv1alpha1.PodGroupCompleted, status.Phase)
	})

	t.Run("the same inputs give the same status", func(t *testing.T) {
		pg := group(2, nil)
		members := pods(corev1.PodRunning, corev1.PodPending)
		pg.Status = Desired(pg, members, Hold{}, "")
		assert.Equal(t, pg.Status, Desired(pg, members, Hold{}, ""))
	})
}

func TestQueueHoldKeepsGroupPending(t *testing.T) {
	pg := group(2, nil)
	pg.Spec.Queue = "team"
	pg.Spec.MinResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	members := pods(corev1.PodPending, corev1.PodPending)
	team := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: schedulingv1alpha1.QueueSpec{
		Parent: "root", Capability: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
	}}
	team.Status.Allocated = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}

	hold := HoldOf(pg, []*schedulingv1alpha1.Queue{team}, nil)
	status := Desired(pg, members, hold, "")
	assert.Equal(t, schedulingv1alpha1.PodGroupPending, status.Phase)
	cond := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
	require.NotNil(t, cond)
	assert.Equal(t, schedulingv1alpha1.ReasonQueueCapability, cond.Reason)
	assert.Contains(t, cond.Message, `capability of queue "team" (cpu 5 > 4)`)

	team.Status.Allocated = nil
	assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, Desired(pg, members, HoldOf(pg, []*schedulingv1alpha1.Queue{team}, nil), "").Phase)

	pg.Spec.MinResources[corev1.ResourceCPU] = resource.MustParse("5")
	assert.Equal(t, schedulingv1alpha1.ReasonNeverFits, HoldOf(pg, []*schedulingv1alpha1.Queue{team}, nil).Reason)

	team.Spec.State = schedulingv1alpha1.QueueClosed
	hold = HoldOf(pg, []*schedulingv1alpha1.Queue{team}, nil)
	assert.Equal(t, schedulingv1alpha1.ReasonQueueUnavailable, hold.Reason)
	assert.Contains(t, hold.Message, `queue "team" is closed`)
	pg.Spec.Queue = "nope"
	assert.Contains(t, HoldOf(pg, nil, nil).Message, `queue "nope" does not exist`)

	// Tenancy: a namespace the queue's namespaceSelector does not match waits, Pending, and says
	// which queue and selector refuse it.
	pg.Spec.Queue = "team"
	team.Spec.State = schedulingv1alpha1.QueueOpen
	pg.Spec.MinResources[corev1.ResourceCPU] = resource.MustParse("1")
	team.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	hold = HoldOf(pg, []*schedulingv1alpha1.Queue{team}, map[string]string{"team": "b"})
	assert.Equal(t, schedulingv1alpha1.ReasonQueueForbidden, hold.Reason)
	assert.Contains(t, hold.Message, `namespace "team-a" does not match the namespaceSelector of queue "team" (team=a)`)
	status = Desired(pg, members, hold, "")
	assert.Equal(t, schedulingv1alpha1.PodGroupPending, status.Phase)
	assert.Empty(t, HoldOf(pg, []*schedulingv1alpha1.Queue{team}, map[string]string{"team": "a"}).Reason)
}

// The group of a job that a CompleteJob policy ended, its other members killed, is Completed, not
// Failed as its members alone would have it; a failed job's group is Failed.
func TestAJobsEndDecidesItsGroupsPhase(t *testing.T) {
	pg := group(6, nil)
	pg.Status = Desired(pg, pods(corev1.PodRunning, corev1.PodRunning, corev1.PodRunning, corev1.PodRunning, corev1.PodRunning, corev1.PodRunning), Hold{}, batchv1alpha1.JobRunning)
	require.Equal(t, schedulingv1alpha1.PodGroupRunning, pg.Status.Phase)

	ended := pods(corev1.PodSucceeded, corev1.PodSucceeded, corev1.PodSucceeded, corev1.PodSucceeded, corev1.PodFailed, corev1.PodFailed)
	assert.Equal(t, schedulingv1alpha1.PodGroupFailed, Desired(pg, ended, Hold{}, batchv1alpha1.JobRunning).Phase, "the members alone")
	assert.Equal(t, schedulingv1alpha1.PodGroupRunning, Desired(pg, ended, Hold{}, batchv1alpha1.JobCompleting).Phase,
		"while the job completes, the pods it kills do not fail the group")
	assert.Equal(t, schedulingv1alpha1.PodGroupCompleted, Desired(pg, ended, Hold{}, batchv1alpha1.JobCompleted).Phase)
	assert.Equal(t, schedulingv1alpha1.PodGroupFailed, Desired(pg, pods(corev1.PodSucceeded, corev1.PodRunning), Hold{}, batchv1alpha1.JobFailed).Phase)
}

// A group whose minMember the Job controller lowered says so, with both numbers.
func TestLoweredMinMemberIsSaid(t *testing.T) {
	pg := group(6, nil)
	pg.Annotations = map[string]string{schedulingv1alpha1.JobMinMemberAnnotation: "6"}
	cond := meta.FindStatusCondition(Desired(pg, pods(corev1.PodRunning), Hold{}, "").Conditions, schedulingv1alpha1.PodGroupMinMemberLowered)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)

	pg.Spec.MinMember = 5
	cond = meta.FindStatusCondition(Desired(pg, pods(corev1.PodRunning), Hold{}, "").Conditions, schedulingv1alpha1.PodGroupMinMemberLowered)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, "minMember is 5, below the job's minimum of 6: pods that succeeded do not run again, and the gang needs only the pods still to run", cond.Message)

	delete(pg.Annotations, schedulingv1alpha1.JobMinMemberAnnotation)
	assert.Nil(t, meta.FindStatusCondition(Desired(pg, pods(corev1.PodRunning), Hold{}, "").Conditions, schedulingv1alpha1.PodGroupMinMemberLowered), "a group without a job says nothing")
}

func inSubGroup(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[schedulingv1alpha1.SubGroupLabel] = name }
}

// Each sub-group's members are counted on their own, and one short of members is named in the
// Unschedulable message.
func TestSubGroupsAreCountedEachAndNamedWhenShort(t *testing.T) {
	pg := group(1, nil)
	pg.Spec.SubGroups = []schedulingv1alpha1.SubGroup{{Name: "prefill", MinMember: 2}, {Name: "decode", MinMember: 2}}
	members := []corev1.Pod{
		member("p0", corev1.PodRunning, inSubGroup("prefill")), member("p1", corev1.PodRunning, inSubGroup("prefill")),
		member("d0", corev1.PodPending, inSubGroup("decode")), member("d1", corev1.PodFailed, inSubGroup("decode")),
	}
	status := Desired(pg, members, Hold{}, "")
	assert.Equal(t, []schedulingv1alpha1.SubGroupStatus{
		{Name: "prefill", Running: 2, Whole: true},
		{Name: "decode", Pending: 1, Failed: 1},
	}, status.SubGroups)
	unsched := meta.FindStatusCondition(status.Conditions, "Unschedulable")
	require.NotNil(t, unsched)
	assert.Contains(t, unsched.Message, "1 of the 2 sub-groups it needs have their minimum of pods (decode has 1 of 2)")
	assert.Equal(t, schedulingv1alpha1.PodGroupPending, status.Phase, "the group's minimum counts its sub-groups': it does not run with one of two")
	assert.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(status.Conditions, "Scheduled").Status)

	members[3].Status.Phase = corev1.PodRunning
	members[2].Status.Phase = corev1.PodRunning
	status = Desired(pg, members, Hold{}, "")
	assert.Equal(t, schedulingv1alpha1.PodGroupRunning, status.Phase, "both sub-groups run")
	assert.Equal(t, []schedulingv1alpha1.SubGroupStatus{{Name: "prefill", Running: 2, Whole: true}, {Name: "decode", Running: 2, Whole: true}}, status.SubGroups)

	pg.Spec.SubGroups = nil
	assert.Nil(t, Desired(pg, members, Hold{}, "").SubGroups, "a group without sub-groups shows none")
}

// Phase, for those who count a group whose status nobody writes, keeps a group its queue holds
// Pending as Desired does; once a member runs, the hold no longer matters.
func TestPhaseOfAGroupItsQueueHolds(t *testing.T) {
	pg := group(2, nil)
	pg.Spec.Queue = "team"
	team := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: schedulingv1alpha1.QueueSpec{State: schedulingv1alpha1.QueueClosed}}
	hold := NewHolds([]*schedulingv1alpha1.Queue{team}).Of(pg, nil)
	require.Equal(t, schedulingv1alpha1.ReasonQueueUnavailable, hold.Reason)
	waiting := []*corev1.Pod{}
	for _, p := range pods(corev1.PodPending, corev1.PodPending) {
		waiting = append(waiting, &p)
	}
	assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, Phase(pg, waiting, Hold{}), "admitted, its minimum exists")
	assert.Equal(t, schedulingv1alpha1.PodGroupPending, Phase(pg, waiting, hold))
	assert.Equal(t, Desired(pg, pods(corev1.PodPending, corev1.PodPending), hold, "").Phase, Phase(pg, waiting, hold), "as Desired decides it")
	waiting[0].Status.Phase = corev1.PodRunning
	assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, Phase(pg, waiting, hold), "a member runs: it is past its queue's hold")
}

// A group that needs fewer sub-groups than it has runs once that many run whole, and counts them.
func TestAMinimumOfSubGroupsRunsTheGroup(t *testing.T) {
	pg := group(2, nil)
	pg.Spec.SubGroups = []schedulingv1alpha1.SubGroup{{Name: "a", MinMember: 2}, {Name: "b", MinMember: 2}, {Name: "c", MinMember: 2}}
	pg.Spec.MinSubGroups = ptr.To[int32](2)
	members := []corev1.Pod{
		member("a0", corev1.PodRunning, inSubGroup("a")), member("a1", corev1.PodRunning, inSubGroup("a")),
		member("b0", corev1.PodPending, inSubGroup("b")), member("b1", corev1.PodPending, inSubGroup("b")),
		member("c0", corev1.PodPending, inSubGroup("c")),
	}
	status := Desired(pg, members, Hold{}, "")
	assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, status.Phase, "a and b have their pods; c, short of one, is not needed")
	assert.Equal(t, int32(1), status.WholeSubGroups)

	members[2].Status.Phase, members[3].Status.Phase = corev1.PodRunning, corev1.PodRunning
	status = Desired(pg, members, Hold{}, "")
	assert.Equal(t, schedulingv1alpha1.PodGroupRunning, status.Phase, "2 of the 3 sub-groups run")
	assert.Equal(t, int32(2), status.WholeSubGroups)
	assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(status.Conditions, "Scheduled").Status)

	pg.Spec.MinSubGroups = nil
	assert.NotEqual(t, schedulingv1alpha1.PodGroupRunning, Desired(pg, members, Hold{}, "").Phase, "all three are needed by default")
}
