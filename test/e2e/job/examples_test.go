package job

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// The TensorFlow example gets a PodGroup for its 2 ps and 4 workers and 6 pods, named,
// labelled and owned as documented, each with TF_CONFIG for its role and the svc plugin's host
// files; it completes when the workers have, and the parameter servers are cleaned up.
func TestTensorFlowExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, loadExample(t, "tensorflow.yaml"))
	ctx := framework.Context(t, 2*time.Minute)

	framework.Eventually(t, time.Minute, "6 pods", func() (bool, string) {
		pods := livePods(t, env, ns, job.Name)
		return len(pods) == 6, fmt.Sprint(names(pods))
	})
	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "tf-mnist", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(6), group.Spec.MinMember)
	assert.Equal(t, map[string]int32{"ps": 2, "worker": 4}, group.Spec.MinTaskMember)
	assert.Equal(t, "default", group.Spec.Queue)
	cpu, memory := group.Spec.MinResources[corev1.ResourceCPU], group.Spec.MinResources[corev1.ResourceMemory]
	assert.Equal(t, 0, cpu.Cmp(resource.MustParse("5")), "2 × 500m + 4 × 1 CPU, got %s", cpu.String())
	assert.Equal(t, 0, memory.Cmp(resource.MustParse("10Gi")), "2 × 1Gi + 4 × 2Gi, got %s", memory.String())
	assert.True(t, metav1.IsControlledBy(group, job), "the PodGroup is owned by the job")

	pods := jobPods(t, env, ns, job.Name)
	assert.Equal(t, []string{"tf-mnist-ps-0", "tf-mnist-ps-1", "tf-mnist-worker-0", "tf-mnist-worker-1", "tf-mnist-worker-2", "tf-mnist-worker-3"}, names(pods))
	worker := pods["tf-mnist-worker-1"]
	assert.Equal(t, map[string]string{
		"scheduling.tephra.dev/pod-group":  "tf-mnist",
		"scheduling.tephra.dev/task":       "worker",
		"batch.tephra.dev/job-name":        "tf-mnist",
		"batch.tephra.dev/task-index":      "1",
		"batch.tephra.dev/job-retry":       "0",
		"batch.tephra.dev/task-generation": "0",
	}, worker.Labels)
	assert.True(t, metav1.IsControlledBy(&worker, job), "the pod is owned by the job, so deleting the job deletes it")
	assert.Equal(t, "tephra-scheduler", worker.Spec.SchedulerName)
	assert.Equal(t, "8s", worker.Annotations[simDuration], "the template's annotations reach the pod")

	var config struct {
		Cluster map[string][]string `json:"cluster"`
		Task    struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(envOf(worker, "TF_CONFIG")), &config), "TF_CONFIG: %q", envOf(worker, "TF_CONFIG"))
	assert.Equal(t, map[string][]string{
		"ps": {"tf-mnist-ps-0.tf-mnist:2222", "tf-mnist-ps-1.tf-mnist:2222"},
		"worker": {"tf-mnist-worker-0.tf-mnist:2222", "tf-mnist-worker-1.tf-mnist:2222",
			"tf-mnist-worker-2.tf-mnist:2222", "tf-mnist-worker-3.tf-mnist:2222"},
	}, config.Cluster)
	assert.Equal(t, "worker", config.Task.Type)
	assert.Equal(t, 1, config.Task.Index)
	ps := pods["tf-mnist-ps-0"]
	assert.Contains(t, envOf(ps, "TF_CONFIG"), `"task":{"type":"ps","index":0}`)
	assert.Equal(t, "1", envOf(worker, "VC_TASK_INDEX"), "env plugin")
	assert.Equal(t, "tf-mnist-worker-1", worker.Spec.Hostname, "svc plugin")
	assert.Equal(t, "tf-mnist", worker.Spec.Subdomain)
	assert.Equal(t, []string{"/etc/tephra", "/etc/volcano"}, mountPaths(worker), "svc plugin's host files")
	hosts, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "tf-mnist-svc", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "tf-mnist-ps-0.tf-mnist\ntf-mnist-ps-1.tf-mnist", hosts.Data["ps.host"])
	svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "tf-mnist", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "a headless Service names the pods")

	done := waitPhase(t, env, ns, job.Name, 90*time.Second, batchv1alpha1.JobCompleted)
	assert.Equal(t, "TaskCompleted", done.Status.State.Reason)
	assert.Equal(t, int32(4), done.Status.Succeeded)
	assert.Equal(t, int32(6), done.Status.MinAvailable)
	framework.Eventually(t, 30*time.Second, "the parameter servers to be deleted", func() (bool, string) {
		left := livePods(t, env, ns, job.Name)
		return len(left) == 4 && left["tf-mnist-ps-0"] == "" && left["tf-mnist-ps-1"] == "", fmt.Sprint(names(left))
	})
	assert.Equal(t, []string{"→Pending", "Pending→Running", "Running→Completing", "Completing→Completed"}, phaseChanges(t, env, ns, job.Name))
	assert.Equal(t, 1, eventCount(t, env, ns, job.Name, "Normal CompleteJob: task worker completed: the task worker policy on event TaskCompleted completes the job", 1))
	assert.Equal(t, 1, eventCount(t, env, ns, job.Name, "Normal PhaseChanged: Phase set to Pending (Created): the job was created; "+
		"created PodGroup tf-mnist: minMember 6 (ps 2, worker 4) in queue default; created 6 pods for run 0: ", 1), "one event says the first decision")
}

// The PyTorch example's pods get what torch.distributed reads: the master's address and port,
// the world size, and each pod's rank.
func TestPyTorchExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, loadExample(t, "pytorch.yaml"))
	framework.Eventually(t, time.Minute, "4 pods", func() (bool, string) {
		pods := livePods(t, env, ns, job.Name)
		return len(pods) == 4, fmt.Sprint(names(pods))
	})
	pods := jobPods(t, env, ns, job.Name)
	for name, rank := range map[string]string{"pytorch-ddp-master-0": "0", "pytorch-ddp-worker-0": "1", "pytorch-ddp-worker-1": "2", "pytorch-ddp-worker-2": "3"} {
		pod, ok := pods[name]
		require.True(t, ok, "pod %s exists: %v", name, names(pods))
		assert.Equal(t, "pytorch-ddp-master-0.pytorch-ddp", envOf(pod, "MASTER_ADDR"), name)
		assert.Equal(t, "23456", envOf(pod, "MASTER_PORT"), name)
		assert.Equal(t, "4", envOf(pod, "WORLD_SIZE"), name)
		assert.Equal(t, rank, envOf(pod, "RANK"), name)
	}
	done := waitPhase(t, env, ns, job.Name, 90*time.Second, batchv1alpha1.JobCompleted)
	assert.Equal(t, int32(0), done.Status.RetryCount)
	assert.Equal(t, map[corev1.PodPhase]int32{corev1.PodSucceeded: 1}, done.Status.TaskStatusCount["master"].Phase)
}

// The MPI example's launcher is created only once all 4 ranks run, knows their names, and the
// job completes when it does.
func TestMPIExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, loadExample(t, "mpi.yaml"))
	checkDependsOn(t, env, ns, job.Name, "mpi-pi-launcher-0", []string{"mpi-pi-rank-0", "mpi-pi-rank-1", "mpi-pi-rank-2", "mpi-pi-rank-3"})
	launcher := jobPods(t, env, ns, job.Name)["mpi-pi-launcher-0"]
	assert.Equal(t, "mpi-pi-rank-0.mpi-pi,mpi-pi-rank-1.mpi-pi,mpi-pi-rank-2.mpi-pi,mpi-pi-rank-3.mpi-pi", envOf(launcher, "MPI_HOST"))
	_, err := env.Kube.CoreV1().Secrets(ns).Get(context.Background(), "mpi-pi-ssh", metav1.GetOptions{})
	assert.NoError(t, err, "the ssh plugin's key pair")
	waitPhase(t, env, ns, job.Name, 90*time.Second, batchv1alpha1.JobCompleted)
}

// The dependsOn example's clients are neither created nor bound before the server runs, and
// are gang-placed together once created.
func TestDependsOnExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, loadExample(t, "depends-on.yaml"))
	checkDependsOn(t, env, ns, job.Name, "server-clients-client-0", []string{"server-clients-server-0"})
	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), job.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(4), group.Spec.MinMember, "once released, the clients join the group's minimum")
	done := waitPhase(t, env, ns, job.Name, 90*time.Second, batchv1alpha1.JobCompleted)
	assert.Equal(t, int32(3), done.Status.Succeeded)
}

// checkDependsOn watches a job until the dependent pod exists and runs, checking at every look
// that it does not exist (let alone run on a node) before all its dependencies are Running.
func checkDependsOn(t *testing.T, env *framework.Env, ns, job, dependent string, dependencies []string) {
	t.Helper()
	sawWaiting := false
	framework.Eventually(t, 90*time.Second, dependent+" to run", func() (bool, string) {
		pods := jobPods(t, env, ns, job)
		var running int
		for _, name := range dependencies {
			if pods[name].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		pod, exists := pods[dependent]
		if !exists {
			sawWaiting = sawWaiting || running < len(dependencies)
			return false, fmt.Sprintf("%d of %d dependencies running, %s not created", running, len(dependencies), dependent)
		}
		if pod.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("%s is %s", dependent, pod.Status.Phase)
		}
		return true, ""
	})
	assert.True(t, sawWaiting, "%s was seen not created while its dependencies were not all running", dependent)
	// Its creation time is after every dependency started running.
	pods := jobPods(t, env, ns, job)
	created := pods[dependent].CreationTimestamp.Time
	for _, name := range dependencies {
		started := pods[name].Status.StartTime
		require.NotNil(t, started, "%s started", name)
		assert.False(t, created.Before(started.Time), "%s was created at %v, before %s ran at %v", dependent, created, name, started.Time)
	}
}

// The restart-policy example: its flaky pod (exit code 3) is restarted twice (RestartPod, the
// task's maxRetry), then the task is out of restarts; it is not needed (minAvailable 0), so the
// job completes when its trainers do.
func TestRestartPolicyExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, loadExample(t, "restart-policy.yaml"))
	done := waitPhase(t, env, ns, job.Name, 2*time.Minute, batchv1alpha1.JobCompleted)
	assert.Equal(t, int32(2), done.Status.Succeeded)
	assert.Equal(t, int32(1), done.Status.Failed, "the flaky pod's last run")
	assert.Equal(t, int32(0), done.Status.RetryCount, "no job restart")
	restarts := eventCount(t, env, ns, job.Name, "Warning RestartPod: pod restart-demo-flaky-0 failed (exit code 3): the task flaky policy on exitCode 3 restarts the pod", 2)
	assert.Equal(t, 2, restarts, "two RestartPod events: %v", jobEvents(env, ns, job.Name))
	assert.Equal(t, 1, eventCount(t, env, ns, job.Name, "Warning TaskFailed: pod restart-demo-flaky-0 failed (exit code 3): task flaky cannot be restarted again (maxRetry 2)", 1))
	for _, e := range jobEvents(env, ns, job.Name) {
		assert.False(t, strings.Contains(e, "Terminat"), "nothing terminated the job: %s", e)
	}
}

// Deleting a job deletes its pods and PodGroup: they are owned by it.
func TestJobDeletionCascades(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, newJob("cascade", simTask("work", 3, "", 0)))
	waitPhase(t, env, ns, job.Name, time.Minute, batchv1alpha1.JobRunning)
	require.NoError(t, env.Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the pods and PodGroup to go with the job", func() (bool, string) {
		pods := jobPods(t, env, ns, job.Name)
		_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), job.Name, metav1.GetOptions{})
		return len(pods) == 0 && err != nil, fmt.Sprintf("%d pods, PodGroup: %v", len(pods), err)
	})
}
