package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// tephraOnly is the default --scheduler-names: Tephra beside the default scheduler.
var tephraOnly = []string{schedulingv1alpha1.SchedulerName}

func testQueue(name, parent string, weight int32) *schedulingv1alpha1.Queue {
	return &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: parent, Weight: weight}}
}

func testPod(name string, labels map[string]string, node string, phase corev1.PodPhase, gpus int64) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			NodeName:      node,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
			}}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestAccountFromPods(t *testing.T) {
	queues := []*schedulingv1alpha1.Queue{
		testQueue("root", "", 1), testQueue("default", "root", 1),
		testQueue("eng", "root", 3), testQueue("train", "eng", 2), testQueue("infer", "eng", 1),
		testQueue("orphan", "gone", 1),
	}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		gpu: resource.MustParse("12"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	group := schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2, Queue: "train"},
		Status:     schedulingv1alpha1.PodGroupStatus{Phase: schedulingv1alpha1.PodGroupRunning},
	}
	inTrain := map[string]string{schedulingv1alpha1.PodGroupLabel: "job"}
	inInfer := map[string]string{schedulingv1alpha1.QueueLabel: "infer"}
	other := testPod("other", nil, "n", corev1.PodRunning, 5)
	other.Spec.SchedulerName = "default-scheduler"
	pods := []corev1.Pod{
		testPod("t0", inTrain, "n", corev1.PodRunning, 2),
		testPod("t1", inTrain, "n", corev1.PodRunning, 2),
		testPod("t-done", inTrain, "n", corev1.PodSucceeded, 2),
		testPod("i0", inInfer, "n", corev1.PodRunning, 1),
		testPod("i1", inInfer, "", corev1.PodPending, 20),
		testPod("d0", nil, "n", corev1.PodRunning, 1),
		testPod("lost", map[string]string{schedulingv1alpha1.PodGroupLabel: "no-group"}, "", corev1.PodPending, 3),
		other,
	}
	a := Account(queues, pods, []corev1.Node{node}, []schedulingv1alpha1.PodGroup{group}, tephraOnly, nil)

	assert.Equal(t, int64(12), a.Total[gpu])
	assert.NotContains(t, a.Total, corev1.ResourcePods, "no queue shares the pod count")
	for queue, want := range map[string]int64{"train": 4, "infer": 1, "eng": 5, "default": 1, "root": 6} {
		assert.Equal(t, want, a.Allocated[queue][gpu], "allocated GPUs of %s", queue)
	}
	// Demand: train 4, infer 21, default 1 → eng gets 11 of 12 (default holds 1): train 4
	// (its demand), infer 7.
	for queue, want := range map[string]int64{"train": 4, "infer": 7, "eng": 11, "default": 1} {
		assert.Equal(t, want, a.Deserved[queue][gpu], "deserved GPUs of %s", queue)
	}
	status := a.Status(queues[3])
	assert.Equal(t, int32(1), status.Running, "the running group counts once")
	assert.Equal(t, "4", status.Allocated.Name(gpu, resource.DecimalSI).String())
	assert.Equal(t, "nvidia.com/gpu: 4", status.AllocatedSummary, "the Allocated column")
	assert.Equal(t, "nvidia.com/gpu: 4", status.DeservedSummary, "the Deserved column")
	assert.Equal(t, "0", a.Status(queues[5]).AllocatedSummary, "a queue outside the tree shows 0")
	infer := a.Status(queues[4])
	assert.Equal(t, int32(1), infer.Pending)
	assert.Equal(t, int32(1), infer.Running)
	assert.Equal(t, int32(2), a.Status(queues[2]).Running, "a parent counts its children's workloads")

	orphan := a.Status(queues[5])
	valid := meta.FindStatusCondition(orphan.Conditions, ConditionValid)
	require.NotNil(t, valid)
	assert.Equal(t, metav1.ConditionFalse, valid.Status)
	assert.Contains(t, valid.Message, `parent queue "gone" does not exist`)
	assert.Empty(t, orphan.Allocated)
}

func TestGuaranteesThatDoNotFitAreFlagged(t *testing.T) {
	a1 := testQueue("a", "root", 1)
	a1.Spec.Guarantee = corev1.ResourceList{gpu: resource.MustParse("8")}
	b1 := testQueue("b", "root", 1)
	b1.Spec.Guarantee = corev1.ResourceList{gpu: resource.MustParse("8")}
	root := testQueue("root", "", 1)
	node := corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: resource.MustParse("10")}}}
	a := Account([]*schedulingv1alpha1.Queue{root, a1, b1}, nil, []corev1.Node{node}, nil, tephraOnly, nil)
	fit := meta.FindStatusCondition(a.Status(root).Conditions, ConditionGuaranteesFit)
	require.NotNil(t, fit)
	assert.Equal(t, metav1.ConditionFalse, fit.Status)
	assert.Contains(t, fit.Message, "nvidia.com/gpu 16 > 10")

	// An unchanged status keeps its transition times, so it is not rewritten.
	root.Status = a.Status(root)
	assert.Equal(t, root.Status, a.Status(root))
}

// A queue below a closed one reports that it takes nothing new, and which queue closes it.
func TestOpenConditionNamesTheClosedParent(t *testing.T) {
	root := testQueue("root", "", 1)
	org := testQueue("org", "root", 1)
	org.Spec.State = schedulingv1alpha1.QueueClosed
	team := testQueue("team", "org", 1)
	other := testQueue("other", "root", 1)
	a := Account([]*schedulingv1alpha1.Queue{root, org, team, other}, nil, nil, nil, tephraOnly, nil)
	for q, want := range map[*schedulingv1alpha1.Queue][3]string{
		org:   {"False", "Closed", "the queue is closed"},
		team:  {"False", "ParentClosed", `QueueUnavailable: parent queue "org" is closed`},
		other: {"True", "Open", "the queue takes new workloads"},
	} {
		open := meta.FindStatusCondition(a.Status(q).Conditions, ConditionOpen)
		require.NotNil(t, open, q.Name)
		assert.Equal(t, want[0], string(open.Status), q.Name)
		assert.Equal(t, want[1], open.Reason, q.Name)
		assert.Contains(t, open.Message, want[2], q.Name)
	}
}

// TestAccountAsTheDefaultScheduler: with --scheduler-names listing default-scheduler, plain pods
// of the default scheduler count in the default queue (or their queue label's), while system
// pods count nowhere.
func TestAccountAsTheDefaultScheduler(t *testing.T) {
	queues := []*schedulingv1alpha1.Queue{testQueue("root", "", 1), testQueue("default", "root", 1), testQueue("team", "root", 1)}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: resource.MustParse("12")}}}
	plain := func(name string, labels map[string]string, gpus int64) corev1.Pod {
		p := testPod(name, labels, "n", corev1.PodRunning, gpus)
		p.Spec.SchedulerName = "default-scheduler"
		return p
	}
	inKubeSystem := plain("dns", nil, 4)
	inKubeSystem.Namespace = "kube-system"
	critical := plain("agent", nil, 4)
	critical.Spec.Priority = new(int32(2000000000))
	pods := []corev1.Pod{
		plain("web", nil, 1),
		plain("batch", map[string]string{schedulingv1alpha1.QueueLabel: "team"}, 2),
		inKubeSystem,
		critical,
		testPod("tephra", nil, "n", corev1.PodRunning, 1),
	}

	replacing := Account(queues, pods, []corev1.Node{node}, nil, []string{"default-scheduler", schedulingv1alpha1.SchedulerName}, nil)
	assert.Equal(t, int64(2), replacing.Allocated["default"][gpu], "web and the tephra-scheduler pod; not the system pods")
	assert.Equal(t, int64(2), replacing.Allocated["team"][gpu])
	assert.Equal(t, int64(4), replacing.Allocated["root"][gpu])

	beside := Account(queues, pods, []corev1.Node{node}, nil, tephraOnly, nil)
	assert.Equal(t, int64(1), beside.Allocated["default"][gpu], "beside the default scheduler, its plain pods count nowhere")
	assert.Equal(t, int64(2), beside.Allocated["team"][gpu], "a pod that names a queue counts whatever its scheduler")
}

// Deserved shares are computed at what can run now, as the scheduler does: a closed queue's
// backlog, gated pods and a group short of its minimum take no share from the others.
func TestDemandIsWhatCanRunNow(t *testing.T) {
	closed := testQueue("closed", "root", 1)
	closed.Spec.State = schedulingv1alpha1.QueueClosed
	queues := []*schedulingv1alpha1.Queue{testQueue("root", "", 1), testQueue("open", "root", 1), closed, testQueue("other", "root", 1)}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: resource.MustParse("12")}}}
	short := schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: "ns"},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 3, Queue: "other"},
	}
	gated := testPod("gated", map[string]string{schedulingv1alpha1.QueueLabel: "other"}, "", corev1.PodPending, 4)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	pods := []corev1.Pod{
		testPod("o0", map[string]string{schedulingv1alpha1.QueueLabel: "open"}, "", corev1.PodPending, 12),
		testPod("c0", map[string]string{schedulingv1alpha1.QueueLabel: "closed"}, "", corev1.PodPending, 12),
		testPod("s0", map[string]string{schedulingv1alpha1.PodGroupLabel: "short"}, "", corev1.PodPending, 4),
		testPod("s1", map[string]string{schedulingv1alpha1.PodGroupLabel: "short"}, "", corev1.PodPending, 4),
		gated,
	}
	a := Account(queues, pods, []corev1.Node{node}, []schedulingv1alpha1.PodGroup{short}, tephraOnly, nil)
	assert.Equal(t, int64(12), a.Deserved["open"][gpu], "the only queue whose pods can run deserves the whole cluster")
	assert.Zero(t, a.Deserved["closed"][gpu])
	assert.Zero(t, a.Deserved["other"][gpu])
	assert.Equal(t, int32(1), a.Workloads["closed"].Pending, "what waits is still counted")

	// The group's third member arrives: it can run, and the queues share.
	pods = append(pods, testPod("s2", map[string]string{schedulingv1alpha1.PodGroupLabel: "short"}, "", corev1.PodPending, 4))
	a = Account(queues, pods, []corev1.Node{node}, []schedulingv1alpha1.PodGroup{short}, tephraOnly, nil)
	assert.Equal(t, int64(6), a.Deserved["open"][gpu])
	assert.Equal(t, int64(6), a.Deserved["other"][gpu])
}

// Events wait Delay before the status computation they ask for, or ten times the last one when
// that is longer: computing the statuses of a big cluster takes at most about a tenth of a core.
func TestBatchDelayGrowsWithTheComputation(t *testing.T) {
	r := &Reconciler{Delay: 500 * time.Millisecond}
	assert.Equal(t, 500*time.Millisecond, r.batchDelay(), "before any computation")
	r.lastCompute.Store(int64(2 * time.Millisecond))
	assert.Equal(t, 500*time.Millisecond, r.batchDelay(), "a small cluster's")
	r.lastCompute.Store(int64(150 * time.Millisecond))
	assert.Equal(t, 1500*time.Millisecond, r.batchDelay(), "one of 150 ms")
}
