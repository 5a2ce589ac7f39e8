package job

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// holdFinalizer keeps a deleted pod in place until the test lets it go.
const holdFinalizer = "e2e.tephra.dev/hold"

func setFinalizers(t *testing.T, env *framework.Env, ns, pod string, finalizers []string) {
	t.Helper()
	patch := `{"metadata":{"finalizers":null}}`
	if len(finalizers) > 0 {
		patch = fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, finalizers[0])
	}
	_, err := env.Kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// tephra-controllers killed in the middle of a RestartJob (the restart written, the old pods
// being deleted, none of the new run created yet) finishes the restart once started again:
// retryCount is exactly 1 and every pod is of the new run. It runs alone (not in parallel): the
// other tests would only wait for the controller meanwhile.
func TestControllerRestartMidRestartJob(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := newJob("steady", simTask("work", 4, "", 0))
	job.Spec.Policies = []batchv1alpha1.LifecyclePolicy{onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction)}
	env.CreateJob(t, ns, job)
	waitJob(t, env, ns, "steady", time.Minute, "4 pods running", func(j *batchv1alpha1.Job) bool { return j.Status.Running == 4 })

	// The old run's pods will not go away until the test lets them: the restart stays in the
	// middle for as long as the test needs.
	old := livePods(t, env, ns, "steady")
	for name := range old {
		setFinalizers(t, env, ns, name, []string{holdFinalizer})
	}
	t.Cleanup(func() {
		for name := range jobPods(t, env, ns, "steady") {
			_, _ = env.Kube.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
	simulate(t, env, ns, "steady-work-2", "1s", 1)
	waitJob(t, env, ns, "steady", time.Minute, "Restarting with retryCount 1", func(j *batchv1alpha1.Job) bool {
		return j.Status.State.Phase == batchv1alpha1.JobRestarting && j.Status.RetryCount == 1
	})
	framework.Eventually(t, 30*time.Second, "the old pods to be deleted", func() (bool, string) {
		deleting := 0
		for _, pod := range jobPods(t, env, ns, "steady") {
			if pod.DeletionTimestamp != nil {
				deleting++
			}
		}
		return deleting == 4, fmt.Sprintf("%d of 4 being deleted", deleting)
	})

	// Events are sent in the background: let the restart's be recorded before the kill.
	framework.Eventually(t, 10*time.Second, "the RestartJob event", func() (bool, string) {
		return countEvents(env, ns, "steady", "Warning RestartJob:") == 1, fmt.Sprint(jobEvents(env, ns, "steady"))
	})
	env.Cluster.KillComponent(localcluster.Controllers)
	t.Cleanup(func() {
		if !env.Cluster.Running(localcluster.Controllers) {
			_ = env.Cluster.StartComponent(context.Background(), localcluster.Controllers)
		}
	})
	for name := range old {
		setFinalizers(t, env, ns, name, nil)
	}
	framework.Eventually(t, 30*time.Second, "the old pods to be gone", func() (bool, string) {
		pods := jobPods(t, env, ns, "steady")
		return len(pods) == 0, fmt.Sprint(names(pods))
	})
	require.Equal(t, batchv1alpha1.JobRestarting, env.GetJob(t, ns, "steady").Status.State.Phase, "nothing acted while the controller was down")

	require.NoError(t, env.Cluster.StartComponent(framework.Context(t, 3*time.Minute), localcluster.Controllers))
	waitJob(t, env, ns, "steady", 90*time.Second, "Running again with 4 pods", func(j *batchv1alpha1.Job) bool {
		return j.Status.State.Phase == batchv1alpha1.JobRunning && j.Status.Running == 4
	})
	// Settled: the restart was finished once, not repeated.
	time.Sleep(3 * time.Second)
	final := env.GetJob(t, ns, "steady")
	assert.Equal(t, int32(1), final.Status.RetryCount, "the restart is counted exactly once")
	assert.Equal(t, batchv1alpha1.JobRunning, final.Status.State.Phase)
	pods := jobPods(t, env, ns, "steady")
	require.Len(t, pods, 4)
	for name, pod := range pods {
		assert.Equal(t, "1", pod.Labels["batch.tephra.dev/job-retry"], "pod %s is of the new run", name)
		assert.NotEqual(t, old[name], pod.UID, "pod %s is new", name)
		assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	}
	assert.Equal(t, 1, eventCount(t, env, ns, "steady", "Warning RestartJob:", 1), "%v", jobEvents(env, ns, "steady"))
	assert.Equal(t, []string{"→Pending", "Pending→Running", "Running→Restarting", "Restarting→Pending", "Pending→Running"},
		phaseChanges(t, env, ns, "steady"))
}

// The controllers export tephra_jobs by queue and phase and count the restarts they decide.
func TestJobMetrics(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := newJob("counted", simTask("work", 1, "1s", 1))
	job.Spec.MaxRetry = 1
	job.Spec.Policies = []batchv1alpha1.LifecyclePolicy{onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction)}
	env.CreateJob(t, ns, job)
	waitPhase(t, env, ns, "counted", time.Minute, batchv1alpha1.JobFailed)

	var metrics string
	framework.Eventually(t, 30*time.Second, "the controllers' metrics", func() (bool, string) {
		var err error
		metrics, err = env.Cluster.ControllersMetrics(context.Background(), localcluster.Controllers)
		if err != nil {
			return false, err.Error()
		}
		return regexp.MustCompile(`tephra_jobs\{phase="Failed",queue="default"\} [1-9]`).MatchString(metrics), "no Failed job counted"
	})
	restarts := regexp.MustCompile(`(?m)^tephra_job_restarts_total\{action="RestartJob",queue="default"\} (\d+)`).FindStringSubmatch(metrics)
	require.NotNil(t, restarts, "tephra_job_restarts_total is exported")
	n, _ := strconv.Atoi(restarts[1])
	assert.GreaterOrEqual(t, n, 1, "this job's restart is counted")
}
