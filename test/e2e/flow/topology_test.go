package flow

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/job"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// boundPods waits until the job has count pods bound, and maps each to its node.
func boundPods(t *testing.T, env *framework.Env, ns, jobName string, count int) map[string]string {
	t.Helper()
	nodes := map[string]string{}
	framework.Eventually(t, time.Minute, fmt.Sprintf("%d pods of %s bound", count, jobName), func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + jobName})
		if err != nil {
			return false, err.Error()
		}
		nodes = map[string]string{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				nodes[p.Name] = p.Spec.NodeName
			}
		}
		return len(nodes) == count, fmt.Sprintf("%v; events: %s", nodes, env.Events(ns, jobName))
	})
	return nodes
}

// The ps/worker example on three nodes of 8 CPUs: the parameter server (1 CPU) and its workers
// (2 CPUs each) are placed together while they fit, 1 + 3 on the ps's node, and the fourth worker
// elsewhere; without taskTopology the same job is spread by the resource score.
func TestAffineTasksShareNodesWhileTheyFit(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := env.Pool(t, "affinity", 3, 8)
	example := decode[batchv1alpha1.Job](t, loadExample(t, "ps-worker.yaml")[0])
	require.Equal(t, []batchv1alpha1.TaskSet{{"ps", "worker"}}, example.Spec.TaskTopology.Affinity)
	for _, withTopology := range []bool{true, false} {
		j := example.DeepCopy()
		j.Name = map[bool]string{true: "together", false: "apart"}[withTopology]
		if !withTopology {
			j.Spec.TaskTopology = nil
		}
		j.Spec.Tasks[1].Replicas = 4
		for i := range j.Spec.Tasks {
			j.Spec.Tasks[i].Template.Spec.NodeSelector = pool
			delete(j.Spec.Tasks[i].Template.Annotations, simDuration) // run until deleted
		}
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
		require.NoError(t, err)
		nodes := boundPods(t, env, ns, j.Name, 5)
		psNode := nodes[j.Name+"-ps-0"]
		onPS := 0
		for pod, node := range nodes {
			if pod != j.Name+"-ps-0" && node == psNode {
				onPS++
			}
		}
		if withTopology {
			assert.Equal(t, 3, onPS, "every worker that fits is on the ps's node: %v", nodes)
		} else {
			assert.Less(t, onPS, 3, "without taskTopology the workers spread: %v", nodes)
		}
		require.NoError(t, env.Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), j.Name, metav1.DeleteOptions{}))
		framework.Eventually(t, time.Minute, "the job's pods gone", func() (bool, string) {
			pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
		})
	}
}

// Anti-affine workers, said by Volcano's annotation, spread one per node, where the resource
// score alone would pack them: three of the four nodes are half full, and the empty one stays
// the least allocated for the first three workers.
func TestAntiAffineTasksSpreadOnePerNode(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := env.Pool(t, "anti", 4, 8)
	nodes, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: framework.PoolLabel + "=anti"})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 4)
	names := []string{}
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	for _, node := range names[1:] {
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "filler-" + node},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, withTopology := range []bool{false, true} {
		spec := simSpec(4, "", 0)
		spec.Tasks[0].Name = "worker"
		delete(spec.Tasks[0].Template.Annotations, simDuration)
		spec.Tasks[0].Template.Spec.NodeSelector = pool
		spec.Tasks[0].Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		j := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: map[bool]string{true: "spread", false: "packed"}[withTopology]}, Spec: spec}
		if withTopology {
			j.Annotations = map[string]string{job.VolcanoTaskAntiAffinityAnnotation: "worker"}
		}
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
		require.NoError(t, err)
		placed := boundPods(t, env, ns, j.Name, 4)
		perNode := map[string]int{}
		for _, node := range placed {
			perNode[node]++
		}
		if withTopology {
			assert.Len(t, perNode, 4, "one worker per node: %v", placed)
		} else {
			assert.Greater(t, perNode[names[0]], 1, "without anti-affinity the empty node takes several workers: %v", placed)
		}
		require.NoError(t, env.Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), j.Name, metav1.DeleteOptions{}))
		framework.Eventually(t, time.Minute, "the job's pods gone", func() (bool, string) {
			pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + j.Name})
			return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
		})
	}
}

// Task topology never takes a gang out of its topology domain: four anti-affine workers whose
// Job requires one rack of two nodes spread over that rack's two nodes, two per node, rather
// than over the four nodes of both racks.
func TestTaskTopologyStaysInsideTheGangsDomain(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const rackLabel = "e2e.tephra.dev/rack"
	pool := map[string]string{framework.PoolLabel: "domain"}
	var nodes []string
	for rack := range 2 {
		names, err := env.Cluster.CreateNodes(context.Background(), fmt.Sprintf("domain-r%d", rack), 2, localcluster.NodeShape{
			CPU: "8", Memory: "32Gi", Pods: 110, Labels: map[string]string{framework.PoolLabel: "domain", rackLabel: fmt.Sprintf("r%d", rack)},
		})
		require.NoError(t, err)
		nodes = append(nodes, names...)
	}
	t.Cleanup(func() {
		for _, node := range nodes {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	_, err := env.Tephra.SchedulingV1alpha1().Topologies().Create(context.Background(), &schedulingv1alpha1.Topology{
		ObjectMeta: metav1.ObjectMeta{Name: "flow-racks"},
		Spec:       schedulingv1alpha1.TopologySpec{Levels: []schedulingv1alpha1.TopologyLevel{{NodeLabel: rackLabel}, {NodeLabel: corev1.LabelHostname}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.SchedulingV1alpha1().Topologies().Delete(context.Background(), "flow-racks", metav1.DeleteOptions{})
	})

	spec := simSpec(4, "", 0)
	spec.Tasks[0].Name = "worker"
	delete(spec.Tasks[0].Template.Annotations, simDuration)
	spec.Tasks[0].Template.Spec.NodeSelector = pool
	spec.Tasks[0].Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	spec.Topology = &schedulingv1alpha1.PodGroupTopology{Name: "flow-racks", Required: rackLabel}
	spec.TaskTopology = &batchv1alpha1.TaskTopology{AntiAffinity: []batchv1alpha1.TaskSet{{"worker"}}}
	_, err = env.Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "racked"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	placed := boundPods(t, env, ns, "racked", 4)
	perNode := map[string]int{}
	for _, node := range placed {
		perNode[node]++
	}
	racks := map[string]bool{}
	for node := range perNode {
		n, err := env.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		require.NoError(t, err)
		racks[n.Labels[rackLabel]] = true
	}
	assert.Len(t, racks, 1, "one rack: %v", placed)
	assert.Equal(t, []int{2, 2}, sortedCounts(perNode), "spread over the rack's two nodes: %v", placed)
}

func sortedCounts(m map[string]int) []int {
	var out []int
	for _, n := range m {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}
