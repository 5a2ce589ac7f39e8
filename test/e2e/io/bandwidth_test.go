package io

import (
	"context"
	"fmt"
	"strings"
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

// network is the bandwidth the tests' nodes publish and their pods request.
const network corev1.ResourceName = "io.tephra.dev/network"

// rackLabel names the racks of the uplink test's nodes.
const rackLabel = "example.com/io-rack"

// ioPod is a tephra-scheduler pod of one CPU that requests net of the network's bandwidth.
func ioPod(ns, name string, pool map[string]string, net int64) *corev1.Pod {
	pod := dataPod(ns, name, pool, 1, nil)
	pod.Spec.Containers[0].Resources.Requests[network] = *resource.NewQuantity(net, resource.DecimalSI)
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{network: *resource.NewQuantity(net, resource.DecimalSI)}
	return pod
}

// ioNodes creates count nodes of 8 CPUs, each publishing net of network bandwidth, with labels.
func ioNodes(t *testing.T, env *framework.Env, prefix string, count int, net int64, labels map[string]string) []string {
	t.Helper()
	names, err := env.Cluster.CreateNodes(context.Background(), prefix, count, localcluster.NodeShape{
		CPU: "8", Memory: "32Gi", Pods: 110, Extended: map[corev1.ResourceName]int64{network: net}, Labels: labels,
	})
	t.Cleanup(func() {
		for _, n := range names {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	require.NoError(t, err)
	return names
}

// Two IO-heavy pods that together ask more than a node's bandwidth (6 and 6 of 10) go to
// different nodes, though one node has the CPUs for both.
func TestIOHeavyPodsThatWouldCollideGoToDifferentNodes(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := map[string]string{framework.PoolLabel: "io-collide"}
	ioNodes(t, env, "io-collide", 2, 10, pool)
	create(t, env, ioPod(ns, "loader-0", pool, 6))
	create(t, env, ioPod(ns, "loader-1", pool, 6))
	assert.NotEqual(t, boundTo(t, env, ns, "loader-0"), boundTo(t, env, ns, "loader-1"))
}

// gangOf creates a PodGroup of size pods, each requesting net of bandwidth, required in one rack.
func gangOf(t *testing.T, env *framework.Env, ns, name string, pool map[string]string, size int, net int64) {
	t.Helper()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: int32(size), Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range size {
		pod := ioPod(ns, fmt.Sprintf("%s-%d", name, i), pool, net)
		pod.Labels = map[string]string{schedulingv1alpha1.PodGroupLabel: name}
		create(t, env, pod)
	}
}

// rackOf waits for a gang's pods to bind and returns the racks they are in.
func racksOf(t *testing.T, env *framework.Env, ns, name string, size int) []string {
	t.Helper()
	seen := map[string]bool{}
	var racks []string
	for i := range size {
		node, err := env.Kube.CoreV1().Nodes().Get(context.Background(), boundTo(t, env, ns, fmt.Sprintf("%s-%d", name, i)), metav1.GetOptions{})
		require.NoError(t, err)
		if r := node.Labels[rackLabel]; !seen[r] {
			seen[r] = true
			racks = append(racks, r)
		}
	}
	return racks
}

// A rack's uplink carries 20 of network bandwidth (the default Topology's rack level). Gangs of
// two pods asking 5 each, required in one rack: the first two fill one rack's uplink, where best
// fit puts them; the third, which best fit would put there too (its nodes have the CPUs and their
// own bandwidth), goes to the other rack. A Topology with a negative bandwidth is refused.
func TestARacksUplinkKeepsAThirdIOHeavyGangOut(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	pool := map[string]string{framework.PoolLabel: "io-racks"}
	for rack := range 2 {
		labels := map[string]string{framework.PoolLabel: "io-racks", rackLabel: fmt.Sprintf("io-r%d", rack)}
		ioNodes(t, env, fmt.Sprintf("io-r%d", rack), 2, 20, labels)
	}
	_, err := env.Tephra.SchedulingV1alpha1().Topologies().Create(ctx, &schedulingv1alpha1.Topology{
		ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultTopology},
		Spec: schedulingv1alpha1.TopologySpec{Levels: []schedulingv1alpha1.TopologyLevel{
			{NodeLabel: rackLabel, Bandwidth: corev1.ResourceList{network: resource.MustParse("20")}},
			{NodeLabel: corev1.LabelHostname},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.SchedulingV1alpha1().Topologies().Delete(context.Background(), schedulingv1alpha1.DefaultTopology, metav1.DeleteOptions{})
	})

	gangOf(t, env, ns, "first", pool, 2, 5)
	first := racksOf(t, env, ns, "first", 2)
	require.Len(t, first, 1)
	gangOf(t, env, ns, "second", pool, 2, 5)
	assert.Equal(t, first, racksOf(t, env, ns, "second", 2), "best fit: the rack the first gang uses, whose uplink carries both")
	gangOf(t, env, ns, "third", pool, 2, 5)
	third := racksOf(t, env, ns, "third", 2)
	require.Len(t, third, 1)
	assert.NotEqual(t, first, third, "the first rack's uplink carries 20, and the two gangs there ask 20")

	_, err = env.Tephra.SchedulingV1alpha1().Topologies().Create(ctx, &schedulingv1alpha1.Topology{
		ObjectMeta: metav1.ObjectMeta{Name: "negative"},
		Spec: schedulingv1alpha1.TopologySpec{Levels: []schedulingv1alpha1.TopologyLevel{
			{NodeLabel: rackLabel, Bandwidth: corev1.ResourceList{network: resource.MustParse("-5")}},
		}},
	}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a bandwidth must not be negative")
}

// A pod that requests a bandwidth no node publishes waits with an event that says so, and
// nothing else: a pod beside it binds.
func TestABandwidthNoNodePublishesIsSaid(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := map[string]string{framework.PoolLabel: "io-unpublished"}
	ioNodes(t, env, "io-unpublished", 1, 10, pool)
	disk := dataPod(ns, "disk", pool, 1, nil)
	disk.Spec.Containers[0].Resources.Requests["io.tephra.dev/disk"] = resource.MustParse("2")
	disk.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"io.tephra.dev/disk": resource.MustParse("2")}
	create(t, env, disk)
	create(t, env, ioPod(ns, "beside", pool, 2))
	boundTo(t, env, ns, "beside")
	framework.Eventually(t, 30*time.Second, "a Warning BandwidthNotPublished event on the pod", func() (bool, string) {
		events := env.Events(ns, "disk")
		return strings.Contains(events, "Warning BandwidthNotPublished: the pod requests io.tephra.dev/disk, which no node publishes"), events
	})
}
