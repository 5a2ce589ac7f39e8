package bandwidth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const network corev1.ResourceName = "io.tephra.dev/network"

func pod(name string, net int64) *corev1.Pod {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if net > 0 {
		requests[network] = *resource.NewQuantity(net, resource.DecimalSI)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}}}}}
}

func node(name, rack string, publishes int64, pods ...*corev1.Pod) fwk.NodeInfo {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": rack}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
	if publishes > 0 {
		n.Status.Allocatable[network] = *resource.NewQuantity(publishes, resource.DecimalSI)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	for _, p := range pods {
		p.Spec.NodeName = name
		ni.AddPod(p)
	}
	return ni
}

var rackUplink = &v1alpha1.Topology{Spec: v1alpha1.TopologySpec{Levels: []v1alpha1.TopologyLevel{
	{NodeLabel: "rack", Bandwidth: corev1.ResourceList{network: resource.MustParse("20")}},
	{NodeLabel: corev1.LabelHostname},
}}}

// The pods on a rack's nodes share its uplink: a request that would pass it is refused on every
// node of the rack, however free the node's own bandwidth; in a dry run, a pod taken away gives
// its share back.
func TestARacksUplinkIsSharedByItsNodes(t *testing.T) {
	limits := LimitsOf(rackUplink)
	assert.Equal(t, []Limit{{Level: "rack", Capacity: Amounts{network: 20}}}, limits, "only the levels that give a bandwidth")
	nodes := []fwk.NodeInfo{
		node("a0", "a", 10, pod("x", 8)), node("a1", "a", 10, pod("y", 8)),
		node("b0", "b", 10),
	}
	use := UseOf(limits, nodes)
	assert.Equal(t, Amounts{network: 16}, use["rack"]["a"])

	want := Requests(pod("z", 5))
	assert.Equal(t, Amounts{network: 5}, want)
	assert.Equal(t, "rack=a carries 20 io.tephra.dev/network, 16 in use", use.Exceeded(limits, nodes[0].Node().Labels, want))
	assert.Empty(t, use.Exceeded(limits, nodes[2].Node().Labels, want))
	assert.Empty(t, use.Exceeded(limits, map[string]string{}, want), "a node in no rack has no uplink to pass")

	use.Add(limits, nodes[0].Node().Labels, Requests(pod("x", 8)), -1)
	assert.Empty(t, use.Exceeded(limits, nodes[0].Node().Labels, want), "8 + 5 of 20")
	assert.InDelta(t, 7.0/20, use.FreeShare(limits, nodes[0].Node().Labels, want), 1e-9)
	assert.InDelta(t, 15.0/20, use.FreeShare(limits, nodes[2].Node().Labels, want), 1e-9)
}

// A request of a bandwidth no node publishes is named; the pods that ask none ask nothing.
func TestUnpublishedBandwidthIsNamed(t *testing.T) {
	nodes := []fwk.NodeInfo{node("a0", "a", 0), node("a1", "a", 10)}
	assert.Empty(t, Unpublished(Amounts{network: 5}, nodes))
	assert.Equal(t, "io.tephra.dev/disk", Unpublished(Amounts{network: 5, "io.tephra.dev/disk": 1}, nodes))
	assert.Nil(t, Requests(pod("cpu-only", 0)))
	assert.True(t, IsBandwidth(network))
	assert.False(t, IsBandwidth("nvidia.com/gpu"))
}
