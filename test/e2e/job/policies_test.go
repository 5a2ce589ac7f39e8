package job

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// PodFailed → RestartJob with maxRetry 2: every run fails, the job is restarted twice, and the
// third failure fails it with retryCount 2; each run's pods carry its retry number.
func TestRestartJobUpToMaxRetry(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := newJob("flaky", simTask("worker", 2, "1s", 1))
	job.Spec.MaxRetry = 2
	job.Spec.Policies = []batchv1alpha1.LifecyclePolicy{onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction)}
	env.CreateJob(t, ns, job)

	done := waitPhase(t, env, ns, "flaky", 90*time.Second, batchv1alpha1.JobFailed)
	assert.Equal(t, int32(2), done.Status.RetryCount)
	assert.Equal(t, "RetriesExhausted", done.Status.State.Reason)
	assert.Contains(t, done.Status.State.Message, "it was restarted 2 times (maxRetry 2): the job fails")
	for name, pod := range jobPods(t, env, ns, "flaky") {
		assert.Equal(t, "2", pod.Labels["batch.tephra.dev/job-retry"], "pod %s is of the last run", name)
	}
	assert.Equal(t, 2, eventCount(t, env, ns, "flaky", "Warning PhaseChanged: Phase changed from Running to Restarting (PodFailed)", 2),
		"restarted twice: %v", jobEvents(env, ns, "flaky"))
	assert.Equal(t, 2, eventCount(t, env, ns, "flaky", "Normal PhaseChanged: Phase changed from Restarting to Pending (Restarted)", 2))
	assert.Equal(t, 1, eventCount(t, env, ns, "flaky", "Warning PhaseChanged: Phase changed from Running to Failed (RetriesExhausted)", 1))
}

// RestartTask restarts the failed pod's task only: the other task's pods keep running, with
// the same UIDs.
func TestRestartTaskRestartsOnlyThatTask(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	workers := simTask("worker", 3, "", 0)
	workers.Policies = []batchv1alpha1.LifecyclePolicy{onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartTaskAction)}
	env.CreateJob(t, ns, newJob("two-tasks", simTask("ps", 2, "", 0), workers))
	waitPhase(t, env, ns, "two-tasks", time.Minute, batchv1alpha1.JobRunning)
	before := livePods(t, env, ns, "two-tasks")
	require.Len(t, before, 5)

	simulate(t, env, ns, "two-tasks-worker-1", "1s", 1)
	framework.Eventually(t, time.Minute, "the workers to be replaced and run", func() (bool, string) {
		pods := jobPods(t, env, ns, "two-tasks")
		replaced := 0
		for i := range 3 {
			pod, ok := pods[fmt.Sprintf("two-tasks-worker-%d", i)]
			if ok && pod.UID != before[pod.Name] && pod.Status.Phase == corev1.PodRunning && pod.Labels["batch.tephra.dev/task-generation"] == "1" {
				replaced++
			}
		}
		return replaced == 3, describeJob(env, ns, "two-tasks")
	})
	after := livePods(t, env, ns, "two-tasks")
	assert.Equal(t, before["two-tasks-ps-0"], after["two-tasks-ps-0"], "ps-0 kept its UID")
	assert.Equal(t, before["two-tasks-ps-1"], after["two-tasks-ps-1"], "ps-1 kept its UID")
	job := waitPhase(t, env, ns, "two-tasks", 10*time.Second, batchv1alpha1.JobRunning)
	assert.Equal(t, int32(0), job.Status.RetryCount, "a task restart is no job retry")
	assert.Equal(t, 1, eventCount(t, env, ns, "two-tasks",
		"Warning RestartTask: pod two-tasks-worker-1 failed (exit code 1): the task worker policy on event PodFailed restarts task worker (restart 1 of 3)", 1),
		"%v", jobEvents(env, ns, "two-tasks"))
}

// TaskCompleted → CompleteJob on the master: once the master succeeds the job is Completed and
// the workers, which would run forever, are deleted.
func TestTaskCompletedCompletesJob(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	master := simTask("master", 1, "3s", 0)
	master.Policies = []batchv1alpha1.LifecyclePolicy{onEvent(batchv1alpha1.TaskCompletedEvent, batchv1alpha1.CompleteJobAction)}
	env.CreateJob(t, ns, newJob("master-workers", master, simTask("worker", 3, "", 0)))

	done := waitPhase(t, env, ns, "master-workers", time.Minute, batchv1alpha1.JobCompleted)
	assert.Equal(t, "TaskCompleted", done.Status.State.Reason)
	framework.Eventually(t, 30*time.Second, "the workers to be gone", func() (bool, string) {
		pods := jobPods(t, env, ns, "master-workers")
		return len(pods) == 1 && pods["master-workers-master-0"].Status.Phase == corev1.PodSucceeded, fmt.Sprint(names(pods))
	})
	assert.Equal(t, []string{"→Pending", "Pending→Running", "Running→Completing", "Completing→Completed"}, phaseChanges(t, env, ns, "master-workers"))
}

// Exit codes pick their policy's action: 3 restarts the pod, 4 terminates the job, and 5 aborts
// it, from which the resume annotation brings it back without counting a retry.
func TestExitCodePolicies(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	policies := []batchv1alpha1.LifecyclePolicy{
		onExit(3, batchv1alpha1.RestartPodAction),
		onExit(4, batchv1alpha1.TerminateJobAction),
		onExit(5, batchv1alpha1.AbortJobAction),
	}
	start := func(t *testing.T) string {
		ns := env.Namespace(t)
		job := newJob("codes", simTask("work", 3, "", 0))
		job.Spec.Policies = policies
		env.CreateJob(t, ns, job)
		waitPhase(t, env, ns, "codes", time.Minute, batchv1alpha1.JobRunning)
		return ns
	}
	t.Run("3 restarts the pod", func(t *testing.T) {
		t.Parallel()
		ns := start(t)
		before := livePods(t, env, ns, "codes")
		simulate(t, env, ns, "codes-work-0", "1s", 3)
		framework.Eventually(t, time.Minute, "work-0 to be replaced and run", func() (bool, string) {
			pod := jobPods(t, env, ns, "codes")["codes-work-0"]
			return pod.UID != "" && pod.UID != before["codes-work-0"] && pod.Status.Phase == corev1.PodRunning, describeJob(env, ns, "codes")
		})
		after := livePods(t, env, ns, "codes")
		assert.Equal(t, before["codes-work-1"], after["codes-work-1"])
		assert.Equal(t, before["codes-work-2"], after["codes-work-2"])
		job := env.GetJob(t, ns, "codes")
		assert.Equal(t, batchv1alpha1.JobRunning, job.Status.State.Phase)
		assert.Equal(t, 1, eventCount(t, env, ns, "codes", "Warning RestartPod: pod codes-work-0 failed (exit code 3): the job policy on exitCode 3 restarts the pod (restart 1 of 3 of task work)", 1),
			"%v", jobEvents(env, ns, "codes"))
	})
	t.Run("4 terminates the job", func(t *testing.T) {
		t.Parallel()
		ns := start(t)
		simulate(t, env, ns, "codes-work-1", "1s", 4)
		done := waitPhase(t, env, ns, "codes", time.Minute, batchv1alpha1.JobTerminated)
		assert.Contains(t, done.Status.State.Message, "pod codes-work-1 failed (exit code 4): the job policy on exitCode 4 terminates the job")
		framework.Eventually(t, 30*time.Second, "the other pods to be deleted", func() (bool, string) {
			pods := livePods(t, env, ns, "codes")
			return len(pods) == 1, fmt.Sprint(names(pods))
		})
		assert.Equal(t, 1, eventCount(t, env, ns, "codes", "Warning TerminateJob: pod codes-work-1 failed (exit code 4)", 1))
	})
	t.Run("5 aborts the job until resumed", func(t *testing.T) {
		t.Parallel()
		ns := start(t)
		simulate(t, env, ns, "codes-work-2", "1s", 5)
		aborted := waitPhase(t, env, ns, "codes", time.Minute, batchv1alpha1.JobAborted)
		assert.Equal(t, "PodFailed", aborted.Status.State.Reason)
		assert.Len(t, livePods(t, env, ns, "codes"), 1, "only the failed pod is kept")
		_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "codes", metav1.GetOptions{})
		assert.NoError(t, err, "the PodGroup is kept")

		patchJob(t, env, ns, "codes", `{"metadata":{"annotations":{"batch.tephra.dev/resume":"true"}}}`)
		resumed := waitJob(t, env, ns, "codes", time.Minute, "Running with 3 new pods", func(j *batchv1alpha1.Job) bool {
			return j.Status.State.Phase == batchv1alpha1.JobRunning && j.Status.Running == 3
		})
		assert.Equal(t, int32(0), resumed.Status.RetryCount, "resuming counts no retry")
		assert.NotContains(t, resumed.Annotations, "batch.tephra.dev/resume", "the request is consumed")
		assert.Contains(t, phaseChanges(t, env, ns, "codes"), "Aborted→Restarting")
	})
}

// Suspending a job deletes its pods and keeps it Aborted; unsuspending starts it again, without
// counting a retry.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	env.CreateJob(t, ns, newJob("pausable", simTask("ps", 1, "", 0), simTask("worker", 3, "", 0)))
	waitPhase(t, env, ns, "pausable", time.Minute, batchv1alpha1.JobRunning)

	patchJob(t, env, ns, "pausable", `{"spec":{"suspend":true}}`)
	suspended := waitPhase(t, env, ns, "pausable", time.Minute, batchv1alpha1.JobAborted)
	assert.Equal(t, "Suspended", suspended.Status.State.Reason)
	framework.Eventually(t, 30*time.Second, "no pods while suspended", func() (bool, string) {
		pods := jobPods(t, env, ns, "pausable")
		return len(pods) == 0, fmt.Sprint(names(pods))
	})
	time.Sleep(2 * time.Second)
	assert.Empty(t, jobPods(t, env, ns, "pausable"), "still no pods while suspended")

	patchJob(t, env, ns, "pausable", `{"spec":{"suspend":false}}`)
	resumed := waitJob(t, env, ns, "pausable", time.Minute, "Running with 4 pods", func(j *batchv1alpha1.Job) bool {
		return j.Status.State.Phase == batchv1alpha1.JobRunning && j.Status.Running == 4
	})
	assert.Equal(t, int32(0), resumed.Status.RetryCount, "resuming counts no retry")
	assert.Len(t, livePods(t, env, ns, "pausable"), 4)
	assert.Equal(t, []string{"→Pending", "Pending→Running", "Running→Aborting", "Aborting→Aborted", "Aborted→Restarting", "Restarting→Pending", "Pending→Running"},
		phaseChanges(t, env, ns, "pausable"))
}

// A finished job with ttlSecondsAfterFinished is deleted that long after it finished, with its
// pods.
func TestTTLAfterFinished(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := newJob("short-lived", simTask("work", 2, "1s", 0))
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](3)
	env.CreateJob(t, ns, job)
	done := waitPhase(t, env, ns, "short-lived", time.Minute, batchv1alpha1.JobCompleted)
	finished := done.Status.State.LastTransitionTime.Time

	framework.Eventually(t, 30*time.Second, "the job to be deleted", func() (bool, string) {
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(context.Background(), "short-lived", metav1.GetOptions{})
		return err != nil, "still there"
	})
	gone := time.Now()
	assert.GreaterOrEqual(t, gone.Sub(finished), 2*time.Second, "not before its TTL (the finish time is rounded to the second)")
	assert.Less(t, gone.Sub(finished), 15*time.Second, "soon after its TTL")
	framework.Eventually(t, time.Minute, "its pods to go with it", func() (bool, string) {
		pods := jobPods(t, env, ns, "short-lived")
		return len(pods) == 0, fmt.Sprint(names(pods))
	})
}
