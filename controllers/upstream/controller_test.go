package upstream

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/podgroup"
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
		WithStatusSubresource(&upstreamv1beta1.PodGroup{}, &schedulingv1alpha1.PodGroup{}).
		WithIndex(&corev1.Pod{}, podgroup.PodGroupIndex, func(obj client.Object) []string {
			if name, ok := schedulingv1alpha1.PodGroupNameOf(obj.(*corev1.Pod)); ok {
				return []string{name}
			}
			return nil
		}).Build()
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

// member is a pod of an upstream PodGroup, linked by spec.schedulingGroup, bound to node unless
// it is "".
func member(name, group, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}, NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node != "" {
		pod.Status.Phase = corev1.PodRunning
	}
	return pod
}

func upstreamCondition(t *testing.T, r *Reconciler, name string) *metav1.Condition {
	t.Helper()
	var up upstreamv1beta1.PodGroup
	require.NoError(t, r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &up))
	return meta.FindStatusCondition(up.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled)
}

func noTephraObject(t *testing.T, r *Reconciler, name string) {
	t.Helper()
	err := r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &schedulingv1alpha1.PodGroup{})
	assert.True(t, apierrors.IsNotFound(err), "no Tephra PodGroup object for upstream PodGroup %s: %v", name, err)
}

// PodGroupInitiallyScheduled follows the group's members, with no Tephra object: nothing before
// Tephra has tried, False with the scheduler's verdict while the gang cannot be placed, True once
// its minimum runs, and True stays.
func TestInitiallyScheduledFollowsTheMembers(t *testing.T) {
	waiting := member("g-0", "g", "")
	waiting.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: NotEnoughResources: 1 of 2 pods could be placed (needs cpu 7, 6 free)",
	}}
	r, rec := setup(t, gang("g", 2, nil, ""), &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultQueue}, Spec: schedulingv1alpha1.QueueSpec{Weight: 1}})
	reconcileOnce(t, r, "g")
	assert.Nil(t, upstreamCondition(t, r, "g"), "nothing to say before Tephra has tried: a gang short of members waits for them")
	noTephraObject(t, r, "g")

	ctx := context.Background()
	require.NoError(t, r.Create(ctx, waiting))
	require.NoError(t, r.Create(ctx, member("g-1", "g", "")))
	reconcileOnce(t, r, "g")
	c := upstreamCondition(t, r, "g")
	require.NotNil(t, c)
	assert.Equal(t, []any{metav1.ConditionFalse, "Unschedulable", "NotEnoughResources: 1 of 2 pods could be placed (needs cpu 7, 6 free)"}, []any{c.Status, c.Reason, c.Message})

	for _, name := range []string{"g-0", "g-1"} {
		var pod corev1.Pod
		require.NoError(t, r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, &pod))
		pod.Spec.NodeName = "n1"
		require.NoError(t, r.Update(ctx, &pod))
		pod.Status.Phase, pod.Status.Conditions = corev1.PodRunning, nil
		require.NoError(t, r.Status().Update(ctx, &pod))
	}
	reconcileOnce(t, r, "g")
	assert.Equal(t, metav1.ConditionTrue, upstreamCondition(t, r, "g").Status, "the minimum runs")

	// True is terminal upstream: members lost do not turn it back.
	require.NoError(t, r.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-0"}}))
	reconcileOnce(t, r, "g")
	assert.Equal(t, metav1.ConditionTrue, upstreamCondition(t, r, "g").Status)
	noTephraObject(t, r, "g")
	assert.Empty(t, drain(rec))
}

// False is written only where nobody wrote the condition: kube-scheduler's pod-group cycle may.
func TestInitiallyScheduledFalseOnlyWhereUnset(t *testing.T) {
	up := gang("g", 2, nil, "")
	up.Status.Conditions = []metav1.Condition{{Type: upstreamv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: "SchedulerError", Message: "upstream's"}}
	r, _ := setup(t, up, member("g-0", "g", ""))
	reconcileOnce(t, r, "g")
	c := upstreamCondition(t, r, "g")
	assert.Equal(t, []any{"SchedulerError", "upstream's"}, []any{c.Reason, c.Message})
}

// What cannot be translated is said once in a Warning, however often the group is reconciled; a
// Tephra PodGroup of the user's of the same name wins, and is said to.
func TestMalformedAndConflict(t *testing.T) {
	own := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "taken"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 9}}
	r, rec := setup(t, own,
		gang("bad-queue", 2, map[string]string{schedulingv1alpha1.QueueLabel: "Not_A_Queue"}, ""),
		gang("zero", 0, nil, ""),
		gang("taken", 2, nil, ""),
		member("taken-0", "taken", "n1"), member("taken-1", "taken", "n1"),
	)
	reconcileOnce(t, r, "bad-queue")
	reconcileOnce(t, r, "bad-queue")
	events := drain(rec)
	assert.Regexp(t, `Warning InvalidForTephra .*Not_A_Queue`, events)
	assert.Equal(t, 1, strings.Count(events, "InvalidForTephra"), "said once: %s", events)
	noTephraObject(t, r, "bad-queue")

	reconcileOnce(t, r, "zero")
	assert.Regexp(t, `Warning InvalidForTephra .*minCount is 0`, drain(rec))

	reconcileOnce(t, r, "taken")
	assert.Contains(t, drain(rec), "Warning TephraObjectConflict")
	var pg schedulingv1alpha1.PodGroup
	require.NoError(t, r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "taken"}, &pg))
	assert.Equal(t, int32(9), pg.Spec.MinMember, "a Tephra PodGroup of the user's is left alone")
	assert.Nil(t, upstreamCondition(t, r, "taken"), "the Tephra object decides, and its status says")

	reconcileOnce(t, r, "gone") // deleted upstream PodGroup: nothing to do
}

// A Tephra PodGroup an earlier version of Tephra mirrored an upstream PodGroup into is deleted,
// being deleted or not; a composite's child is left to its composite (composite.go).
func TestAnEarlierMirrorIsDeleted(t *testing.T) {
	up := gang("g", 2, nil, "")
	mirrored := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "g", Labels: map[string]string{MirrorLabel: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "g", UID: up.UID, Controller: ptr.To(true)}},
	}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
	r, rec := setup(t, up, mirrored)
	reconcileOnce(t, r, "g")
	noTephraObject(t, r, "g")
	assert.NotContains(t, drain(rec), "Warning")

	child := gang("c", 2, nil, "")
	child.Spec.ParentCompositePodGroupName = ptr.To("parent")
	r, _ = setup(t, child, member("c-0", "c", "n1"), member("c-1", "c", "n1"))
	reconcileOnce(t, r, "c")
	assert.Nil(t, upstreamCondition(t, r, "c"), "its composite's mirror says")
}
