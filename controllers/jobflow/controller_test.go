package jobflow

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

func newReconciler(t *testing.T, objects ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, batchv1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).
		WithStatusSubresource(&batchv1alpha1.JobFlow{}, &batchv1alpha1.Job{}).Build()
	now := metav1.NewTime(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC))
	return &Reconciler{Client: c, APIReader: c, Now: func() metav1.Time { return now }}, c
}

func template(name string) *batchv1alpha1.JobTemplate {
	return &batchv1alpha1.JobTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: map[string]string{"team": "a"}},
		Spec:       batchv1alpha1.JobSpec{Queue: "q", Tasks: []batchv1alpha1.TaskSpec{{Name: "t", Replicas: 1}}},
	}
}

func reconcileFlow(t *testing.T, r *Reconciler) {
	t.Helper()
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "f"}})
	require.NoError(t, err)
}

func jobsOf(t *testing.T, c client.Client) map[string]*batchv1alpha1.Job {
	t.Helper()
	var list batchv1alpha1.JobList
	require.NoError(t, c.List(context.Background(), &list, client.InNamespace("ml")))
	out := map[string]*batchv1alpha1.Job{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

func setPhase(t *testing.T, c client.Client, name string, phase batchv1alpha1.JobPhase) {
	t.Helper()
	j := &batchv1alpha1.Job{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: name}, j))
	j.Status.State.Phase = phase
	require.NoError(t, c.Status().Update(context.Background(), j))
}

func getFlow(t *testing.T, c client.Client) *batchv1alpha1.JobFlow {
	t.Helper()
	jf := &batchv1alpha1.JobFlow{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: "f"}, jf))
	return jf
}

// The Reconciler creates each Job once: not again when its status write was lost, nor once the
// Job is deleted; and a deleted JobFlow with jobRetainPolicy retain leaves its Jobs unowned.
func TestReconcilerCreatesEachJobOnce(t *testing.T) {
	jf := &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ml", UID: "flow-uid"},
		Spec:       batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{{Name: "a"}, {Name: "b", DependsOn: &batchv1alpha1.FlowDependsOn{Targets: []string{"a"}}}}},
	}
	r, c := newReconciler(t, jf, template("a"), template("b"))
	reconcileFlow(t, r)
	jobs := jobsOf(t, c)
	require.Equal(t, []string{"f-a"}, keys(jobs))
	a := jobs["f-a"]
	assert.True(t, metav1.IsControlledBy(a, getFlow(t, c)))
	assert.Equal(t, map[string]string{"team": "a", batchv1alpha1.JobFlowLabel: "f", batchv1alpha1.FlowLabel: "a"}, a.Labels)
	assert.Equal(t, "q", a.Spec.Queue)
	assert.Equal(t, []string{Finalizer}, getFlow(t, c).Finalizers)

	// The status write was lost: the Job exists, the status does not say so.
	lost := getFlow(t, c)
	lost.Status = batchv1alpha1.JobFlowStatus{}
	require.NoError(t, c.Status().Update(context.Background(), lost))
	reconcileFlow(t, r)
	assert.Equal(t, []string{"f-a"}, keys(jobsOf(t, c)))
	assert.NotNil(t, getFlow(t, c).Status.JobStatusList[0].CreationTimestamp)

	setPhase(t, c, "f-a", batchv1alpha1.JobCompleted)
	reconcileFlow(t, r)
	assert.Equal(t, []string{"f-a", "f-b"}, keys(jobsOf(t, c)))

	// a is deleted (its TTL): it is not created again, and keeps its last state.
	require.NoError(t, c.Delete(context.Background(), jobsOf(t, c)["f-a"]))
	reconcileFlow(t, r)
	assert.Equal(t, []string{"f-b"}, keys(jobsOf(t, c)))
	assert.Equal(t, "Completed", getFlow(t, c).Status.JobStatusList[0].State)

	setPhase(t, c, "f-b", batchv1alpha1.JobCompleted)
	reconcileFlow(t, r)
	assert.Equal(t, batchv1alpha1.FlowSucceed, getFlow(t, c).Status.State.Phase)

	require.NoError(t, c.Delete(context.Background(), getFlow(t, c)))
	reconcileFlow(t, r)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: "f"}, &batchv1alpha1.JobFlow{})
	assert.True(t, apierrors.IsNotFound(err), "the finalizer is gone: %v", err)
	b := jobsOf(t, c)["f-b"]
	require.NotNil(t, b, "retained")
	assert.Empty(t, b.OwnerReferences)
}

// A missing template keeps its flow waiting and says so; a Job of the flow's name that the
// JobFlow does not own is not adopted.
func TestReconcilerWaitsForTemplatesAndRefusesOthersJobs(t *testing.T) {
	jf := &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ml", UID: "flow-uid"},
		Spec:       batchv1alpha1.JobFlowSpec{JobRetainPolicy: batchv1alpha1.DeleteJobs, Flows: []batchv1alpha1.Flow{{Name: "a"}, {Name: "b"}}},
	}
	squatter := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "f-b", Namespace: "ml"}}
	r, c := newReconciler(t, jf, squatter, template("b"))
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "f"}})
	require.Error(t, err, "the name taken is retried")
	s := getFlow(t, c).Status
	assert.Equal(t, "Waiting", s.JobStatusList[0].State)
	assert.Equal(t, "JobTemplate ml/a not found: create it, and the flow starts", s.JobStatusList[0].Message)
	assert.Equal(t, "Waiting", s.JobStatusList[1].State)
	assert.Equal(t, "job f-b exists and does not belong to this jobflow: delete it, or rename the jobflow", s.JobStatusList[1].Message)
	require.Len(t, s.Conditions, 1)
	assert.Equal(t, metav1.ConditionFalse, s.Conditions[0].Status)
	assert.Equal(t, batchv1alpha1.FlowPending, s.State.Phase)

	require.NoError(t, c.Create(context.Background(), template("a")))
	_, _ = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "f"}})
	assert.Equal(t, []string{"f-a", "f-b"}, keys(jobsOf(t, c)))
	assert.Equal(t, metav1.ConditionTrue, getFlow(t, c).Status.Conditions[0].Status)

	// Deleted with jobRetainPolicy delete: its own Job goes, the other one stays.
	require.NoError(t, c.Delete(context.Background(), getFlow(t, c)))
	reconcileFlow(t, r)
	assert.Equal(t, []string{"f-b"}, keys(jobsOf(t, c)))
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
