// Package numa checks NUMA-aware placement end to end: TephraNUMA sends pods only to nodes where
// kubelet's Topology Manager would admit them, from the nodes' NodeResourceTopology objects.
package numa

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func TestMain(m *testing.M) {
	config, err := framework.SchedulerConfigWithVanillaProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m, localcluster.Options{SchedulerConfig: config}, nil))
}

const poolLabel = "e2e.tephra.dev/pool"

// zone is what one NUMA zone of a test node has free: CPUs and GPUs.
type zone struct{ cpu, gpu int }

// numaNode creates a simulated node whose NodeResourceTopology reports the given zones, each of
// 4 CPUs (and 2 GPUs if the node has GPUs), with what the zones have free, under policy.
func numaNode(t *testing.T, env *framework.Env, name, pool, policy string, free ...zone) {
	t.Helper()
	ctx := context.Background()
	gpus := 0
	for _, z := range free {
		if z.gpu > 0 {
			gpus = 2 * len(free)
		}
	}
	shape := localcluster.NodeShape{CPU: fmt.Sprint(4 * len(free)), Memory: fmt.Sprintf("%dGi", 8*len(free)), GPUs: gpus,
		Labels: map[string]string{poolLabel: pool}}
	_, err := env.Kube.CoreV1().Nodes().Create(ctx, localcluster.SimulatedNode(name, shape), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })

	shape.NUMA = &localcluster.NUMAShape{Zones: len(free), Policy: policy, Scope: "container"}
	topology := localcluster.SimulatedTopology(name, shape)
	for i := range topology.Zones {
		for j := range topology.Zones[i].Resources {
			r := &topology.Zones[i].Resources[j]
			switch r.Name {
			case "cpu":
				r.Available = *resource.NewQuantity(int64(free[i].cpu), resource.DecimalSI)
			case string(localcluster.GPUResource):
				r.Available = *resource.NewQuantity(int64(free[i].gpu), resource.DecimalSI)
			}
		}
	}
	_, err = env.Tephra.TopologyV1alpha2().NodeResourceTopologies().Create(ctx, topology, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.TopologyV1alpha2().NodeResourceTopologies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	require.NoError(t, env.Cluster.WaitNodesReady(ctx, name))
}

// guaranteedPod asks for whole CPUs (and GPUs) with requests equal to limits: kubelet's
// Topology Manager aligns it to NUMA zones.
func guaranteedPod(ns, name, pool, scheduler string, cpus, gpus int) *corev1.Pod {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	if gpus > 0 {
		resources[localcluster.GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			NodeSelector:  map[string]string{poolLabel: pool},
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: resources, Limits: resources},
			}},
		},
	}
}

func runOn(t *testing.T, env *framework.Env, pod *corev1.Pod) string {
	t.Helper()
	_, err := env.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	bound := env.WaitPod(t, pod.Namespace, pod.Name, time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	return bound.Spec.NodeName
}

// A node with two zones of 4 CPUs, each with 2 used, cannot give a Guaranteed 4-CPU pod one zone:
// under single-numa-node Tephra places the pod on a node with a free zone, where the default
// profile, which sees 4 free CPUs on either node, places it on the emptier, fragmented one.
func TestSingleNUMANodePodGoesWhereAZoneIsFree(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	numaNode(t, env, "frag", "single", "single-numa-node", zone{cpu: 2}, zone{cpu: 2})
	numaNode(t, env, "whole", "single", "single-numa-node", zone{cpu: 4}, zone{cpu: 0})
	// Make the fragmented node look better to node-level scoring: the other runs a pod.
	busy := guaranteedPod(ns, "busy", "single", schedulingv1alpha1.SchedulerName, 4, 0)
	busy.Spec.NodeName = "whole"
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), busy, metav1.CreateOptions{})
	require.NoError(t, err)

	assert.Equal(t, "whole", runOn(t, env, guaranteedPod(ns, "tephra", "single", schedulingv1alpha1.SchedulerName, 4, 0)))
	assert.Equal(t, "frag", runOn(t, env, guaranteedPod(ns, "vanilla", "single", framework.VanillaScheduler, 4, 0)),
		"the default profile would send the pod where kubelet rejects it")
}

// A pod needing 2 GPUs lands where both GPUs share a zone.
func TestTwoGPUsComeFromOneZone(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	numaNode(t, env, "gpu-split", "gpu", "single-numa-node", zone{cpu: 4, gpu: 1}, zone{cpu: 4, gpu: 1})
	numaNode(t, env, "gpu-paired", "gpu", "single-numa-node", zone{cpu: 4, gpu: 2}, zone{cpu: 4, gpu: 0})
	assert.Equal(t, "gpu-paired", runOn(t, env, guaranteedPod(ns, "two-gpus", "gpu", schedulingv1alpha1.SchedulerName, 2, 2)))
}

// 20 pods of 2 CPUs submitted at once on 10 nodes of two 3-CPU zones: a zone holds one such pod,
// a node two, although the node has room for three. The scheduler accounts the zones it has
// given away before the published objects catch up, so no zone is overfilled and all 20 run.
func TestBurstNeverOverfillsAZone(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	for i := range 10 {
		name := fmt.Sprintf("burst-%d", i)
		shape := localcluster.NodeShape{CPU: "6", Memory: "12Gi", Labels: map[string]string{poolLabel: "burst"},
			NUMA: &localcluster.NUMAShape{Zones: 2, Policy: "single-numa-node", Scope: "container"}}
		_, err := env.Cluster.CreateNodes(ctx, name, 1, shape)
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name+"-0", metav1.DeleteOptions{})
			_ = env.Tephra.TopologyV1alpha2().NodeResourceTopologies().Delete(context.Background(), name+"-0", metav1.DeleteOptions{})
		})
	}
	for i := range 20 {
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, guaranteedPod(ns, fmt.Sprintf("p%d", i), "burst", schedulingv1alpha1.SchedulerName, 2, 0), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	perNode := map[string]int{}
	require.Eventually(t, func() bool {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		clear(perNode)
		bound := 0
		for _, pod := range pods.Items {
			if pod.Spec.NodeName != "" {
				perNode[pod.Spec.NodeName]++
				bound++
			}
		}
		return bound == 20
	}, 2*time.Minute, 250*time.Millisecond, "all 20 pods bound; per node %v", perNode)
	for node, n := range perNode {
		assert.LessOrEqual(t, n, 2, "node %s: one 2-CPU pod per 3-CPU zone", node)
	}
}

// A node whose Topology Manager runs best-effort admits whatever fits the node, aligned or not.
func TestBestEffortNodesAcceptAnything(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	numaNode(t, env, "best-effort", "best-effort", "best-effort", zone{cpu: 1}, zone{cpu: 1})
	assert.Equal(t, "best-effort", runOn(t, env, guaranteedPod(ns, "wide", "best-effort", schedulingv1alpha1.SchedulerName, 4, 0)))
}

// Between two nodes where the pod fits in one zone, the score prefers the one it leaves least
// fragmented: it fills the zone that is already partly used and keeps whole zones free.
func TestScorePrefersLeastFragmentation(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	numaNode(t, env, "keeps-whole", "score", "single-numa-node", zone{cpu: 2}, zone{cpu: 4})
	numaNode(t, env, "splits", "score", "single-numa-node", zone{cpu: 3}, zone{cpu: 3})
	assert.Equal(t, "keeps-whole", runOn(t, env, guaranteedPod(ns, "two-cpus", "score", schedulingv1alpha1.SchedulerName, 2, 0)))
}
