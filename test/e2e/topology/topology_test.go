// Package topology checks topology-aware gang placement against a real control plane: 16 nodes of
// 4 CPUs in 4 racks of 4, in 2 blocks, with the default Topology block > rack > hostname.
package topology

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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const (
	blockLabel = "example.com/block"
	rackLabel  = "example.com/rack"
	pool       = "topology"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		// Volcano's PodGroup CRD, and upstream's PodGroups with their topology constraint.
		Manifests:     localcluster.KustomizeManifests(filepath.Join("manifests", "overlays", "foreign-schedulers")),
		FeatureGates:  "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		RuntimeConfig: "scheduling.k8s.io/v1beta1=true",
		// As installed: tephra-scheduler without the gates (docs/gang.md).
		TephraSchedulerWithoutFeatureGates: true,
	}, func(env *framework.Env) error {
		ctx := context.Background()
		if err := localcluster.WaitDefaultQueues(ctx, env.Cluster.Config); err != nil {
			return err
		}
		for rack := range 4 {
			_, err := env.Cluster.CreateNodes(ctx, fmt.Sprintf("r%d", rack), 4, localcluster.NodeShape{
				CPU: "4", Memory: "16Gi", Labels: map[string]string{
					framework.PoolLabel: pool, rackLabel: fmt.Sprintf("r%d", rack), blockLabel: fmt.Sprintf("b%d", rack/2),
				},
			})
			if err != nil {
				return err
			}
		}
		_, err := env.Tephra.SchedulingV1alpha1().Topologies().Create(ctx, &schedulingv1alpha1.Topology{
			ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultTopology},
			Spec: schedulingv1alpha1.TopologySpec{Levels: []schedulingv1alpha1.TopologyLevel{
				{NodeLabel: blockLabel}, {NodeLabel: rackLabel}, {NodeLabel: corev1.LabelHostname},
			}},
		}, metav1.CreateOptions{})
		return err
	}))
}

// poolEmpty waits until no pod of an earlier test is left on the nodes (their namespaces are
// deleted at the end of each test, their pods a moment later): the placements checked here depend
// on what is free.
func poolEmpty(t *testing.T, env *framework.Env) {
	t.Helper()
	framework.Eventually(t, time.Minute, "no pod left on the racks", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, p := range pods.Items {
			if p.Spec.NodeSelector[framework.PoolLabel] == pool {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods left", left)
	})
}

// gang creates a PodGroup of size pods of one CPU each with the topology, and its pods.
func gang(t *testing.T, env *framework.Env, ns, name string, size int, topo schedulingv1alpha1.PodGroupTopology) {
	t.Helper()
	ctx := context.Background()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: int32(size), Topology: &topo},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range size {
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns, Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: name}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{framework.PoolLabel: pool},
				Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// domainsOf waits until the group's pods are all bound and returns the values of a node label
// over the nodes they are on.
func domainsOf(t *testing.T, env *framework.Env, ns, group string, size int, label string) []string {
	t.Helper()
	ctx := context.Background()
	var nodes []string
	framework.Eventually(t, time.Minute, fmt.Sprintf("the %d pods of %s bound", size, group), func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedulingv1alpha1.PodGroupLabel + "=" + group})
		if err != nil {
			return false, err.Error()
		}
		nodes = nil
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return len(nodes) == size, fmt.Sprintf("%d bound", len(nodes))
	})
	seen := map[string]bool{}
	var values []string
	for _, name := range nodes {
		node, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		if v := node.Labels[label]; !seen[v] {
			seen[v] = true
			values = append(values, v)
		}
	}
	return values
}

// Gangs with `required: rack` each land in one rack, and a small one fills the rack a bigger one
// left partly free rather than opening an empty rack; a gang bigger than any rack waits and says
// why, per level, while the same gang with `required: block, preferred: rack` runs inside one
// block.
func TestGangsLandInOneDomainAndKeepBigDomainsWhole(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	inRack := schedulingv1alpha1.PodGroupTopology{Required: rackLabel}

	gang(t, env, ns, "ten", 10, inRack)
	tenRack := domainsOf(t, env, ns, "ten", 10, rackLabel)
	require.Len(t, tenRack, 1, "the gang of 10 is in one rack")

	gang(t, env, ns, "twelve", 12, inRack)
	twelveRack := domainsOf(t, env, ns, "twelve", 12, rackLabel)
	require.Len(t, twelveRack, 1, "the gang of 12 is in one rack")
	assert.NotEqual(t, tenRack, twelveRack, "it took another rack: the first has 6 CPUs left")

	gang(t, env, ns, "six", 6, inRack)
	assert.Equal(t, tenRack, domainsOf(t, env, ns, "six", 6, rackLabel), "the gang of 6 fills the first rack's remaining 6 CPUs rather than opening an empty rack")

	gang(t, env, ns, "twenty", 20, inRack)
	framework.Eventually(t, time.Minute, "the gang of 20 says why it waits", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "twenty", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		if cond == nil {
			return false, "no condition"
		}
		return cond.Reason == schedulingv1alpha1.ReasonNotEnoughResources &&
			strings.Contains(cond.Message, "no example.com/rack domain holds it (the most free: cpu 16 in example.com/rack="), cond.Reason + ": " + cond.Message
	})
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: schedulingv1alpha1.PodGroupLabel + "=twenty"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Empty(t, p.Spec.NodeName, "no pod of the gang of 20 is placed")
	}

	gang(t, env, ns, "block", 20, schedulingv1alpha1.PodGroupTopology{Required: blockLabel, Preferred: rackLabel})
	blocks := domainsOf(t, env, ns, "block", 20, blockLabel)
	assert.Len(t, blocks, 1, "20 with required block, preferred rack runs inside one block: %v", blocks)
}

// A key that is not a level of the Topology, or a preferred key wider than the required one, is
// refused: the group is not placed, and its condition says why.
func TestInvalidTopologyIsRefused(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	gang(t, env, ns, "row", 1, schedulingv1alpha1.PodGroupTopology{Required: "example.com/row"})
	gang(t, env, ns, "inverted", 1, schedulingv1alpha1.PodGroupTopology{Required: rackLabel, Preferred: blockLabel})
	// A sub-group's level is checked as the group's.
	ctx := context.Background()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "sub-row", Namespace: ns},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1, SubGroups: []schedulingv1alpha1.SubGroup{
			{Name: "replica", MinMember: 1, Topology: &schedulingv1alpha1.PodGroupTopology{Required: "example.com/row"}},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sub-row-0", Namespace: ns, Labels: map[string]string{
			schedulingv1alpha1.PodGroupLabel: "sub-row", schedulingv1alpha1.SubGroupLabel: "replica"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector: map[string]string{framework.PoolLabel: pool},
			Containers:   []corev1.Container{{Name: "work", Image: "busybox"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for group, want := range map[string]string{
		"row":      `topology: required "example.com/row" is not a level of Topology "default"`,
		"inverted": `topology: preferred "example.com/block" is wider than required "example.com/rack" in Topology "default"`,
		"sub-row":  `sub-group replica: topology: required "example.com/row" is not a level of Topology "default"`,
	} {
		framework.Eventually(t, time.Minute, group+" refused", func() (bool, string) {
			pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), group, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
			if cond == nil {
				return false, "no condition"
			}
			return cond.Reason == schedulingv1alpha1.ReasonInvalidPodGroup && strings.Contains(cond.Message, want), cond.Reason + ": " + cond.Message
		})
	}
	framework.Eventually(t, time.Minute, "the sub-group's pod told why", func() (bool, string) {
		events := env.Events(ns, "sub-row-0")
		return strings.Contains(events, `sub-group replica: topology: required "example.com/row" is not a level`), events
	})
}
