package kueue

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

func twoTaskJob() *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "uid-1", Labels: map[string]string{QueueNameLabel: "lq"}},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{
			{Name: "Master", Replicas: 1},
			{Name: "worker", Replicas: 8, MinAvailable: ptr.To[int32](4)},
			{Name: "ps", Replicas: 2, MinAvailable: ptr.To[int32](2)},
		}},
	}
}

func TestEachTaskIsAPodSetWithItsMinimumAsMinCount(t *testing.T) {
	sets := podSets(twoTaskJob())
	require.Len(t, sets, 3)
	require.Equal(t, "master", sets[0].Name, "pod set names are lowercase DNS labels")
	require.Equal(t, int32(1), sets[0].Count)
	require.Nil(t, sets[0].MinCount)
	require.Equal(t, int32(8), sets[1].Count)
	require.Equal(t, ptr.To[int32](4), sets[1].MinCount, "a minimum below the replicas allows partial admission")
	require.Nil(t, sets[2].MinCount, "a minimum equal to the replicas is no partial admission")
}

func TestAWorkloadNameIsTheJobsAndItsUID(t *testing.T) {
	job := twoTaskJob()
	name := WorkloadName(job)
	require.Regexp(t, `^job-train-[0-9a-f]{5}$`, name)
	again := twoTaskJob()
	again.UID = "uid-2"
	require.NotEqual(t, name, WorkloadName(again), "a Job created again under its name gets a Workload of its own")
	long := twoTaskJob()
	long.Name = string(make([]byte, 300))
	require.LessOrEqual(t, len(WorkloadName(long)), 253)
}

func TestAJobIsInactiveOnlyOnceAbortedWithNoPods(t *testing.T) {
	job := twoTaskJob()
	job.Status.State.Phase = batchv1alpha1.JobAborting
	require.True(t, active(job))
	job.Status.State.Phase = batchv1alpha1.JobAborted
	job.Status.Terminating = 1
	require.True(t, active(job), "a pod still terminating holds its resources")
	job.Status.Terminating = 0
	require.False(t, active(job))

	done, _, _ := finished(job)
	require.False(t, done, "a suspended Job has not finished")
	job.Status.State.Phase = batchv1alpha1.JobFailed
	done, success, _ := finished(job)
	require.True(t, done)
	require.False(t, success)
}

func TestTheWebhookSuspendsOnlyJobsThatNameALocalQueue(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, batchv1alpha1.AddToScheme(scheme))
	d := &SuspendDefaulter{Decoder: admission.NewDecoder(scheme)}
	review := func(job *batchv1alpha1.Job) admission.Response {
		raw, err := json.Marshal(job)
		require.NoError(t, err)
		return d.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		}})
	}

	resp := review(twoTaskJob())
	require.True(t, resp.Allowed)
	require.Len(t, resp.Patches, 1)
	require.Equal(t, "/spec/suspend", resp.Patches[0].Path)
	require.Equal(t, true, resp.Patches[0].Value)

	plain := twoTaskJob()
	plain.Labels = nil
	resp = review(plain)
	require.True(t, resp.Allowed)
	require.Empty(t, resp.Patches, "a Job that names no LocalQueue is not Kueue's")

	already := twoTaskJob()
	already.Spec.Suspend = ptr.To(true)
	resp = review(already)
	require.True(t, resp.Allowed)
	require.Empty(t, resp.Patches)
}

func TestAWorkloadReadsAdmissionAndConditions(t *testing.T) {
	wl := &workload{Status: workloadStatus{
		Conditions: []metav1.Condition{{Type: conditionQuotaReserved, Status: metav1.ConditionTrue}, {Type: conditionAdmitted, Status: metav1.ConditionFalse}},
	}}
	require.True(t, wl.reserved())
	require.False(t, wl.admitted(), "quota reserved with an admission check pending is not admitted")
	wl.Status.Conditions[1].Status = metav1.ConditionTrue
	require.True(t, wl.admitted())
	require.Equal(t, "(none)", clusterQueue(wl))
	wl.Status.Admission = &workloadAdmission{ClusterQueue: "cq", PodSetAssignments: []podSetAssignment{{Name: "worker", Flavors: map[corev1.ResourceName]string{"cpu": "f"}}}}
	require.Equal(t, "cq", clusterQueue(wl))
}
