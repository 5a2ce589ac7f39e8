package dra

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// applyExample creates the ResourceClaimTemplates and the Job of a DRA example of
// manifests/examples in a namespace, as `kubectl apply -f` would, and returns the Job.
func applyExample(t *testing.T, env *framework.Env, ns, file string) *batchv1alpha1.Job {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "manifests", "examples", file))
	require.NoError(t, err)
	var job *batchv1alpha1.Job
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "ResourceClaimTemplate":
			tmpl := &resourceapi.ResourceClaimTemplate{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), tmpl))
			_, err := env.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), tmpl, metav1.CreateOptions{})
			require.NoError(t, err)
		case "Job":
			job = &batchv1alpha1.Job{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), job))
		default:
			t.Fatalf("%s: unexpected kind %q", file, meta.Kind)
		}
	}
	require.NotNil(t, job, "%s has a Job", file)
	created, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// exampleNodes gives a DRA example nodes like `make up`'s: devices with no group, which the
// simulated driver's own classes (gpu.tephra.dev, shared-gpu.tephra.dev) select.
func exampleNodes(t *testing.T, env *framework.Env, prefix string, count int, devices localcluster.DeviceShape) {
	t.Helper()
	names, err := env.Cluster.CreateNodes(context.Background(), prefix, count, localcluster.NodeShape{
		CPU: "8", Memory: "32Gi", Pods: 110, Labels: map[string]string{framework.PoolLabel: prefix}, Devices: &devices,
	})
	t.Cleanup(func() { deleteNodes(env, names) })
	require.NoError(t, err)
}

// waitJobPhase waits for a Tephra Job's phase.
func waitJobPhase(t *testing.T, env *framework.Env, ns, name string, timeout time.Duration, phase batchv1alpha1.JobPhase) *batchv1alpha1.Job {
	t.Helper()
	var last *batchv1alpha1.Job
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = job
		return job.Status.State.Phase == phase, nil
	})
	state := "not found"
	if last != nil {
		state = fmt.Sprintf("%s (%s: %s), %d running, %d succeeded", last.Status.State.Phase, last.Status.State.Reason, last.Status.State.Message, last.Status.Running, last.Status.Succeeded)
	}
	require.NoError(t, err, "job %s: phase %s; last %s\n%s", name, phase, state, podStates(env, ns))
	return last
}

// runningClaims waits until count pods of the namespace run, and returns their allocated claims.
func runningClaims(t *testing.T, env *framework.Env, ns string, count int) []resourceapi.ResourceClaim {
	t.Helper()
	var allocated []resourceapi.ResourceClaim
	framework.Eventually(t, time.Minute, fmt.Sprintf("%d pods running with their claims allocated", count), func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		allocated = nil
		for _, c := range claims(t, env, ns) {
			if c.Status.Allocation != nil && len(c.Status.ReservedFor) > 0 {
				allocated = append(allocated, c)
			}
		}
		return running == count && len(allocated) == count, podStates(env, ns)
	})
	return allocated
}

// The DRA example: a PyTorch job whose 4 pods each claim a whole GPU of gpu.tephra.dev through
// its ResourceClaimTemplate runs on nodes with the simulated driver's GPUs, one distinct device
// per pod, and completes; the default queue counts the 4 devices while it runs.
func TestDRAJobExample(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	exampleNodes(t, env, "dra-example", 2, localcluster.DeviceShape{GPUs: 4})
	job := applyExample(t, env, ns, "dra-job.yaml")

	allocated := runningClaims(t, env, ns, 4)
	devices := map[string]bool{}
	for _, c := range allocated {
		require.Len(t, c.Status.Allocation.Devices.Results, 1, "claim %s", c.Name)
		r := c.Status.Allocation.Devices.Results[0]
		assert.Equal(t, localcluster.DeviceDriver, r.Driver)
		assert.True(t, strings.HasPrefix(r.Device, "gpu-"), "claim %s has a whole GPU, not %s", c.Name, r.Device)
		devices[r.Pool+"/"+r.Device] = true
	}
	assert.Len(t, devices, 4, "4 distinct GPUs")
	framework.WaitQueueStatus(t, env, "default", 30*time.Second, "the default queue counts the job's 4 GPUs", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(localcluster.GPUClass)) >= 4
	})
	done := waitJobPhase(t, env, ns, job.Name, 90*time.Second, batchv1alpha1.JobCompleted)
	assert.Equal(t, int32(0), done.Status.RetryCount)
}

// The shared-GPU example: 6 pods each claiming 20Gi of a shared GPU's 80Gi (consumable
// capacity) run at once on 2 shared GPUs, so that pods share devices, and the job completes.
func TestSharedGPUJobExample(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	exampleNodes(t, env, "shared-example", 2, localcluster.DeviceShape{SharedGPUs: 1})
	job := applyExample(t, env, ns, "shared-gpu-job.yaml")

	allocated := runningClaims(t, env, ns, 6)
	perDevice := map[string]int{}
	for _, c := range allocated {
		require.Len(t, c.Status.Allocation.Devices.Results, 1, "claim %s", c.Name)
		r := c.Status.Allocation.Devices.Results[0]
		consumed := r.ConsumedCapacity["memory"]
		assert.Equal(t, "20Gi", consumed.String(), "claim %s took 20Gi", c.Name)
		perDevice[r.Pool+"/"+r.Device]++
	}
	assert.Len(t, perDevice, 2, "both shared GPUs are used: %v", perDevice)
	for device, n := range perDevice {
		assert.LessOrEqual(t, n, 4, "at most 4 claims of 20Gi on %s's 80Gi", device)
	}
	waitJobPhase(t, env, ns, job.Name, 90*time.Second, batchv1alpha1.JobCompleted)
}
