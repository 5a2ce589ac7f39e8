// Package operators runs the workload controllers users already run, built from their modules,
// beside Tephra on one local control plane, and checks that their groups are placed as gangs:
// LeaderWorkerSet (its chart with gang scheduling on) and JobSet.
package operators

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const (
	blockLabel = "example.com/block"
	rackLabel  = "example.com/rack"
)

// dyn reads and writes the operators' objects, whose Go types Tephra does not import.
var dyn dynamic.Interface

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		// Volcano's PodGroup CRD, which LeaderWorkerSet's gang scheduling creates.
		Manifests: localcluster.KustomizeManifests(filepath.Join("manifests", "overlays", "foreign-schedulers")),
		LWS:       &localcluster.LWSOptions{},
		JobSet:    &localcluster.JobSetOptions{},
	}, func(env *framework.Env) error {
		ctx := context.Background()
		var err error
		if dyn, err = dynamic.NewForConfig(env.Cluster.Config); err != nil {
			return err
		}
		if err := localcluster.WaitDefaultQueues(ctx, env.Cluster.Config); err != nil {
			return err
		}
		_, err = env.Tephra.SchedulingV1alpha1().Topologies().Create(ctx, &schedulingv1alpha1.Topology{
			ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultTopology},
			Spec: schedulingv1alpha1.TopologySpec{Levels: []schedulingv1alpha1.TopologyLevel{
				{NodeLabel: blockLabel}, {NodeLabel: rackLabel}, {NodeLabel: corev1.LabelHostname},
			}},
		}, metav1.CreateOptions{})
		return err
	}))
}

// racks creates, for one test, a pool of one-CPU nodes in racks of the given sizes (rack i,
// "<pool>-r<i>", has sizes[i] nodes, all in one block), deleted when the test ends, and returns
// the pods' node selector.
func racks(t *testing.T, env *framework.Env, pool string, sizes ...int) map[string]string {
	t.Helper()
	for i, size := range sizes {
		addNodes(t, env, pool, i, fmt.Sprintf("%s-r%d", pool, i), size)
	}
	return map[string]string{framework.PoolLabel: pool}
}

// addToRack adds a one-CPU node to rack i of a pool of racks.
func addToRack(t *testing.T, env *framework.Env, pool string, i int) {
	t.Helper()
	addNodes(t, env, pool, i, fmt.Sprintf("%s-r%d-more", pool, i), 1)
}

// addNodes creates count one-CPU nodes named prefix-N in rack i of a pool, deleted when the test
// ends, and waits until they are ready.
func addNodes(t *testing.T, env *framework.Env, pool string, i int, prefix string, count int) {
	t.Helper()
	names, err := env.Cluster.CreateNodes(context.Background(), prefix, count, localcluster.NodeShape{
		CPU: "1", Memory: "8Gi", Pods: 110, Labels: map[string]string{
			framework.PoolLabel: pool, rackLabel: fmt.Sprintf("%s-r%d", pool, i), blockLabel: pool,
		},
	})
	t.Cleanup(func() {
		for _, node := range names {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	if err != nil {
		t.Fatalf("creating nodes %s of pool %s: %v", prefix, pool, err)
	}
	if err := env.Cluster.WaitNodesReady(context.Background(), names...); err != nil {
		t.Fatal(err)
	}
}

// rackOf is the rack of a pod's node ("" if unbound).
func rackOf(t *testing.T, env *framework.Env, pod corev1.Pod) string {
	t.Helper()
	if pod.Spec.NodeName == "" {
		return ""
	}
	node, err := env.Kube.CoreV1().Nodes().Get(context.Background(), pod.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	return node.Labels[rackLabel]
}

// waitWhole waits until each of the given groups (list lists the pods of each) has its size pods,
// all bound, and returns each group's racks.
func waitWhole(t *testing.T, env *framework.Env, what string, list func() map[string][]corev1.Pod, size int, groups ...string) map[string][]string {
	t.Helper()
	racks := map[string][]string{}
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s %v bound whole", what, groups), func() (bool, string) {
		pods := list()
		clear(racks)
		var state []string
		done := true
		for _, group := range groups {
			bound := 0
			for _, p := range pods[group] {
				if rack := rackOf(t, env, p); rack != "" {
					bound++
					if !slices.Contains(racks[group], rack) {
						racks[group] = append(racks[group], rack)
					}
				}
			}
			done = done && bound == size && len(pods[group]) == size
			state = append(state, fmt.Sprintf("%s: %d pods, %d bound", group, len(pods[group]), bound))
		}
		return done, strings.Join(state, "; ")
	})
	return racks
}
