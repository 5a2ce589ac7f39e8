package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func upstreamGang(name string, minCount int32, labels map[string]string, workload string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: labels, Generation: 3, ResourceVersion: "42"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
	if workload != "" {
		pg.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: workload}
	}
	return pg
}

// An upstream PodGroup translates into the spec Tephra schedules it by: minMember from the gang's
// minCount (1 for the basic policy), the queue from its label, else its Workload's, priority
// class and required topology; what cannot be translated says why.
func TestFromUpstream(t *testing.T) {
	workload := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Labels: map[string]string{QueueLabel: "team-w"}}}
	unlabelled := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}}
	badWorkload := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bad", Labels: map[string]string{QueueLabel: "Bad_Queue"}}}
	basic := upstreamGang("basic", 0, nil, "")
	basic.Spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	prio := upstreamGang("prio", 2, nil, "")
	prio.Spec.PriorityClassName = "high"
	topo := upstreamGang("topo", 4, nil, "")
	topo.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "rack"}, {Key: "zone"}}}
	for _, tc := range []struct {
		name     string
		up       *schedulingv1beta1.PodGroup
		workload *schedulingv1beta1.Workload
		want     PodGroupSpec
		invalid  string
	}{
		{name: "gang", up: upstreamGang("plain", 7, nil, ""), want: PodGroupSpec{MinMember: 7, Queue: DefaultQueue}},
		{name: "basic policy: every pod on its own", up: basic, want: PodGroupSpec{MinMember: 1, Queue: DefaultQueue}},
		{name: "priority class", up: prio, want: PodGroupSpec{MinMember: 2, PriorityClassName: "high", Queue: DefaultQueue}},
		{name: "topology: the first key, required", up: topo, want: PodGroupSpec{MinMember: 4, Topology: &PodGroupTopology{Required: "rack"}, Queue: DefaultQueue}},
		{name: "its own label wins over its Workload's", up: upstreamGang("own", 3, map[string]string{QueueLabel: "team-p"}, "wl"), workload: workload, want: PodGroupSpec{MinMember: 3, Queue: "team-p"}},
		{name: "its Workload's label", up: upstreamGang("from-workload", 2, nil, "wl"), workload: workload, want: PodGroupSpec{MinMember: 2, Queue: "team-w"}},
		{name: "a Workload without the label: the default queue", up: upstreamGang("unlabelled", 2, nil, "plain"), workload: unlabelled, want: PodGroupSpec{MinMember: 2, Queue: DefaultQueue}},
		{name: "no Workload read: the default queue", up: upstreamGang("missing", 2, nil, "nope"), want: PodGroupSpec{MinMember: 2, Queue: DefaultQueue}},
		{name: "minCount 0", up: upstreamGang("zero", 0, nil, ""), invalid: "spec.schedulingPolicy.gang.minCount is 0; it must be at least 1"},
		{name: "a label that names no queue", up: upstreamGang("bad", 2, map[string]string{QueueLabel: "Not_A_Queue"}, ""), invalid: `label scheduling.tephra.dev/queue="Not_A_Queue" on the PodGroup is not a queue name`},
		{name: "a Workload's label that names no queue", up: upstreamGang("bad-wl", 2, nil, "bad"), workload: badWorkload, invalid: `label scheduling.tephra.dev/queue="Bad_Queue" on Workload bad is not a queue name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group, invalid := FromUpstream(tc.up, tc.workload)
			if tc.invalid != "" {
				assert.Contains(t, invalid, tc.invalid)
				assert.Nil(t, group)
				return
			}
			require.Empty(t, invalid)
			assert.Equal(t, tc.want, group.Spec)
			assert.Equal(t, []any{"ns", tc.up.Name, tc.up.UID, "42", int64(3)}, []any{group.Namespace, group.Name, group.UID, group.ResourceVersion, group.Generation})
			ref := metav1.GetControllerOf(group)
			require.NotNil(t, ref)
			assert.Equal(t, []any{"scheduling.k8s.io/v1beta1", "PodGroup", tc.up.Name, tc.up.UID}, []any{ref.APIVersion, ref.Kind, ref.Name, ref.UID})
			assert.True(t, FromUpstreamPodGroup(group))
			assert.Empty(t, group.Status.Conditions, "nothing scheduled yet")
		})
	}
}

// Tephra's annotations that no upstream field has pass to the translation; the upstream
// condition PodGroupInitiallyScheduled=True makes it Scheduled.
func TestFromUpstreamAnnotationsAndStatus(t *testing.T) {
	up := upstreamGang("urgent", 2, nil, "")
	up.Annotations = map[string]string{SLAWaitingTimeAnnotation: "30s", MovableAnnotation: "true", DatasetsAnnotation: "coco", DataLocalityAnnotation: "Required", "other": "x"}
	group, _ := FromUpstream(up, nil)
	assert.Equal(t, map[string]string{SLAWaitingTimeAnnotation: "30s", MovableAnnotation: "true", DatasetsAnnotation: "coco", DataLocalityAnnotation: "Required"}, group.Annotations)

	meta.SetStatusCondition(&up.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: "Unschedulable"})
	group, _ = FromUpstream(up, nil)
	assert.False(t, meta.IsStatusConditionTrue(group.Status.Conditions, PodGroupScheduled))
	meta.SetStatusCondition(&up.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"})
	group, _ = FromUpstream(up, nil)
	assert.True(t, meta.IsStatusConditionTrue(group.Status.Conditions, PodGroupScheduled))

	assert.False(t, FromUpstreamPodGroup(&PodGroup{}))
	mirror := group.DeepCopy()
	mirror.UID = "another" // an object of Tephra's API the upstream PodGroup controls
	assert.False(t, FromUpstreamPodGroup(mirror))

	child := upstreamGang("child", 2, nil, "")
	assert.False(t, IsCompositeChild(child))
	child.Spec.ParentCompositePodGroupName = ptr.To("parent")
	assert.True(t, IsCompositeChild(child))
	assert.Equal(t, "", UpstreamWorkloadName(child))
	assert.Equal(t, "wl", UpstreamWorkloadName(upstreamGang("x", 1, nil, "wl")))
}
