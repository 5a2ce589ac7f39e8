package topology

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Consolidation for a Job with sub-groups (docs/consolidation.md): each of the 16 nodes runs one
// movable pod of one CPU, of a ReplicaSet of its own, so that every node has 3 CPUs free and no
// rack holds a replica of 4 pods of 4 CPUs, though the 48 CPUs free hold two of them. The pods
// were placed with one node open at a time (the others tainted), as a cluster fills up; they carry
// no constraint that keeps them where they are.

// fillingTaint keeps the pods being placed off every node but the one being filled.
const fillingTaint = "e2e.tephra.dev/filling"

// setFillingTaint puts the filling taint on a node, or takes it off.
func setFillingTaint(t *testing.T, env *framework.Env, node string, on bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := env.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == fillingTaint })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: fillingTaint, Effect: corev1.TaintEffectNoSchedule})
		}
		_, err = env.Kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// poolNodes lists the racks' nodes, by name.
func poolNodes(t *testing.T, env *framework.Env) []corev1.Node {
	t.Helper()
	list, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: framework.PoolLabel + "=" + pool})
	require.NoError(t, err)
	slices.SortFunc(list.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// movablePods lists the live pods of the filling ReplicaSets.
func movablePods(t *testing.T, env *framework.Env, ns string) map[types.UID]corev1.Pod {
	t.Helper()
	list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e.tephra.dev/filler=true"})
	require.NoError(t, err)
	out := map[types.UID]corev1.Pod{}
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			out[pod.UID] = pod
		}
	}
	return out
}

// fillMovable places one movable one-CPU pod of a ReplicaSet on each node of the racks, one node
// open at a time, and returns where each went, by UID.
func fillMovable(t *testing.T, env *framework.Env, ns string) map[types.UID]string {
	t.Helper()
	nodes := poolNodes(t, env)
	t.Cleanup(func() {
		for _, node := range nodes {
			setFillingTaint(t, env, node.Name, false)
		}
	})
	for _, node := range nodes {
		setFillingTaint(t, env, node.Name, true)
	}
	for i, node := range nodes {
		name := fmt.Sprintf("fill-%d", i)
		setFillingTaint(t, env, node.Name, false)
		_, err := env.Kube.AppsV1().ReplicaSets(ns).Create(context.Background(), &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "e2e.tephra.dev/filler": "true"},
						Annotations: map[string]string{schedulingv1alpha1.MovableAnnotation: "true"}},
					Spec: corev1.PodSpec{
						SchedulerName: schedulingv1alpha1.SchedulerName, NodeSelector: map[string]string{framework.PoolLabel: pool},
						Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
						}}},
					},
				}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s's pod bound on %s", name, node.Name), func() (bool, string) {
			list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				return false, err.Error()
			}
			on, live := 0, 0
			for _, pod := range list.Items {
				if pod.DeletionTimestamp != nil {
					continue
				}
				live++
				switch pod.Spec.NodeName {
				case node.Name:
					on++
				case "":
				default:
					// Placed before the scheduler saw the taints change: its ReplicaSet makes another.
					_ = env.Kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
			}
			return on == 1 && live == 1, fmt.Sprintf("%d of %d on %s", on, live, node.Name)
		})
		setFillingTaint(t, env, node.Name, true)
	}
	for _, node := range nodes {
		setFillingTaint(t, env, node.Name, false)
	}
	placed := map[types.UID]string{}
	for uid, pod := range movablePods(t, env, ns) {
		placed[uid] = pod.Spec.NodeName
	}
	require.Len(t, placed, len(nodes))
	return placed
}

// A Job of 2 replicas of 4 pods of 4 CPUs, each replica required in one rack and the job in one
// block, on racks whose every node runs a movable one-CPU pod: the pods of two racks of a block
// are moved (a MovedForGang event each), their replacements run in the other block, and each
// replica then binds whole in a rack of its own.
func TestAJobsReplicasStartAfterMovablePodsAreMovedOutOfTheirRacks(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	placed := fillMovable(t, env, ns)
	rackOf, blockOf := map[string]string{}, map[string]string{}
	for _, node := range poolNodes(t, env) {
		rackOf[node.Name], blockOf[node.Name] = node.Labels[rackLabel], node.Labels[blockLabel]
	}

	job := replicasJob(ns, "replicas")
	task := &job.Spec.Tasks[0]
	task.Replicas, task.Policies = 8, nil
	task.SubGroups = &batchv1alpha1.TaskSubGroups{Size: 4, Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}}
	task.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	// Within a minute: before the reservation of the racks made whole ends.
	var racks map[string]map[string]bool
	framework.Eventually(t, time.Minute, "both replicas bound whole", func() (bool, string) {
		var bound map[string]int
		bound, racks, err = boundBySubGroup(ctx, env, ns, "replicas")
		if err != nil {
			return false, err.Error()
		}
		return len(bound) == 2 && bound["replica-0"] == 4 && bound["replica-1"] == 4, fmt.Sprintf("bound %v", bound)
	})
	require.Len(t, racks["replica-0"], 1, "replica-0 is whole in one rack: %v", racks["replica-0"])
	require.Len(t, racks["replica-1"], 1, "replica-1 is whole in one rack: %v", racks["replica-1"])
	assert.NotEqual(t, racks["replica-0"], racks["replica-1"], "a rack holds one replica")
	taken := map[string]bool{}
	for _, in := range racks {
		for rack := range in {
			taken[rack] = true
		}
	}

	framework.Eventually(t, 2*time.Minute, "the moved pods' replacements bound", func() (bool, string) {
		fillers := movablePods(t, env, ns)
		bound := 0
		for _, pod := range fillers {
			if pod.Spec.NodeName != "" {
				bound++
			}
		}
		return len(fillers) == 16 && bound == 16, fmt.Sprintf("%d of %d bound", bound, len(fillers))
	})
	fillers := movablePods(t, env, ns)
	moved := 0
	for uid, node := range placed {
		if pod, stayed := fillers[uid]; stayed {
			assert.False(t, taken[rackOf[node]], "pod %s stayed on %s, in a rack a replica took", pod.Name, node)
			continue
		}
		moved++
		assert.True(t, taken[rackOf[node]], "pod %s was moved off %s, in a rack no replica took", uid, node)
	}
	assert.Equal(t, 8, moved, "the pods of the two racks the replicas took were moved")
	for _, pod := range fillers {
		assert.False(t, taken[rackOf[pod.Spec.NodeName]], "pod %s runs in rack %s, a replica's", pod.Name, rackOf[pod.Spec.NodeName])
	}

	consolidating := fmt.Sprintf("Consolidating: the sub-groups of pod group %s/replicas fit in the cluster's free capacity but on no set of domains; moving 8 pods", ns)
	_, moves := framework.WaitForMoves(t, env, ns, "replicas", consolidating, func(uid types.UID) bool { _, ok := placed[uid]; return ok }, 8)
	assert.Len(t, moves, 8, "each moved pod has an event")
	for _, e := range moves {
		assert.Contains(t, e.Message, fmt.Sprintf("evicted to make room for pod group %s/replicas", ns))
	}
	framework.Eventually(t, time.Minute, "the job running", func() (bool, string) {
		j, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, "replicas", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return j.Status.State.Phase == batchv1alpha1.JobRunning, string(j.Status.State.Phase)
	})
	var blocks []string
	for rack := range taken {
		for node, r := range rackOf {
			if r == rack {
				blocks = append(blocks, blockOf[node])
			}
		}
	}
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(blocks))), 1, "both replicas in one block")
}
