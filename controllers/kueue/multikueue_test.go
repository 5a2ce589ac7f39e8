package kueue

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

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
