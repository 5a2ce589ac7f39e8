package dra

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// TephraPlacement (docs/placement.md) is checked here, with the devices it counts: GPUs as an
// extended resource (nvidia.com/gpu of a device plugin) and as DRA devices.

// placeOneByOne creates count pods named prefix-0.. one at a time, each once the one before is
// bound, so that each is scored on the nodes as the last one left them.
func placeOneByOne(t *testing.T, env *framework.Env, ns string, count int, prefix string, d devicePod) {
	t.Helper()
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), d.build(ns, name), metav1.CreateOptions{})
		require.NoError(t, err)
		env.WaitPod(t, ns, name, time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	}
}

// boundPerNode counts a namespace's bound pods per node; sorted lists the counts, highest first.
func boundPerNode(t *testing.T, env *framework.Env, ns string) map[string][]string {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Name)
		}
	}
	return out
}

func sorted(perNode map[string][]string) []int {
	var counts []int
	for _, pods := range perNode {
		counts = append(counts, len(pods))
	}
	slices.SortFunc(counts, func(a, b int) int { return b - a })
	return counts
}

// packAndGang is the scenario of both tests, on 4 nodes of 8 GPUs (of either kind): 1-GPU pods
// placed one at a time fill one node before the next (8 on one node, then 12 as 8+4, where
// upstream's LeastAllocated spreads them 3 per node), and once the 4 are gone, a gang of three
// 8-GPU pods finds the 3 whole nodes it needs. one and eight are the pods of 1 and 8 GPUs.
func packAndGang(t *testing.T, env *framework.Env, ns, queue string, one, eight devicePod) {
	t.Helper()
	placeOneByOne(t, env, ns, 8, "one", one)
	require.Equal(t, []int{8}, sorted(boundPerNode(t, env, ns)), "8 pods of 1 GPU fill one node:\n%s", podStates(env, ns))
	placeOneByOne(t, env, ns, 4, "more", one)
	perNode := boundPerNode(t, env, ns)
	require.Equal(t, []int{8, 4}, sorted(perNode), "4 more go to one node together:\n%s", podStates(env, ns))
	if one.requests != nil {
		// The scheduler's gauge (counted every 30 s) sees the 4 GPUs left on the partly used node
		// and the 2 whole nodes, and the other tests' nodes besides.
		framework.Eventually(t, time.Minute, "the free GPUs gauge to count this test's nodes", func() (bool, string) {
			metrics, err := env.Cluster.SchedulerMetrics(context.Background())
			if err != nil {
				return false, err.Error()
			}
			partly, whole := freeGPUs(metrics, "partly_used"), freeGPUs(metrics, "whole")
			return partly >= 4 && whole >= 16, fmt.Sprintf("partly used %v, whole %v", partly, whole)
		})
	}

	for _, pods := range perNode {
		if len(pods) == 4 {
			deletePods(t, env, ns, pods...)
		}
	}
	framework.Eventually(t, time.Minute, "the 4 pods to go", func() (bool, string) {
		got := sorted(boundPerNode(t, env, ns))
		return slices.Equal(got, []int{8}), fmt.Sprint(got)
	})
	eight.group = "gang"
	createGroup(t, env, ns, "gang", queue, 3)
	submit(t, env, ns, 3, "member", eight)
	framework.WaitBound(t, env, ns, map[string]int{queue: 8 + 3}, 2*time.Minute, func() string { return podStates(env, ns) })
	require.Equal(t, []int{8, 1, 1, 1}, sorted(boundPerNode(t, env, ns)), "the gang's members take the 3 whole nodes")
}

// Pods that ask for GPUs as an extended resource pack nodes, and whole nodes stay free for a
// gang; a pod that asks for none goes to the node without GPUs, which upstream's scores (its
// CPUs are fewer) would leave last.
func TestPlacementPacksExtendedGPUs(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := map[string]string{framework.PoolLabel: "place-ext"}
	gpuNodes, err := env.Cluster.CreateNodes(context.Background(), "place-ext", 4, localcluster.NodeShape{
		CPU: "64", Memory: "256Gi", Pods: 110, GPUs: 8, Labels: pool,
	})
	t.Cleanup(func() { deleteNodes(env, gpuNodes) })
	require.NoError(t, err)
	cpuNodes, err := env.Cluster.CreateNodes(context.Background(), "place-cpu", 1, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: pool,
	})
	t.Cleanup(func() { deleteNodes(env, cpuNodes) })
	require.NoError(t, err)
	framework.CreateQueue(t, env, "place-ext", nil)

	cpu := devicePod{queue: "place-ext", pool: pool, requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	placeOneByOne(t, env, ns, 1, "cpu", cpu)
	require.Equal(t, map[string][]string{cpuNodes[0]: {"cpu-0"}}, boundPerNode(t, env, ns), "a pod without GPUs keeps off GPU nodes")

	gpus := func(n int64) devicePod {
		return devicePod{queue: "place-ext", pool: pool, requests: corev1.ResourceList{localcluster.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	deletePods(t, env, ns, "cpu-0")
	framework.Eventually(t, time.Minute, "the CPU pod to go", func() (bool, string) {
		got := boundPerNode(t, env, ns)
		return len(got) == 0, fmt.Sprint(got)
	})
	packAndGang(t, env, ns, "place-ext", gpus(1), gpus(8))
}

// Pods whose claims ask for DRA devices pack the nodes whose ResourceSlices offer them, as
// extended GPUs do.
func TestPlacementPacksDevices(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-place.e2e.tephra.dev"
	pool := devicePool(t, env, "place-dra", 4, localcluster.DeviceShape{GPUs: 8})
	createClass(t, env, class, "place-dra", false, nil)
	framework.CreateQueue(t, env, "place-dra", nil)
	createTemplate(t, env, ns, "one-gpu", deviceRequest(class, 1, nil))
	createTemplate(t, env, ns, "eight-gpus", deviceRequest(class, 8, nil))

	packAndGang(t, env, ns, "place-dra",
		devicePod{queue: "place-dra", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}},
		devicePod{queue: "place-dra", pool: pool, claims: []claimRef{fromTemplate("gpu", "eight-gpus")}})
}

// freeGPUs reads the scheduler's gauge of free nvidia.com/gpu on the nodes given ("whole" or
// "partly_used"), -1 when it is not there.
func freeGPUs(metrics, nodes string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, "tephra_placement_free_accelerators{") || !strings.Contains(line, `nodes="`+nodes+`"`) ||
			!strings.Contains(line, `resource="nvidia.com/gpu"`) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			return v
		}
	}
	return -1
}
