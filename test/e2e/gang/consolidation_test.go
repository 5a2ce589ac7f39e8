package gang

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Consolidation for a waiting gang (docs/consolidation.md). Four nodes of 8 GPUs (a resource of
// the test's own) each run four one-GPU pods of a ReplicaSet: 16 GPUs are free, and no node is
// whole. A gang of two members of 8 GPUs fits in total but on no set of nodes. The pods were
// placed while the nodes came into service one by one (each tainted but the one being filled, as
// a cluster grows), which is how a cluster ends up fragmented; the pods themselves carry no
// constraint that keeps them where they are.

// fillingTaint keeps the pods being placed off every node but the one being filled.
const fillingTaint = "e2e.tephra.dev/filling"

// fragmentedPool is one test's four nodes, node i running the four pods of ReplicaSet rs-i.
type fragmentedPool struct {
	env   *framework.Env
	ns    string
	gpu   corev1.ResourceName
	pool  map[string]string
	nodes []string
	// placed are the ReplicaSets' pods as the fill left them: node by pod UID.
	placed map[types.UID]string
	// movableUIDs are those of ReplicaSets that declared their pods movable.
	movableUIDs map[types.UID]bool
}

// newFragmentedPool fills four nodes with four one-GPU pods each, those of node i declaring
// themselves movable when movable[i].
func newFragmentedPool(t *testing.T, name string, movable [4]bool) *fragmentedPool {
	t.Helper()
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	p := &fragmentedPool{env: env, ns: env.Namespace(t), gpu: corev1.ResourceName("e2e.tephra.dev/gpu-" + name),
		pool: map[string]string{poolLabel: name}, placed: map[types.UID]string{}, movableUIDs: map[types.UID]bool{}}
	nodes, err := env.Cluster.CreateNodes(ctx, name, 4, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: p.pool, Extended: map[corev1.ResourceName]int64{p.gpu: 8},
		Taints: []corev1.Taint{{Key: fillingTaint, Effect: corev1.TaintEffectNoSchedule}},
	})
	t.Cleanup(func() {
		for _, node := range nodes {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	require.NoError(t, err)
	p.nodes = nodes
	for i, node := range nodes {
		p.fillNode(t, node, fmt.Sprintf("rs-%d", i), 4, movable[i])
	}
	for _, node := range nodes {
		p.taint(t, node, false)
	}
	for i := range nodes {
		for _, pod := range p.pods(t, fmt.Sprintf("rs-%d", i)) {
			p.placed[pod.UID] = pod.Spec.NodeName
			if movable[i] {
				p.movableUIDs[pod.UID] = true
			}
		}
	}
	return p
}

// taint puts the filling taint on a node, or takes it off.
func (p *fragmentedPool) taint(t *testing.T, node string, on bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := p.env.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == fillingTaint })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: fillingTaint, Effect: corev1.TaintEffectNoSchedule})
		}
		_, err = p.env.Kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// replicaSetOf creates a ReplicaSet of one-GPU pods, declared movable or not.
func (p *fragmentedPool) replicaSetOf(t *testing.T, name string, replicas int32, movable bool) {
	t.Helper()
	one := *resource.NewQuantity(1, resource.DecimalSI)
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "e2e.tephra.dev/filler": "true"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, NodeSelector: p.pool,
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{p.gpu: one, corev1.ResourceCPU: resource.MustParse("100m")}, Limits: corev1.ResourceList{p.gpu: one},
			}}},
		},
	}
	if movable {
		template.Annotations = map[string]string{schedulingv1alpha1.MovableAnnotation: "true"}
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: template},
	}
	_, err := p.env.Kube.AppsV1().ReplicaSets(p.ns).Create(context.Background(), rs, metav1.CreateOptions{})
	require.NoError(t, err)
}

// fillNode runs a ReplicaSet of replicas pods on node alone: the other nodes of the pool are
// tainted, and the node is tainted again once they are bound there.
func (p *fragmentedPool) fillNode(t *testing.T, node, rs string, replicas int32, movable bool) {
	t.Helper()
	p.taint(t, node, false)
	p.replicaSetOf(t, rs, replicas, movable)
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s's %d pods bound on %s", rs, replicas, node), func() (bool, string) {
		pods := p.pods(t, rs)
		on := 0
		for _, pod := range pods {
			switch pod.Spec.NodeName {
			case node:
				on++
			case "":
			default:
				// Placed before the scheduler saw the taints change (its node and pod informers
				// are not ordered with each other): its ReplicaSet makes another.
				_ = p.env.Kube.CoreV1().Pods(p.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
			}
		}
		return on == int(replicas) && len(pods) == int(replicas), fmt.Sprintf("%d of %d on %s", on, len(pods), node)
	})
	p.taint(t, node, true)
}

// pods lists the live pods of a ReplicaSet.
func (p *fragmentedPool) pods(t *testing.T, rs string) []corev1.Pod {
	t.Helper()
	list, err := p.env.Kube.CoreV1().Pods(p.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + rs})
	require.NoError(t, err)
	return slices.DeleteFunc(list.Items, func(pod corev1.Pod) bool { return pod.DeletionTimestamp != nil })
}

// gang submits group "wide": two members of 8 GPUs, its whole minimum.
func (p *fragmentedPool) gang(t *testing.T) {
	t.Helper()
	createPodGroup(t, p.env, p.ns, "wide", 2, nil)
	eight := *resource.NewQuantity(8, resource.DecimalSI)
	for i := range 2 {
		createPod(t, p.env, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wide-%d", i), Namespace: p.ns, Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "wide"}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: p.pool,
				Containers: []corev1.Container{{Name: "train", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{p.gpu: eight}, Limits: corev1.ResourceList{p.gpu: eight},
				}}},
			},
		})
	}
}

// waitFillersBound waits until the pool's ReplicaSets have n pods, every one bound (the moved
// pods replaced), and returns them.
func (p *fragmentedPool) waitFillersBound(t *testing.T, n int) map[types.UID]corev1.Pod {
	t.Helper()
	var fillers map[types.UID]corev1.Pod
	framework.Eventually(t, 2*time.Minute, "the moved pods' replacements bound", func() (bool, string) {
		fillers = p.fillers(t)
		bound := 0
		for _, pod := range fillers {
			if pod.Spec.NodeName != "" {
				bound++
			}
		}
		return len(fillers) == n && bound == n, fmt.Sprintf("%d of %d bound", bound, len(fillers))
	})
	return fillers
}

// fillers are the ReplicaSets' live pods, by UID.
func (p *fragmentedPool) fillers(t *testing.T) map[types.UID]corev1.Pod {
	t.Helper()
	list, err := p.env.Kube.CoreV1().Pods(p.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e.tephra.dev/filler=true"})
	require.NoError(t, err)
	out := map[types.UID]corev1.Pod{}
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			out[pod.UID] = pod
		}
	}
	return out
}

var movesMetric = regexp.MustCompile(`(?m)^tephra_consolidation_moves_total\{movable="declared"\} (\d+)`)

// declaredMoves reads tephra_consolidation_moves_total{movable="declared"} from the scheduler.
func declaredMoves(t *testing.T, env *framework.Env) int {
	t.Helper()
	metrics, err := env.Cluster.SchedulerMetrics(context.Background())
	require.NoError(t, err)
	m := movesMetric.FindStringSubmatch(metrics)
	require.NotNil(t, m, "the scheduler serves tephra_consolidation_moves_total")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// A gang that fits in total but on no node set starts after movable pods are moved: the pods of
// rs-2 and rs-3 declared themselves movable, and are evicted and created again on the free room
// of nodes 0 and 1, which makes nodes 2 and 3 whole for the gang. The pods of rs-0 and rs-1 did
// not declare themselves movable, and keep their UIDs and nodes. Events on the PodGroup and on the
// moved pods say why, and the metric counts the 8 moves.
func TestGangStartsAfterMovablePodsAreMoved(t *testing.T) {
	p := newFragmentedPool(t, "consolidate", [4]bool{false, false, true, true})
	before := declaredMoves(t, p.env)
	p.gang(t)

	// Within a minute: before the reservation of the nodes made whole ends (the moved pods' grace
	// period and a minute), after which the gang would start whatever woke it or not.
	gangNodes := map[string]bool{}
	for i := range 2 {
		pod := p.env.WaitPod(t, p.ns, fmt.Sprintf("wide-%d", i), time.Minute, "bound", func(pod *corev1.Pod) bool { return pod.Spec.NodeName != "" })
		gangNodes[pod.Spec.NodeName] = true
	}
	assert.Equal(t, map[string]bool{p.nodes[2]: true, p.nodes[3]: true}, gangNodes, "the gang runs on the nodes made whole, one member each")

	fillers := p.waitFillersBound(t, 16)
	for uid, node := range p.placed {
		pod, stayed := fillers[uid]
		if p.movableUIDs[uid] {
			assert.False(t, stayed, "movable pod %s was moved", uid)
			continue
		}
		if assert.True(t, stayed, "pod %s, not movable, was never moved", uid) {
			assert.Equal(t, node, pod.Spec.NodeName, "pod %s stays on its node", pod.Name)
		}
	}
	for _, pod := range fillers {
		assert.False(t, gangNodes[pod.Spec.NodeName], "pod %s runs on %s, off the gang's nodes", pod.Name, pod.Spec.NodeName)
	}

	consolidating := fmt.Sprintf("Consolidating: the minimum of pod group %s/wide fits in the cluster's free capacity but on no set of nodes; moving 8 pods", p.ns)
	events, moves := framework.WaitForMoves(t, p.env, p.ns, "wide", consolidating, func(uid types.UID) bool { return p.movableUIDs[uid] }, 8)
	assert.Contains(t, events, consolidating)
	for _, e := range moves {
		assert.Contains(t, e.Message, fmt.Sprintf("evicted to make room for pod group %s/wide, which fits in the cluster's free capacity but on no set of nodes; the pod declared itself movable", p.ns))
	}
	assert.Equal(t, 8, len(moves), "each moved pod has an event saying why")
	assert.Equal(t, before+8, declaredMoves(t, p.env), "tephra_consolidation_moves_total counts the moves")
}

// A pod that did not declare itself movable is never moved: with none of the four ReplicaSets
// movable, the same gang waits, and every pod keeps its UID and node.
func TestNothingMovesForAGangWhenNoPodMayMove(t *testing.T) {
	p := newFragmentedPool(t, "unmovable", [4]bool{})
	before := declaredMoves(t, p.env)
	p.gang(t)
	framework.Eventually(t, time.Minute, "the gang found unfit (its pilot's status)", func() (bool, string) {
		for i := range 2 {
			pod, err := p.env.Kube.CoreV1().Pods(p.ns).Get(context.Background(), fmt.Sprintf("wide-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, schedulingv1alpha1.ReasonNotEnoughResources) {
					return true, ""
				}
			}
		}
		return false, "no member says NotEnoughResources"
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		for i := range 2 {
			pod, err := p.env.Kube.CoreV1().Pods(p.ns).Get(context.Background(), fmt.Sprintf("wide-%d", i), metav1.GetOptions{})
			require.NoError(t, err)
			require.Empty(t, pod.Spec.NodeName, "the gang has no two whole nodes")
		}
		fillers := p.fillers(t)
		require.Len(t, fillers, 16)
		for uid, node := range p.placed {
			pod, ok := fillers[uid]
			require.True(t, ok, "pod %s was never moved", uid)
			require.Equal(t, node, pod.Spec.NodeName)
		}
	}
	assert.NotContains(t, p.env.Events(p.ns, "wide"), "Consolidating")
	assert.Equal(t, before, declaredMoves(t, p.env))
}
