package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	tephrafake "github.com/tephra-dev/tephra/apis/client/clientset/versioned/fake"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// why names the cause of a disruption, for the pod and among its group's members, rather than
// calling the pod Failed.
func TestWhyNamesAnEviction(t *testing.T) {
	lost := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-worker-1", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}},
		Spec:       corev1.PodSpec{NodeName: "node-7"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists"}}},
	}
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-worker-0", Namespace: "ns", Labels: lost.Labels}}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
	o := &Options{Flags: &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")}, Now: func() time.Time { return time.Unix(0, 0) },
		kube: fake.NewClientset(lost, waiting), tephra: tephrafake.NewSimpleClientset(group)}

	v, err := o.why("pod/train-worker-1")
	require.NoError(t, err)
	assert.False(t, v.Waiting)
	assert.Equal(t, blockerEvicted, v.Blocker)
	assert.Equal(t, "it was evicted: its node node-7 is gone (the pod garbage collector removed it)", v.Reason)

	v, err = o.why("podgroup/train")
	require.NoError(t, err)
	assert.Contains(t, v.Details, "pod train-worker-1 was evicted: its node node-7 is gone (the pod garbage collector removed it)")
}

// For a group waiting past its SLA, why says which nodes are reserved for it and which pods
// backfill them, from the scheduler's events since its latest reservation.
func TestWhySaysWhatBackfillsAReservation(t *testing.T) {
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big-0", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "big"}}}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1}}
	event := func(name, reason, msg string, at int64) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Reason: reason, Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "PodGroup", Name: "big", Namespace: "ns"}, LastTimestamp: metav1.Unix(at, 0)}
	}
	o := &Options{Flags: &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")}, Now: func() time.Time { return time.Unix(100, 0) },
		kube: fake.NewClientset(waiting,
			event("old", "Backfilled", "Backfilled: pod ns/gone runs on reserved node n0 until about 00:01", 1),
			event("r", "Reserved", "Reserved: the group has waited 31s, past its SLA waiting time of 30s: nodes n1, n2 are reserved for it until its minimum runs", 10),
			event("b", "Backfilled", "Backfilled: pod ns/short runs on reserved node n2 until about 12:05 (its runtime estimate); the group is expected to start by 12:09", 20),
		), tephra: tephrafake.NewSimpleClientset(group)}

	v, err := o.why("podgroup/big")
	require.NoError(t, err)
	assert.Contains(t, v.Details, "reserved: the group has waited 31s, past its SLA waiting time of 30s: nodes n1, n2 are reserved for it until its minimum runs")
	assert.Contains(t, v.Details, "backfilled in its hole: pod ns/short runs on reserved node n2 until about 12:05 (its runtime estimate); the group is expected to start by 12:09")
	assert.NotContains(t, strings.Join(v.Details, "\n"), "ns/gone", "a backfill before the latest reservation is history")
}

// why says how the target's queue orders its waiting workloads when not as they came: a pod may
// wait behind workloads that came after it.
func TestWhySaysTheQueueOrdersByAttainedService(t *testing.T) {
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "again-0", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.QueueLabel: "las"}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}}}
	queue := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "las"}, Spec: schedulingv1alpha1.QueueSpec{
		Parent: "root", Order: schedulingv1alpha1.QueueOrderLeastAttainedService, OrderBoundSeconds: ptr.To[int32](600)}}
	root := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: schedulingv1alpha1.QueueSpec{Parent: "root"}}
	o := &Options{Flags: &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")}, Now: func() time.Time { return time.Unix(0, 0) },
		kube: fake.NewClientset(waiting), tephra: tephrafake.NewSimpleClientset(root, queue)}

	v, err := o.why("pod/again-0")
	require.NoError(t, err)
	assert.True(t, v.Waiting)
	assert.Contains(t, v.Details, "queue las: orders waiting workloads by the accelerator-time they have run, least first (LeastAttainedService, levels at 1, 10 and 100 accelerator-hours): a workload that ran before waits behind ones of lower levels that came up to 10m0s after it came back")

	queue.Spec.Order = schedulingv1alpha1.QueueOrderSubmission
	assert.Empty(t, orderNote(queue), "in the order they came: nothing to say")
}

// A Job that waits for Kueue is not merely suspended: why names its LocalQueue and Kueue's last
// reason, and resume refuses to run it past Kueue.
func TestWhySaysAJobWaitsForKueue(t *testing.T) {
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{kueueQueueLabel: "team-a"}},
		Spec:       batchv1alpha1.JobSpec{Suspend: ptr.To(true)},
	}
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "train.1", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "train", Namespace: "ns"},
		Reason:         blockerKueue, Message: "Workload job-train-1a2b3 waits for Kueue: LocalQueue team-a doesn't exist",
	}
	o := &Options{Flags: &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")}, Now: func() time.Time { return time.Unix(0, 0) },
		kube: fake.NewClientset(event), tephra: tephrafake.NewSimpleClientset(job)}

	v, err := o.why("job/train")
	require.NoError(t, err)
	assert.True(t, v.Waiting)
	assert.Equal(t, blockerKueue, v.Blocker)
	assert.Contains(t, v.Reason, "LocalQueue team-a")
	assert.Equal(t, []string{event.Message}, v.Details)

	err = o.setSuspend("train", false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "waits for Kueue in LocalQueue team-a")
	still, err := o.tephra.BatchV1alpha1().Jobs("ns").Get(t.Context(), "train", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *still.Spec.Suspend, "the Job stays suspended")
}

// why counts a group's sub-groups each, and a group whose sub-groups lack members waits for them
// however many members it has in all.
func TestWhyCountsEachSubGroup(t *testing.T) {
	member := func(name, sub, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{
				schedulingv1alpha1.PodGroupLabel: "serve", schedulingv1alpha1.SubGroupLabel: sub}},
			Spec: corev1.PodSpec{NodeName: node},
		}
	}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: "ns"}, Spec: schedulingv1alpha1.PodGroupSpec{
		MinMember: 3, SubGroups: []schedulingv1alpha1.SubGroup{{Name: "prefill", MinMember: 1}, {Name: "decode", MinMember: 3}},
	}}
	o := &Options{Flags: &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")}, Now: func() time.Time { return time.Unix(0, 0) },
		kube:   fake.NewClientset(member("p0", "prefill", "node-1"), member("p1", "prefill", ""), member("d0", "decode", ""), member("d1", "decode", "")),
		tephra: tephrafake.NewSimpleClientset(group, &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "default"}})}

	v, err := o.why("podgroup/serve")
	require.NoError(t, err)
	assert.True(t, v.Waiting)
	assert.Equal(t, schedulingv1alpha1.ReasonWaitingForMembers, v.Blocker)
	assert.Equal(t, "1 of the 2 sub-groups its minimum needs have their members; the scheduler places none until they exist", v.Reason)
	assert.Contains(t, v.Details, "sub-group prefill: 1 of minMember 1 placed, 1 waiting")
	assert.Contains(t, v.Details, "sub-group decode: 0 of minMember 3 placed, 2 waiting, 1 missing")

	// A group that needs one of its sub-groups runs with prefill, and names those waiting above it.
	f := subGroupFactsOf(&schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinSubGroups: ptr.To[int32](1),
		SubGroups: []schedulingv1alpha1.SubGroup{{Name: "prefill", MinMember: 1}, {Name: "decode", MinMember: 2}}}},
		[]corev1.Pod{*member("p0", "prefill", "node-1"), *member("d0", "decode", ""), *member("d1", "decode", "")})
	assert.True(t, f.placed)
	assert.Contains(t, f.lines, "sub-groups: 1 whole of the 1 of 2 it needs (minSubGroups); above the minimum, waiting to be placed whole: decode")
}

// `kubectl tephra job NAME` shows the sub-groups of the job's PodGroup as its status counts them.
func TestDescribeJobShowsSubGroups(t *testing.T) {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}, Spec: batchv1alpha1.JobSpec{
		Tasks: []batchv1alpha1.TaskSpec{{Name: "replica", Replicas: 4, SubGroups: &batchv1alpha1.TaskSubGroups{Size: 2}}},
	}}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4, SubGroups: []schedulingv1alpha1.SubGroup{{Name: "replica-0", MinMember: 2}, {Name: "replica-1", MinMember: 2}}},
		Status: schedulingv1alpha1.PodGroupStatus{WholeSubGroups: 1, SubGroups: []schedulingv1alpha1.SubGroupStatus{
			{Name: "replica-0", Running: 2, Whole: true}, {Name: "replica-1", Pending: 1, Failed: 1},
		}},
	}
	o, out := testOptions(nil, job, group)
	o.Flags.Namespace = ptr.To("ns")
	require.NoError(t, o.describeJob("train"))
	assert.Contains(t, out.String(), `Sub-groups (1 whole of the 2 of 2 it needs; disruption: All (preemption and reclaim take the whole group)):
  NAME        MIN   PENDING   RUNNING   SUCCEEDED   FAILED   WHOLE
  replica-0   2     0         2         0           0        true
  replica-1   2     1         0         0           1        false
`)

	group.Spec.DisruptionMode, group.Spec.MinSubGroups = schedulingv1alpha1.DisruptionSingle, ptr.To[int32](1)
	o, out = testOptions(nil, job, group)
	o.Flags.Namespace = ptr.To("ns")
	require.NoError(t, o.describeJob("train"))
	assert.Contains(t, out.String(), "Sub-groups (1 whole of the 1 of 2 it needs; disruption: Single (preemption and reclaim take one sub-group; the others run on)):\n")
}
