package upstream

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func composite(name string, minGroupCount int32, mutate func(*upstreamv1alpha3.CompositePodGroup)) *upstreamv1alpha3.CompositePodGroup {
	c := &upstreamv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: upstreamv1alpha3.CompositePodGroupSpec{
			WorkloadRef:      &upstreamv1alpha3.WorkloadReference{WorkloadName: "w", TemplateName: "serve"},
			SchedulingPolicy: upstreamv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}},
		},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func child(name, parent string, minCount int32, rack string) *upstreamv1beta1.PodGroup {
	pg := gang(name, minCount, nil, "w")
	pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	if rack != "" {
		pg.Spec.SchedulingConstraints = &upstreamv1beta1.PodGroupSchedulingConstraints{Topology: []upstreamv1beta1.TopologyConstraint{{Key: rack}}}
	}
	return pg
}

func childPod(name, group string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{
		SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)},
	}}
}

func setupComposite(t *testing.T, objs ...client.Object) (*CompositeReconciler, *Reconciler, *events.FakeRecorder) {
	t.Helper()
	r, rec := setup(t, objs...)
	return &CompositeReconciler{Client: r.Client, Recorder: rec, Workloads: true}, r, rec
}

// A composite of a prefill gang of 2 (each in a rack) and a decode gang of 3, all in a block, is
// one Tephra PodGroup: a sub-group per child, minMember 5, the composite's topology and its
// disruptionMode (Single when unset, as upstream defaults); the children get no mirror of their
// own, and their pods get the labels that make them the mirror's members.
func TestACompositeIsOnePodGroupWithASubGroupPerChild(t *testing.T) {
	serve := composite("serve", 2, func(c *upstreamv1alpha3.CompositePodGroup) {
		c.Spec.SchedulingConstraints = &upstreamv1alpha3.CompositePodGroupSchedulingConstraints{Topology: []upstreamv1alpha3.TopologyConstraint{{Key: "block"}}}
		c.Labels = map[string]string{schedulingv1alpha1.QueueLabel: "inference"}
	})
	r, children, rec := setupComposite(t, serve,
		child("serve-prefill", "serve", 2, "rack"), child("serve-decode", "serve", 3, ""),
		childPod("p0", "serve-prefill"), childPod("d0", "serve-decode"), childPod("other", "unrelated"))
	ctx := context.Background()
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "serve"}})
	require.NoError(t, err)

	var mirror schedulingv1alpha1.PodGroup
	require.NoError(t, r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "serve"}, &mirror))
	assert.True(t, metav1.IsControlledBy(&mirror, serve))
	assert.Equal(t, schedulingv1alpha1.PodGroupSpec{
		MinMember: 5, Queue: "inference", DisruptionMode: schedulingv1alpha1.DisruptionSingle,
		Topology: &schedulingv1alpha1.PodGroupTopology{Required: "block"},
		SubGroups: []schedulingv1alpha1.SubGroup{
			{Name: "serve-decode", MinMember: 3},
			{Name: "serve-prefill", MinMember: 2, Topology: &schedulingv1alpha1.PodGroupTopology{Required: "rack"}},
		},
	}, mirror.Spec)

	for name, want := range map[string]map[string]string{
		"p0":    {schedulingv1alpha1.PodGroupLabel: "serve", schedulingv1alpha1.SubGroupLabel: "serve-prefill"},
		"d0":    {schedulingv1alpha1.PodGroupLabel: "serve", schedulingv1alpha1.SubGroupLabel: "serve-decode"},
		"other": nil,
	} {
		var pod corev1.Pod
		require.NoError(t, r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, &pod))
		assert.Equal(t, want, pod.Labels, "pod %s", name)
	}

	// The PodGroup adapter leaves the children to the composite's mirror.
	reconcileOnce(t, children, "serve-prefill")
	err = r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "serve-prefill"}, &schedulingv1alpha1.PodGroup{})
	assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "a child has no mirror of its own: %v", err)
	assert.NotContains(t, drain(rec), "Warning")

	// All goes to the mirror too.
	serve.Spec.DisruptionMode = &upstreamv1alpha3.CompositeDisruptionMode{All: &upstreamv1alpha3.AllCompositeDisruptionMode{}}
	require.NoError(t, r.Update(ctx, serve))
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "serve"}})
	require.NoError(t, err)
	require.NoError(t, r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "serve"}, &mirror))
	assert.Equal(t, schedulingv1alpha1.DisruptionAll, mirror.Spec.DisruptionMode)
}

// A minGroupCount below the number of children is the mirror's minSubGroups, and its minMember
// the smallest minCounts that many children make up.
func TestACompositeOfFewerChildrenThanItHasRunsWithThem(t *testing.T) {
	r, _, rec := setupComposite(t, composite("c", 2, nil),
		child("c-a", "c", 4, ""), child("c-b", "c", 2, ""), child("c-c", "c", 3, ""))
	ctx := context.Background()
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}})
	require.NoError(t, err)
	var mirror schedulingv1alpha1.PodGroup
	require.NoError(t, r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "c"}, &mirror))
	assert.Equal(t, ptr.To[int32](2), mirror.Spec.MinSubGroups)
	assert.Equal(t, int32(5), mirror.Spec.MinMember, "c-b (2) and c-c (3)")
	assert.Len(t, mirror.Spec.SubGroups, 3)
	assert.NotContains(t, drain(rec), "Warning")
}

// What Tephra does not translate is said in an event, and nothing is mirrored; a composite short
// of children waits for them.
func TestACompositeTephraCannotPlaceSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cpg      *upstreamv1alpha3.CompositePodGroup
		children []client.Object
		want     string
	}{{
		name: "basic policy",
		cpg: composite("c", 1, func(c *upstreamv1alpha3.CompositePodGroup) {
			c.Spec.SchedulingPolicy = upstreamv1alpha3.CompositePodGroupSchedulingPolicy{Basic: &upstreamv1alpha3.CompositeBasicSchedulingPolicy{}}
		}),
		children: []client.Object{child("c-a", "c", 1, "")},
		want:     "Warning InvalidForTephra Tephra cannot schedule this CompositePodGroup: its scheduling policy is basic",
	}, {
		name:     "nested",
		cpg:      composite("c", 1, func(c *upstreamv1alpha3.CompositePodGroup) { c.Spec.ParentCompositePodGroupName = ptr.To("top") }),
		children: []client.Object{child("c-a", "c", 1, "")},
		want:     "it is nested in CompositePodGroup top",
	}, {
		name:     "minGroupCount 0",
		cpg:      composite("c", 0, nil),
		children: []client.Object{child("c-a", "c", 1, "")},
		want:     "spec.schedulingPolicy.gang.minGroupCount is 0; it must be at least 1",
	}, {
		name:     "children still to come",
		cpg:      composite("c", 3, nil),
		children: []client.Object{child("c-a", "c", 1, "")},
		want:     "Normal WaitingForMembers WaitingForMembers: 1 of the 3 child PodGroups that gang.minGroupCount needs exist",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, rec := setupComposite(t, append(tc.children, tc.cpg)...)
			_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}})
			require.NoError(t, err)
			assert.Contains(t, drain(rec), tc.want)
			err = r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "c"}, &schedulingv1alpha1.PodGroup{})
			assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "no mirror: %v", err)
		})
	}
}
