package upstream

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func gang(name string, minCount int32, labels map[string]string, workload string) *upstreamv1beta1.PodGroup {
	pg := &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: labels},
		Spec: upstreamv1beta1.PodGroupSpec{SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{
			Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
	if workload != "" {
		pg.Spec.WorkloadRef = &upstreamv1beta1.WorkloadReference{WorkloadName: workload, TemplateName: "t"}
	}
	return pg
}

func setup(t *testing.T, objs ...client.Object) (*Reconciler, *events.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, schedulingv1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&upstreamv1beta1.PodGroup{}, &schedulingv1alpha1.PodGroup{}).Build()
	rec := events.NewFakeRecorder(10)
	return &Reconciler{Client: c, Recorder: rec, Workloads: true}, rec
}

func reconcileOnce(t *testing.T, r *Reconciler, name string) {
	t.Helper()
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	require.NoError(t, err)
}

func drain(rec *events.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

func getMirror(t *testing.T, r *Reconciler, name string) (*schedulingv1alpha1.PodGroup, error) {
	t.Helper()
	var pg schedulingv1alpha1.PodGroup
	err := r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &pg)
	return &pg, err
}

func TestMirrorSpec(t *testing.T) {
	workload := &upstreamv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Labels: map[string]string{schedulingv1alpha1.QueueLabel: "team-w"}}}
	basic := gang("basic", 0, nil, "")
	basic.Spec.SchedulingPolicy = upstreamv1beta1.PodGroupSchedulingPolicy{Basic: &upstreamv1beta1.BasicSchedulingPolicy{}}
	prio := gang("prio", 2, nil, "")
	prio.Spec.PriorityClassName = "high"
	r, rec := setup(t, workload, basic, prio,
		gang("plain", 7, nil, ""),
		gang("own-label", 3, map[string]string{schedulingv1alpha1.QueueLabel: "team-p"}, "wl"),
		gang("from-workload", 2, nil, "wl"),
		gang("missing-workload", 2, nil, "nope"),
	)
	for name, want := range map[string]schedulingv1alpha1.PodGroupSpec{
		"plain":            {MinMember: 7, Queue: schedulingv1alpha1.DefaultQueue},
		"basic":            {MinMember: 1, Queue: schedulingv1alpha1.DefaultQueue},
		"prio":             {MinMember: 2, PriorityClassName: "high", Queue: schedulingv1alpha1.DefaultQueue},
		"own-label":        {MinMember: 3, Queue: "team-p"},
		"from-workload":    {MinMember: 2, Queue: "team-w"},
		"missing-workload": {MinMember: 2, Queue: schedulingv1alpha1.DefaultQueue},
	} {
		reconcileOnce(t, r, name)
		m, err := getMirror(t, r, name)
		require.NoError(t, err, name)
		assert.Equal(t, want, m.Spec, name)
		require.Len(t, m.OwnerReferences, 1, name)
		ref := m.OwnerReferences[0]
		assert.Equal(t, []any{"scheduling.k8s.io/v1beta1", "PodGroup", name, types.UID("uid-" + name), true},
			[]any{ref.APIVersion, ref.Kind, ref.Name, ref.UID, *ref.Controller}, name)
	}
	assert.Contains(t, drain(rec), `Normal TephraObjectCreated Tephra PodGroup ns/plain created from this PodGroup: minMember 7, queue "default"`)

	// minCount is mutable upstream (elastic gangs): the mirror follows.
	var up upstreamv1beta1.PodGroup
	require.NoError(t, r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "plain"}, &up))
	up.Spec.SchedulingPolicy.Gang.MinCount = 5
	require.NoError(t, r.Update(context.Background(), &up))
	reconcileOnce(t, r, "plain")
	m, err := getMirror(t, r, "plain")
	require.NoError(t, err)
	assert.Equal(t, int32(5), m.Spec.MinMember)
}

// The SLA waiting time annotation passes to the mirror, follows changes and goes with them.
func TestMirrorCarriesTheSLA(t *testing.T) {
	withSLA := gang("urgent", 2, nil, "")
	withSLA.Annotations = map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: "30s", "other": "x"}
	r, _ := setup(t, withSLA)
	reconcileOnce(t, r, "urgent")
	m, err := getMirror(t, r, "urgent")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: "30s"}, m.Annotations, "Tephra's annotation only")

	var up upstreamv1beta1.PodGroup
	require.NoError(t, r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "urgent"}, &up))
	up.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation] = "2m"
	require.NoError(t, r.Update(context.Background(), &up))
	reconcileOnce(t, r, "urgent")
	m, err = getMirror(t, r, "urgent")
	require.NoError(t, err)
	assert.Equal(t, "2m", m.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation])

	require.NoError(t, r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "urgent"}, &up))
	delete(up.Annotations, schedulingv1alpha1.SLAWaitingTimeAnnotation)
	require.NoError(t, r.Update(context.Background(), &up))
	reconcileOnce(t, r, "urgent")
	m, err = getMirror(t, r, "urgent")
	require.NoError(t, err)
	assert.NotContains(t, m.Annotations, schedulingv1alpha1.SLAWaitingTimeAnnotation)
}

// A foreign group whose pods may move for a waiting gang says so on its mirror, where
// tephra-scheduler reads it (docs/consolidation.md).
func TestMirrorCarriesMovable(t *testing.T) {
	movable := gang("checkpoints", 2, nil, "")
	movable.Annotations = map[string]string{schedulingv1alpha1.MovableAnnotation: "true"}
	r, _ := setup(t, movable)
	reconcileOnce(t, r, "checkpoints")
	m, err := getMirror(t, r, "checkpoints")
	require.NoError(t, err)
	assert.True(t, schedulingv1alpha1.DeclaresMovable(m.Annotations))
}

func TestMalformedAndConflict(t *testing.T) {
	foreign := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "taken"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 9}}
	r, rec := setup(t, foreign,
		gang("bad-queue", 2, map[string]string{schedulingv1alpha1.QueueLabel: "Not_A_Queue"}, ""),
		gang("zero", 0, nil, ""),
		gang("taken", 2, nil, ""),
	)
	reconcileOnce(t, r, "bad-queue")
	_, err := getMirror(t, r, "bad-queue")
	assert.True(t, apierrors.IsNotFound(err), "no mirror of a malformed PodGroup")
	assert.Regexp(t, `Warning InvalidForTephra .*Not_A_Queue`, drain(rec))

	reconcileOnce(t, r, "zero")
	assert.Regexp(t, `Warning InvalidForTephra .*minCount is 0`, drain(rec))

	reconcileOnce(t, r, "taken")
	assert.Contains(t, drain(rec), "Warning TephraObjectConflict")
	m, err := getMirror(t, r, "taken")
	require.NoError(t, err)
	assert.Equal(t, int32(9), m.Spec.MinMember, "a Tephra PodGroup the adapter does not own is left alone")

	reconcileOnce(t, r, "gone") // deleted upstream PodGroup: nothing to do
}

func TestStatusWrittenBack(t *testing.T) {
	r, _ := setup(t, gang("g", 2, nil, ""))
	reconcileOnce(t, r, "g")
	upstreamCondition := func() *metav1.Condition {
		var up upstreamv1beta1.PodGroup
		require.NoError(t, r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "g"}, &up))
		return meta.FindStatusCondition(up.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled)
	}
	assert.Nil(t, upstreamCondition(), "nothing to say before Tephra has tried")

	setMirrorCondition := func(c metav1.Condition) {
		m, err := getMirror(t, r, "g")
		require.NoError(t, err)
		meta.SetStatusCondition(&m.Status.Conditions, c)
		require.NoError(t, r.Status().Update(context.Background(), m))
	}
	setMirrorCondition(metav1.Condition{Type: schedulingv1alpha1.PodGroupUnschedulable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonNotEnoughResources, Message: "needs cpu 7 (6 free)"})
	reconcileOnce(t, r, "g")
	c := upstreamCondition()
	require.NotNil(t, c)
	assert.Equal(t, []any{metav1.ConditionFalse, "Unschedulable", "needs cpu 7 (6 free)"}, []any{c.Status, c.Reason, c.Message})

	setMirrorCondition(metav1.Condition{Type: schedulingv1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"})
	reconcileOnce(t, r, "g")
	assert.Equal(t, metav1.ConditionTrue, upstreamCondition().Status)

	// True is terminal upstream: a later Unschedulable does not turn it back.
	setMirrorCondition(metav1.Condition{Type: schedulingv1alpha1.PodGroupScheduled, Status: metav1.ConditionFalse, Reason: "Lost"})
	reconcileOnce(t, r, "g")
	assert.Equal(t, metav1.ConditionTrue, upstreamCondition().Status)
}

// kube-controller-manager keeps a deleted upstream PodGroup (finalizer) until its pods end; the
// mirror goes at once.
func TestDeletingPodGroupDeletesMirror(t *testing.T) {
	up := gang("g", 2, nil, "")
	up.Finalizers = []string{"scheduling.k8s.io/podgroup-protection"}
	r, _ := setup(t, up)
	reconcileOnce(t, r, "g")
	_, err := getMirror(t, r, "g")
	require.NoError(t, err)
	require.NoError(t, r.Delete(context.Background(), up))
	reconcileOnce(t, r, "g")
	_, err = getMirror(t, r, "g")
	assert.True(t, apierrors.IsNotFound(err), "the mirror is deleted with its upstream PodGroup: %v", err)
}
