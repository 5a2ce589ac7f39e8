package job

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// disruptionPool is three nodes of a test's own, tainted so that the package's other tests keep
// off them, each with room for one of the job's pods: once one node is lost, the other two hold
// the restarted job.
func disruptionPool(t *testing.T, env *framework.Env, pool string) {
	t.Helper()
	taint := corev1.Taint{Key: "e2e.tephra.dev/pool", Value: pool, Effect: corev1.TaintEffectNoSchedule}
	nodes, err := env.Cluster.CreateNodes(context.Background(), pool, 3, localcluster.NodeShape{
		CPU: "8", Memory: "32Gi", Pods: 110, Labels: map[string]string{"e2e.tephra.dev/pool": pool}, Taints: []corev1.Taint{taint},
	})
	require.NoError(t, err)
	require.NoError(t, env.Cluster.WaitNodesReady(context.Background(), nodes...))
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
}

// trainingJob is two 6-CPU workers, one per node of the pool, with the usual policies of
// training: abort on a code error, restart when a machine is lost. The pods tolerate a node not
// ready or unreachable for 5 s (Kubernetes' default is 300 s) and stop within 5 s.
func trainingJob(name, pool string) *batchv1alpha1.Job {
	worker := simTask("worker", 2, "", 0)
	worker.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("6")
	worker.Template.Spec.NodeSelector = map[string]string{"e2e.tephra.dev/pool": pool}
	worker.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	worker.Template.Spec.Tolerations = []corev1.Toleration{
		{Key: "e2e.tephra.dev/pool", Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)},
	}
	job := newJob(name, worker)
	job.Spec.Policies = []batchv1alpha1.LifecyclePolicy{
		onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.AbortJobAction),
		onEvent(batchv1alpha1.PodEvictedEvent, batchv1alpha1.RestartJobAction),
	}
	return job
}

// runningOnTwoNodes waits for the job to run and returns the node of worker-1.
func runningOnTwoNodes(t *testing.T, env *framework.Env, ns, name string) string {
	t.Helper()
	waitPhase(t, env, ns, name, 2*time.Minute, batchv1alpha1.JobRunning)
	pods := jobPods(t, env, ns, name)
	node := pods[name+"-worker-1"].Spec.NodeName
	require.NotEmpty(t, node)
	require.NotEqual(t, pods[name+"-worker-0"].Spec.NodeName, node, "one worker per node")
	return node
}

// restartedWithout waits for the job to run again in its next retry on the pool's other nodes,
// and checks that it went through Restarting for the eviction, never Aborting.
func restartedWithout(t *testing.T, env *framework.Env, ns, name, lost, cause string) {
	t.Helper()
	waitJob(t, env, ns, name, 4*time.Minute, "the job to run again in retry 1", func(j *batchv1alpha1.Job) bool {
		return j.Status.RetryCount == 1 && j.Status.State.Phase == batchv1alpha1.JobRunning
	})
	for podName, pod := range jobPods(t, env, ns, name) {
		assert.Equal(t, "1", pod.Labels["batch.tephra.dev/job-retry"], "pod %s is of the restarted run", podName)
		assert.NotEqual(t, lost, pod.Spec.NodeName, "pod %s runs on a node still there", podName)
	}
	assert.Equal(t, []string{"→Pending", "Pending→Running", "Running→Restarting", "Restarting→Pending", "Pending→Running"}, phaseChanges(t, env, ns, name))
	want := fmt.Sprintf("Warning RestartJob: pod %s-worker-1 was evicted: %s", name, cause)
	assert.Equal(t, 1, eventCount(t, env, ns, name, want, 1), "an event %q…, among %v", want, jobEvents(env, ns, name))
	for _, e := range jobEvents(env, ns, name) {
		assert.NotContains(t, e, "failed (exit code", "no pod failed: %v", jobEvents(env, ns, name))
	}
}

// A node deleted under a running job is an eviction: the pod garbage collector fails its pods
// (exit code 0) with a DisruptionTarget condition, which the job's PodEvicted policy restarts
// the job for; its PodFailed policy (abort) is not applied.
func TestDeletedNodeRestartsTheJob(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	disruptionPool(t, env, "lostnode")
	env.CreateJob(t, ns, trainingJob("lost", "lostnode"))
	node := runningOnTwoNodes(t, env, ns, "lost")

	require.NoError(t, env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}))
	restartedWithout(t, env, ns, "lost", node, fmt.Sprintf("its node %s is gone", node))
}

// A node that stops reporting (its kubelet gone, here kwok no longer simulating it) turns not
// ready; once the pods' toleration of that is over, the taint manager evicts them. The evicted
// pod can never finish terminating on that node: tephra-controllers force-deletes it after its
// grace period, so that the restart, which needs every pod of the run gone, completes.
func TestNodeNotReadyPastTolerationRestartsTheJob(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	disruptionPool(t, env, "notready")
	env.CreateJob(t, ns, trainingJob("unready", "notready"))
	node := runningOnTwoNodes(t, env, ns, "unready")

	require.NoError(t, env.Cluster.LoseNode(context.Background(), node))

	restartedWithout(t, env, ns, "unready", node, fmt.Sprintf("its node %s was not ready or unreachable for longer than the pod tolerates", node))
	assert.Equal(t, 1, eventCount(t, env, ns, "unready", "Warning ForceDeleted: pod unready-worker-1: its grace period is over and its node is gone or not Ready", 1),
		"%v", jobEvents(env, ns, "unready"))
}
