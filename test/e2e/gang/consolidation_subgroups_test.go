package gang

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Consolidation for a gang with sub-groups (docs/consolidation.md): three racks of two nodes of 4
// GPUs, each node running one movable one-GPU pod of a ReplicaSet of its own. Two replicas of 4
// members of 2 GPUs, each required in one rack, fit the 18 GPUs free in total, but no rack: each
// node has room for one member, a rack for 2 of a replica's 4.

// rackLabel is the racks' node label, the sub-groups' required topology level.
const rackLabel = "e2e.tephra.dev/rack"

// newFragmentedRacks fills three racks of two nodes, each node with one movable one-GPU pod, as
// newFragmentedPool fills its nodes: one node open at a time.
func newFragmentedRacks(t *testing.T, name string) (*fragmentedPool, map[string]string) {
	t.Helper()
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	p := &fragmentedPool{env: env, ns: env.Namespace(t), gpu: corev1.ResourceName("e2e.tephra.dev/gpu-" + name),
		pool: map[string]string{poolLabel: name}, placed: map[types.UID]string{}, movableUIDs: map[types.UID]bool{}}
	rackOf := map[string]string{}
	for r := range 3 {
		rack := fmt.Sprintf("r%d", r)
		nodes, err := env.Cluster.CreateNodes(ctx, name+"-"+rack, 2, localcluster.NodeShape{
			CPU: "16", Memory: "64Gi", Pods: 110, Labels: map[string]string{poolLabel: name, rackLabel: rack},
			Extended: map[corev1.ResourceName]int64{p.gpu: 4},
			Taints:   []corev1.Taint{{Key: fillingTaint, Effect: corev1.TaintEffectNoSchedule}},
		})
		t.Cleanup(func() {
			for _, node := range nodes {
				_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
			}
		})
		require.NoError(t, err)
		for _, node := range nodes {
			rackOf[node] = rack
		}
		p.nodes = append(p.nodes, nodes...)
	}
	for i, node := range p.nodes {
		rs := fmt.Sprintf("rs-%d", i)
		p.fillNode(t, node, rs, 1, true)
	}
	for _, node := range p.nodes {
		p.taint(t, node, false)
	}
	for _, pod := range p.fillers(t) {
		p.placed[pod.UID] = pod.Spec.NodeName
		p.movableUIDs[pod.UID] = true
	}
	return p, rackOf
}

// replicas submits group "replicas": sub-groups r0 and r1 of 4 members of 2 GPUs, each required
// in one rack, both needed.
func (p *fragmentedPool) replicas(t *testing.T) {
	t.Helper()
	createPodGroup(t, p.env, p.ns, "replicas", 8, func(pg *schedulingv1alpha1.PodGroup) {
		for _, sub := range []string{"r0", "r1"} {
			pg.Spec.SubGroups = append(pg.Spec.SubGroups, schedulingv1alpha1.SubGroup{
				Name: sub, MinMember: 4, Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel},
			})
		}
	})
	two := *resource.NewQuantity(2, resource.DecimalSI)
	for _, sub := range []string{"r0", "r1"} {
		for i := range 4 {
			createPod(t, p.env, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("replicas-%s-%d", sub, i), Namespace: p.ns, Labels: map[string]string{
					schedulingv1alpha1.PodGroupLabel: "replicas", schedulingv1alpha1.SubGroupLabel: sub,
				}},
				Spec: corev1.PodSpec{
					SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: p.pool,
					Containers: []corev1.Container{{Name: "train", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{p.gpu: two}, Limits: corev1.ResourceList{p.gpu: two},
					}}},
				},
			})
		}
	}
}

// A gang of two replicas that fit in total but in no rack starts after movable pods are moved:
// the pods of two racks are evicted (a MovedForGang event each) and created again in the third
// rack, and each replica then binds whole in a rack of its own. The group's Consolidating event
// names the racks.
func TestSubGroupsStartAfterMovablePodsAreMovedOutOfTheirRacks(t *testing.T) {
	p, rackOf := newFragmentedRacks(t, "consolidate-racks")
	before := declaredMoves(t, p.env)
	p.replicas(t)

	// Within a minute: before the reservation of the racks made whole ends.
	racks := map[string]map[string]bool{}
	gangNodes := map[string]bool{}
	for _, sub := range []string{"r0", "r1"} {
		racks[sub] = map[string]bool{}
		for i := range 4 {
			pod := p.env.WaitPod(t, p.ns, fmt.Sprintf("replicas-%s-%d", sub, i), time.Minute, "bound", func(pod *corev1.Pod) bool { return pod.Spec.NodeName != "" })
			racks[sub][rackOf[pod.Spec.NodeName]] = true
			gangNodes[pod.Spec.NodeName] = true
		}
	}
	require.Len(t, racks["r0"], 1, "replica r0 is whole in one rack: %v", racks["r0"])
	require.Len(t, racks["r1"], 1, "replica r1 is whole in one rack: %v", racks["r1"])
	assert.NotEqual(t, racks["r0"], racks["r1"], "a rack holds one replica")

	fillers := p.waitFillersBound(t, 6)
	moved := 0
	for uid, node := range p.placed {
		pod, stayed := fillers[uid]
		switch {
		case !stayed:
			moved++
			assert.True(t, gangNodes[node], "pod %s was moved off %s, which a replica did not take", uid, node)
		default:
			assert.Equal(t, node, pod.Spec.NodeName)
			assert.False(t, gangNodes[node], "pod %s stayed on %s, where a replica runs", pod.Name, node)
		}
	}
	assert.Equal(t, 4, moved, "the pods of the two racks the replicas took were moved")
	var fillerRacks []string
	for _, pod := range fillers {
		assert.False(t, gangNodes[pod.Spec.NodeName], "pod %s runs on %s, off the replicas' nodes", pod.Name, pod.Spec.NodeName)
		fillerRacks = append(fillerRacks, rackOf[pod.Spec.NodeName])
	}
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(fillerRacks))), 1, "the ReplicaSets' pods all run in the third rack: %v", fillerRacks)

	consolidating := fmt.Sprintf("Consolidating: the sub-groups of pod group %s/replicas fit in the cluster's free capacity but on no set of domains; moving 4 pods", p.ns)
	events, moves := framework.WaitForMoves(t, p.env, p.ns, "replicas", consolidating, func(uid types.UID) bool { return p.movableUIDs[uid] }, 4)
	assert.Contains(t, events, fmt.Sprintf("(sub-group r0 in %s=", rackLabel))
	for _, e := range moves {
		assert.Contains(t, e.Message, fmt.Sprintf("evicted to make room for pod group %s/replicas", p.ns))
	}
	assert.Len(t, moves, 4, "each moved pod has an event saying why")
	assert.Equal(t, before+4, declaredMoves(t, p.env), "tephra_consolidation_moves_total counts the moves")
}
