package dra

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A topology gang whose members each claim a device goes to the one rack whose devices hold its
// minimum: rack a is the better fit by CPU (the least left free) but has 2 devices for 4 members,
// rack b has 4. Chosen by CPU alone, the gang would be sent to rack a again and again.
func TestTopologyGangGoesWhereTheDevicesAre(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const (
		class = "gpu-topo.e2e.tephra.dev"
		rack  = "e2e.tephra.dev/dra-rack"
	)
	pool := map[string]string{framework.PoolLabel: "dra-topo"}
	var nodes []string
	for _, r := range []struct {
		name string
		cpu  string
		gpus int
	}{{"a", "4", 1}, {"b", "16", 2}} {
		labels := map[string]string{framework.PoolLabel: "dra-topo", rack: r.name}
		names, err := env.Cluster.CreateNodes(context.Background(), "dra-topo-"+r.name, 2, localcluster.NodeShape{
			CPU: r.cpu, Memory: "64Gi", Pods: 110, Labels: labels, Devices: &localcluster.DeviceShape{GPUs: r.gpus, Group: "dra-topo"},
		})
		nodes = append(nodes, names...)
		require.NoError(t, err)
	}
	t.Cleanup(func() { deleteNodes(env, nodes) })
	createClass(t, env, class, "dra-topo", false, nil)
	framework.CreateQueue(t, env, "dra-topo", nil)
	createTemplate(t, env, ns, "one-gpu", deviceRequest(class, 1, nil))
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "ring", Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 4, Queue: "dra-topo", Topology: &schedulingv1alpha1.PodGroupTopology{Required: rack}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	submit(t, env, ns, 4, "rank", devicePod{queue: "dra-topo", group: "ring", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}})

	framework.WaitBound(t, env, ns, map[string]int{"dra-topo": 4}, time.Minute, func() string { return podStates(env, ns) })
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	racks := map[string]int{}
	for _, pod := range pods.Items {
		node, err := env.Kube.CoreV1().Nodes().Get(context.Background(), pod.Spec.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		racks[node.Labels[rack]]++
	}
	assert.Equal(t, map[string]int{"b": 4}, racks, "the whole gang is in the rack whose devices hold it")
	assert.Equal(t, 4, allocatedClaims(t, env, ns))
}
