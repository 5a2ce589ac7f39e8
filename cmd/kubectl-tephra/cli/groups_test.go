package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
