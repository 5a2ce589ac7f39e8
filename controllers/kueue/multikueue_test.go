package kueue

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

func TestAJobMultiKueueRunsHoldsNothingOnTheManager(t *testing.T) {
	job := twoTaskJob()
	job.Status.State.Phase = batchv1alpha1.JobRunning
	job.Status.Running = 11 // mirrored from the worker
	require.True(t, active(job))
	job.Spec.ManagedBy = ptr.To(batchv1alpha1.MultiKueueManager)
	require.False(t, active(job), "its pods run on a worker: an evicted Workload's quota is released at once")
	job.Spec.ManagedBy = ptr.To(batchv1alpha1.JobControllerManager)
	require.True(t, active(job))
}

func TestAPrebuiltWorkloadIsTheJobsOnlyWhileItsPodSetsMatchTheTasks(t *testing.T) {
	job := twoTaskJob()
	require.True(t, samePodSets(podSets(job), podSets(job)))
	changed := twoTaskJob()
	changed.Spec.Tasks[1].Replicas = 9
	require.False(t, samePodSets(podSets(changed), podSets(job)), "another count")
	changed = twoTaskJob()
	changed.Spec.Tasks[1].MinAvailable = ptr.To[int32](2)
	require.False(t, samePodSets(podSets(changed), podSets(job)), "another minimum")
	changed = twoTaskJob()
	changed.Spec.Tasks = changed.Spec.Tasks[:2]
	require.False(t, samePodSets(podSets(changed), podSets(job)), "a task fewer")
	placed := podSets(job)
	placed[0].Template.Spec.NodeSelector = map[string]string{"flavor": "a"}
	require.True(t, samePodSets(placed, podSets(job)), "where Kueue placed it is not a difference")
}

// A Job with no managedBy whose LocalQueue feeds a ClusterQueue with a MultiKueue admission check
// is left to MultiKueue, as Kueue defaults its own kinds; any other stays Tephra's, and a queue
// that cannot be read defaults nothing (the Job is still suspended).
func TestTheWebhookLeavesAJobOfAMultiKueueQueueToMultiKueue(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, batchv1alpha1.AddToScheme(scheme))
	kueueObject := func(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
		u := newUnstructured(GroupVersion.WithKind(kind))
		u.SetNamespace(namespace)
		u.SetName(name)
		u.Object["spec"] = spec
		return u
	}
	withChecks := func(names ...string) map[string]any {
		var rules []any
		for _, n := range names {
			rules = append(rules, map[string]any{"name": n})
		}
		return map[string]any{"admissionChecksStrategy": map[string]any{"admissionChecks": rules}}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		kueueObject("LocalQueue", "ns", "lq", map[string]any{"clusterQueue": "dispatching"}),
		kueueObject("LocalQueue", "ns", "local", map[string]any{"clusterQueue": "local"}),
		kueueObject("LocalQueue", "ns", "other-check", map[string]any{"clusterQueue": "provisioned"}),
		kueueObject("ClusterQueue", "", "dispatching", withChecks("provisioning", "multikueue")),
		kueueObject("ClusterQueue", "", "local", map[string]any{}),
		kueueObject("ClusterQueue", "", "provisioned", withChecks("provisioning")),
		kueueObject("AdmissionCheck", "", "multikueue", map[string]any{"controllerName": MultiKueueController}),
		kueueObject("AdmissionCheck", "", "provisioning", map[string]any{"controllerName": "kueue.x-k8s.io/provisioning-request"}),
	).Build()
	d := &SuspendDefaulter{Decoder: admission.NewDecoder(scheme), Reader: reader}
	managedBy := func(queue string, preset *string) any {
		t.Helper()
		job := twoTaskJob()
		job.Labels[QueueNameLabel] = queue
		job.Spec.ManagedBy = preset
		raw, err := json.Marshal(job)
		require.NoError(t, err)
		resp := d.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "ns", Object: runtime.RawExtension{Raw: raw},
		}})
		require.True(t, resp.Allowed)
		var got any
		suspended := false
		for _, p := range resp.Patches {
			switch p.Path {
			case "/spec/managedBy":
				got = p.Value
			case "/spec/suspend":
				suspended = p.Value == true
			}
		}
		require.True(t, suspended, "a Job of queue %s is created suspended", queue)
		return got
	}
	require.Equal(t, batchv1alpha1.MultiKueueManager, managedBy("lq", nil))
	require.Nil(t, managedBy("local", nil), "a ClusterQueue with no admission check runs its jobs here")
	require.Nil(t, managedBy("other-check", nil), "another controller's check is not MultiKueue")
	require.Nil(t, managedBy("missing", nil), "a LocalQueue that does not exist defaults nothing")
	require.Nil(t, managedBy("lq", ptr.To(batchv1alpha1.JobControllerManager)), "a manager the user names is kept")
}
