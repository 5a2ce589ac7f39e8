package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// A group names the object it stands for as kubectl get takes it, kind.group/name, whatever API
// the object is of; a group made as itself stands for nothing else.
func TestAGroupNamesWhatItStandsFor(t *testing.T) {
	controlledBy := func(apiVersion, kind, name string) *schedulingv1alpha1.PodGroup {
		g := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if kind != "" {
			g.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: new(true)}}
		}
		return g
	}
	for _, c := range []struct{ apiVersion, kind, want string }{
		{"batch.tephra.dev/v1alpha1", "Job", "job.batch.tephra.dev/train"},
		{"scheduling.k8s.io/v1beta1", "PodGroup", "podgroup.scheduling.k8s.io/train"},
		{"scheduling.volcano.sh/v1beta1", "PodGroup", "podgroup.scheduling.volcano.sh/train"},
		{"scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroup.scheduling.x-k8s.io/train"},
		{"jobset.x-k8s.io/v1alpha2", "JobSet", "jobset.jobset.x-k8s.io/train"},
		{"v1", "Pod", "pod/train"},
		{"", "", ""},
	} {
		assert.Equal(t, c.want, groupSource(controlledBy(c.apiVersion, c.kind, "train")), c.kind)
	}

	owned := controlledBy("scheduling.k8s.io/v1beta1", "PodGroup", "train")
	owned.OwnerReferences[0].Controller = nil
	assert.Empty(t, groupSource(owned), "an owner that is not the controller")

	now := time.Now()
	g := controlledBy("batch.tephra.dev/v1alpha1", "Job", "train")
	g.Spec = schedulingv1alpha1.PodGroupSpec{Queue: "team-a", MinMember: 4}
	g.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	assert.Equal(t, groupRow{Namespace: "ns", Name: "train", From: "job.batch.tephra.dev/train", Queue: "team-a", Phase: "Pending", MinMember: 4, Age: "60s"},
		newGroupRow(g, now), "a group without status yet is Pending")
}

// A one-pod Job's group, which its pod carries with no PodGroup object, is listed from the pod,
// beside the objects, and why explains it as a group.
func TestGroupsAPodCarriesAreListedAndExplained(t *testing.T) {
	carrier := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "single-work-0", Namespace: "ns", CreationTimestamp: metav1.Unix(-30, 0),
			Labels:          map[string]string{schedulingv1alpha1.PodGroupLabel: "single", schedulingv1alpha1.QueueLabel: "team"},
			Annotations:     map[string]string{schedulingv1alpha1.GroupOnPodAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch.tephra.dev/v1alpha1", Kind: "Job", Name: "single", Controller: new(true)}},
		},
	}
	object := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pair", Namespace: "ns", CreationTimestamp: metav1.Unix(-60, 0)},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"}}
	o, _ := testOptions([]runtime.Object{carrier}, object)

	rows, err := o.groupRows(false)
	require.NoError(t, err)
	assert.Equal(t, []groupRow{
		{Namespace: "ns", Name: "pair", Queue: "team", Phase: "Pending", MinMember: 2, Age: "60s"},
		{Namespace: "ns", Name: "single", From: "job.batch.tephra.dev/single", Queue: "team", Phase: "Pending", MinMember: 1, Age: "30s"},
	}, rows)

	v, err := o.why("podgroup/single")
	require.NoError(t, err)
	assert.NotEqual(t, schedulingv1alpha1.ReasonPodGroupNotFound, v.Blocker, "the group exists on its pod: %+v", v)
	assert.Equal(t, "team", v.Queue)
}

// An upstream PodGroup's group, which both binaries read in memory with no Tephra object, is
// listed as what it stands for, in the queue its Workload names and the phase its pods make it;
// why explains it as a group; a Tephra object of its name wins.
func TestUpstreamGroupsAreListedAndExplained(t *testing.T) {
	upstreamGroup := func(name string, minCount int32, workload string) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("up-" + name), CreationTimestamp: metav1.Unix(-60, 0)},
			Spec: schedulingv1beta1.PodGroupSpec{
				WorkloadRef:      &schedulingv1beta1.WorkloadReference{WorkloadName: workload},
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
			},
		}
	}
	member := func(name, group string, running bool) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}}}
		if running {
			pod.Spec.NodeName, pod.Status.Phase = "n1", corev1.PodRunning
		}
		return pod
	}
	workload := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.QueueLabel: "team"}}}
	object := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "ns", CreationTimestamp: metav1.Unix(-60, 0)},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 5, Queue: "mine"}}
	o, _ := testOptions([]runtime.Object{
		workload, upstreamGroup("train", 2, "wl"), upstreamGroup("taken", 2, "wl"),
		member("train-0", "train", true), member("train-1", "train", true), member("wait-0", "wait", false), upstreamGroup("wait", 3, ""),
	}, object, &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: schedulingv1alpha1.QueueSpec{Weight: 1}})

	rows, err := o.groupRows(false)
	require.NoError(t, err)
	assert.Equal(t, []groupRow{
		{Namespace: "ns", Name: "taken", Queue: "mine", Phase: "Pending", MinMember: 5, Age: "60s"},
		{Namespace: "ns", Name: "train", From: "podgroup.scheduling.k8s.io/train", Queue: "team", Phase: "Running", Running: 2, MinMember: 2, Age: "60s"},
		{Namespace: "ns", Name: "wait", From: "podgroup.scheduling.k8s.io/wait", Queue: "default", Phase: "Pending", MinMember: 3, Age: "60s"},
	}, rows)

	v, err := o.why("podgroup/wait")
	require.NoError(t, err)
	assert.Equal(t, schedulingv1alpha1.ReasonWaitingForMembers, v.Blocker, "%+v", v)
	assert.Equal(t, "default", v.Queue)
	v, err = o.why("pod/train-0")
	require.NoError(t, err)
	assert.False(t, v.Waiting, "%+v", v)
}

// An upstream group whose queue holds it shows Pending, as the PodGroup controller shows an object
// its queue holds, though its members alone would make it Inqueue.
func TestAnUpstreamGroupItsQueueHoldsShowsPending(t *testing.T) {
	up := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "ns", CreationTimestamp: metav1.Unix(-60, 0),
			Labels: map[string]string{schedulingv1alpha1.QueueLabel: "closed"}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}}},
	}
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held-0", Namespace: "ns"},
		Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("held")}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	closed := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "closed"}, Spec: schedulingv1alpha1.QueueSpec{Weight: 1, State: schedulingv1alpha1.QueueClosed}}
	o, _ := testOptions([]runtime.Object{ns, up, member}, closed)
	rows, err := o.groupRows(false)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "Pending", rows[0].Phase, "%+v", rows[0])

	closed.Spec.State = schedulingv1alpha1.QueueOpen
	o, _ = testOptions([]runtime.Object{ns, up, member}, closed)
	rows, err = o.groupRows(false)
	require.NoError(t, err)
	assert.Equal(t, "Inqueue", rows[0].Phase, "its queue admits it")
}
