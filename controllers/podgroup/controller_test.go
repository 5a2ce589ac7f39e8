package podgroup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// fixture is a Reconciler on a fake client that counts PodGroup status writes and keeps events.
type fixture struct {
	client       client.Client
	reconciler   *Reconciler
	recorder     *events.FakeRecorder
	statusWrites int
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, schedulingv1alpha1.AddToScheme(scheme))
	require.NoError(t, batchv1alpha1.AddToScheme(scheme))
	f := &fixture{recorder: events.NewFakeRecorder(100)}
	// The queues that tephra-controllers creates in every cluster.
	objs = append(objs,
		&schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.RootQueue}},
		&schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultQueue}, Spec: schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue}})
	f.client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(objs...).
		WithStatusSubresource(&schedulingv1alpha1.PodGroup{}).
		WithIndex(&corev1.Pod{}, PodGroupIndex, podGroupIndexValue).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*schedulingv1alpha1.PodGroup); ok {
					f.statusWrites++
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if _, ok := obj.(*schedulingv1alpha1.PodGroup); ok {
					f.statusWrites++
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	f.reconciler = &Reconciler{Client: f.client, Recorder: f.recorder}
	return f
}

func (f *fixture) reconcile(t *testing.T) *schedulingv1alpha1.PodGroup {
	t.Helper()
	key := types.NamespacedName{Namespace: testNamespace, Name: "train"}
	result, err := f.reconciler.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, result)
	pg := &schedulingv1alpha1.PodGroup{}
	require.NoError(t, f.client.Get(context.Background(), key, pg))
	return pg
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) setPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	pod := &corev1.Pod{}
	require.NoError(t, f.client.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: name}, pod))
	pod.Status.Phase = phase
	pod.Status.Conditions = nil
	require.NoError(t, f.client.Status().Update(context.Background(), pod))
}

func ptrTo(p corev1.Pod) *corev1.Pod { return &p }

func TestReconcile(t *testing.T) {
	pg := group(3, nil)
	// A pod of another group, one of the same name in another namespace, and one linked by
	// Volcano's annotation: only the last is a member.
	other := member("other", corev1.PodRunning)
	other.Labels[schedulingv1alpha1.PodGroupLabel] = "eval"
	elsewhere := member("elsewhere", corev1.PodRunning)
	elsewhere.Namespace = "team-b"
	volcano := member("c", corev1.PodPending, unschedulable("0/4 nodes are available: NotEnoughResources: 2 of 3 pods could be placed", t0))
	volcano.Labels = nil
	volcano.Annotations = map[string]string{schedulingv1alpha1.VolcanoGroupNameAnnotation: "train"}
	f := newFixture(t, pg,
		ptrTo(member("a", corev1.PodPending)), ptrTo(member("b", corev1.PodPending)), &volcano,
		&other, &elsewhere)

	got := f.reconcile(t)

	assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, got.Status.Phase)
	assert.Equal(t, [3]int32{0, 0, 0}, [3]int32{got.Status.Running, got.Status.Succeeded, got.Status.Failed})
	unsched := meta.FindStatusCondition(got.Status.Conditions, "Unschedulable")
	require.NotNil(t, unsched)
	assert.Equal(t, metav1.ConditionTrue, unsched.Status)
	assert.Equal(t, "NotEnoughResources", unsched.Reason)
	assert.Equal(t, "NotEnoughResources: 2 of 3 pods could be placed", unsched.Message)
	assert.Equal(t, got.Generation, unsched.ObservedGeneration)
	scheduled := meta.FindStatusCondition(got.Status.Conditions, "Scheduled")
	require.NotNil(t, scheduled)
	assert.Equal(t, metav1.ConditionFalse, scheduled.Status)
	assert.Equal(t, 1, f.statusWrites)
	assert.Equal(t, []string{
		"Normal PhaseChanged Phase set to Inqueue: 0 of 3 pods running",
		"Warning NotEnoughResources NotEnoughResources: 2 of 3 pods could be placed",
	}, f.events())

	// Nothing changed: nothing is written and nothing announced.
	again := f.reconcile(t)
	assert.Equal(t, 1, f.statusWrites)
	assert.Equal(t, got.ResourceVersion, again.ResourceVersion)
	assert.Empty(t, f.events())

	// The gang is placed.
	for _, name := range []string{"a", "b", "c"} {
		f.setPhase(t, name, corev1.PodRunning)
	}
	got = f.reconcile(t)
	assert.Equal(t, schedulingv1alpha1.PodGroupRunning, got.Status.Phase)
	assert.Equal(t, int32(3), got.Status.Running)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, "Scheduled"))
	unsched = meta.FindStatusCondition(got.Status.Conditions, "Unschedulable")
	assert.Equal(t, metav1.ConditionFalse, unsched.Status)
	assert.Equal(t, "Scheduled", unsched.Reason)
	assert.Equal(t, 2, f.statusWrites)
	assert.Equal(t, []string{"Normal PhaseChanged Phase changed from Inqueue to Running: 3 of 3 pods running"}, f.events())

	// Two members end badly: the group can no longer complete.
	f.setPhase(t, "a", corev1.PodSucceeded)
	f.setPhase(t, "b", corev1.PodFailed)
	f.setPhase(t, "c", corev1.PodFailed)
	got = f.reconcile(t)
	assert.Equal(t, schedulingv1alpha1.PodGroupFailed, got.Status.Phase)
	assert.Equal(t, [3]int32{0, 1, 2}, [3]int32{got.Status.Running, got.Status.Succeeded, got.Status.Failed})
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, "Scheduled"))
	assert.Equal(t, []string{
		"Warning PhaseChanged Phase changed from Running to Failed: 0 of 3 pods running, 1 succeeded, 2 failed; fewer than minMember (3) succeeded",
	}, f.events())
}

// A Tephra Job's group announces no phase change but its failure: the job's own events say the
// rest.
func TestReconcileJobGroupAnnouncesOnlyFailure(t *testing.T) {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: testNamespace, UID: "job-uid"}}
	g := group(1, nil)
	g.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))}
	f := newFixture(t, job, g, ptrTo(member("a", corev1.PodPending)))

	got := f.reconcile(t)
	assert.Equal(t, schedulingv1alpha1.PodGroupInqueue, got.Status.Phase)
	assert.Empty(t, f.events())

	f.setPhase(t, "a", corev1.PodRunning)
	assert.Equal(t, schedulingv1alpha1.PodGroupRunning, f.reconcile(t).Status.Phase)
	assert.Empty(t, f.events())

	f.setPhase(t, "a", corev1.PodFailed)
	assert.Equal(t, schedulingv1alpha1.PodGroupFailed, f.reconcile(t).Status.Phase)
	assert.Equal(t, []string{
		"Warning PhaseChanged Phase changed from Running to Failed: 0 of 1 pods running, 1 failed; fewer than minMember (1) succeeded",
	}, f.events())
}

func TestReconcileWaitingForMembersAnnouncesOnlyNewReasons(t *testing.T) {
	f := newFixture(t, group(3, nil), ptrTo(member("a", corev1.PodPending)))

	got := f.reconcile(t)
	unsched := meta.FindStatusCondition(got.Status.Conditions, "Unschedulable")
	require.NotNil(t, unsched)
	assert.Equal(t, "WaitingForMembers", unsched.Reason)
	assert.Equal(t, "1 of 3 pods exist (minMember 3)", unsched.Message)
	assert.Equal(t, schedulingv1alpha1.PodGroupPending, got.Status.Phase)
	assert.Equal(t, []string{
		"Normal PhaseChanged Phase set to Pending: 0 of 1 pods running",
		"Warning WaitingForMembers 1 of 3 pods exist (minMember 3)",
	}, f.events())

	// One more member: the message changes, the reason does not.
	require.NoError(t, f.client.Create(context.Background(), ptrTo(member("b", corev1.PodPending))))
	got = f.reconcile(t)
	assert.Equal(t, "2 of 3 pods exist (minMember 3)", meta.FindStatusCondition(got.Status.Conditions, "Unschedulable").Message)
	assert.Equal(t, 2, f.statusWrites)
	assert.Empty(t, f.events())
}

func TestReconcileDeletedGroup(t *testing.T) {
	f := newFixture(t)
	_, err := f.reconciler.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "gone"}})
	require.NoError(t, err)
	assert.Equal(t, 0, f.statusWrites)
}

func TestRequestForGroupOf(t *testing.T) {
	cases := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        []reconcile.Request
	}{
		{"tephra label", map[string]string{schedulingv1alpha1.PodGroupLabel: "g"}, nil,
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "g"}}}},
		{"coscheduling label", map[string]string{schedulingv1alpha1.CoschedulingPodGroupLabel: "g"}, nil,
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "g"}}}},
		{"volcano annotation", nil, map[string]string{schedulingv1alpha1.VolcanoGroupNameAnnotation: "g"},
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "g"}}}},
		{"no group", map[string]string{"app": "x"}, nil, nil},
		{"empty group name", map[string]string{schedulingv1alpha1.PodGroupLabel: ""}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: testNamespace, Labels: tc.labels, Annotations: tc.annotations}}
			assert.Equal(t, tc.want, requestForGroupOf(context.Background(), pod))
		})
	}
	assert.Nil(t, requestForGroupOf(context.Background(), &schedulingv1alpha1.PodGroup{}))
}
