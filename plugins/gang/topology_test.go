package gang

import (
	"fmt"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/tephra-dev/tephra/internal/bandwidth"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/internal/topology"
)

// rackNode is a node of 4 CPUs in a rack and block, with used CPUs requested.
func rackNode(name, rack, block string, used int64) fwk.NodeInfo {
	n := framework.NewNodeInfo()
	n.SetNode(st.MakeNode().Name(name).Label("rack", rack).Label("block", block).
		Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourcePods: "110"}).Obj())
	if used > 0 {
		n.AddPod(st.MakePod().Name(name + "-used").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: resource.NewQuantity(used, resource.DecimalSI).String()}).Node(name).Obj())
	}
	return n
}

func cpus(n int64) minimumNeeds {
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("1")}
	return minimumNeeds{need: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(n, resource.DecimalSI)}, smallest: one, missing: int(n)}
}

// The minimum goes to the domain it leaves with the least free capacity; with none that holds
// it, a required level says why and a preferred one falls back to a wider level, or the cluster.
func TestChooseDomainIsBestFitNarrowestFirst(t *testing.T) {
	// Rack a: 2 nodes, 6 of 8 CPUs used. Rack b: 2 empty nodes. Rack c: 2 nodes, 2 used.
	nodes := []fwk.NodeInfo{
		rackNode("a0", "a", "x", 4), rackNode("a1", "a", "x", 2),
		rackNode("b0", "b", "x", 0), rackNode("b1", "b", "x", 0),
		rackNode("c0", "c", "y", 1), rackNode("c1", "c", "y", 1),
	}
	inRack := &topology.Constraint{Levels: []string{"rack"}, Required: true}

	d, why := chooseDomain(inRack, nodes, cpus(2), nil, nil)
	require.Empty(t, why)
	assert.Equal(t, "rack=a", d.String(), "2 CPUs fill rack a, which has exactly 2 free")
	d, _ = chooseDomain(inRack, nodes, cpus(5), nil, nil)
	assert.Equal(t, "rack=c", d.String(), "5 fit c (6 free) and b (8 free): c is left with less")
	d, _ = chooseDomain(inRack, nodes, cpus(8), nil, nil)
	assert.Equal(t, "rack=b", d.String())
	assert.ElementsMatch(t, []string{"b0", "b1"}, d.Nodes.UnsortedList())

	placed := func(node string) int {
		if node == "c0" {
			return 1
		}
		return 0
	}
	twins := []fwk.NodeInfo{rackNode("b0", "b", "x", 0), rackNode("c0", "c", "y", 0)}
	d, _ = chooseDomain(inRack, twins, cpus(2), placed, nil)
	assert.Equal(t, "rack=c", d.String(), "a tie goes to the domain with the group's placed pods")

	_, why = chooseDomain(inRack, nodes, cpus(9), nil, nil)
	assert.Equal(t, "no rack domain holds it (the most free: cpu 8 in rack=b)", why)

	fallback := &topology.Constraint{Levels: []string{"rack", "block"}, Required: true}
	d, why = chooseDomain(fallback, nodes, cpus(9), nil, nil)
	require.Empty(t, why)
	assert.Equal(t, "block=x", d.String(), "no rack holds 9: block x (10 free) does")
	_, why = chooseDomain(fallback, nodes, cpus(11), nil, nil)
	assert.Equal(t, "no rack domain holds it (the most free: cpu 8 in rack=b); no block domain holds it (the most free: cpu 10 in block=x)", why)

	preferred := &topology.Constraint{Levels: []string{"rack"}}
	d, why = chooseDomain(preferred, nodes, cpus(11), nil, nil)
	assert.Nil(t, d, "a preferred level alone falls back to the whole cluster")
	assert.Empty(t, why)

	_, why = chooseDomain(&topology.Constraint{Levels: []string{"row"}, Required: true}, nodes, cpus(1), nil, nil)
	assert.Equal(t, "no node has the label row", why)
}

// The domain of the group's last attempt is kept while it holds the minimum, over a better fit.
func TestChooseDomainKeepsThePreviousDomainWhileItHolds(t *testing.T) {
	nodes := []fwk.NodeInfo{
		rackNode("a0", "a", "x", 3), rackNode("b0", "b", "x", 0), rackNode("b1", "b", "x", 0),
	}
	inRack := &topology.Constraint{Levels: []string{"rack"}, Required: true}
	previous := &domain{Level: "rack", Value: "b"}
	d, _ := chooseDomain(inRack, nodes, cpus(1), nil, previous)
	assert.Equal(t, "rack=b", d.String(), "rack a would fit tighter; the group goes back to b")
	assert.ElementsMatch(t, []string{"b0", "b1"}, d.Nodes.UnsortedList())
	d, _ = chooseDomain(inRack, nodes, cpus(1), nil, &domain{Level: "rack", Value: "gone"})
	assert.Equal(t, "rack=a", d.String(), "a domain that no longer exists is chosen anew")
	d, _ = chooseDomain(inRack, []fwk.NodeInfo{rackNode("a0", "a", "x", 0), rackNode("b0", "b", "x", 4)}, cpus(2), nil, &domain{Level: "rack", Value: "b"})
	assert.Equal(t, "rack=a", d.String(), "a full previous domain is left")
}

// A topology gang past its SLA reserves in one domain: the narrowest whose capacity could hold
// its minimum, the one with most free first; none when no domain could.
func TestReservationDomainIsOneDomain(t *testing.T) {
	nodes := []fwk.NodeInfo{
		rackNode("a0", "a", "x", 4), rackNode("a1", "a", "x", 0),
		rackNode("b0", "b", "x", 1), rackNode("b1", "b", "x", 1),
	}
	names := func(nodes []fwk.NodeInfo) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.Node().Name)
		}
		return out
	}
	inRack := &topology.Constraint{Levels: []string{"rack"}, Required: true}
	assert.Equal(t, []string{"b0", "b1"}, names(reservationDomain(inRack, nodes, cpus(8).need)), "both racks could hold 8: b has the most free (6, a 4)")
	assert.Empty(t, reservationDomain(inRack, nodes, cpus(9).need), "no rack could ever hold 9")
	inBlock := &topology.Constraint{Levels: []string{"rack", "block"}, Required: true}
	assert.Len(t, reservationDomain(inBlock, nodes, cpus(9).need), 4, "the block could")
}

// A gang whose members read a dataset goes to the domain whose nodes cache most of it, before best
// fit; at a level where no domain with its data holds it, best fit chooses as for any gang.
func TestChooseDomainPrefersTheDomainThatCachesTheData(t *testing.T) {
	withData := func(n fwk.NodeInfo) fwk.NodeInfo {
		node := n.Node().DeepCopy()
		node.Labels[datasets.NodeLabelPrefix+"coco"] = datasets.Cached
		n.SetNode(node)
		return n
	}
	// Rack a: 2 nodes, 6 of 8 CPUs used, best fit for 2. Rack b: empty, one node caches coco.
	nodes := []fwk.NodeInfo{
		rackNode("a0", "a", "x", 4), rackNode("a1", "a", "x", 2),
		withData(rackNode("b0", "b", "x", 0)), rackNode("b1", "b", "x", 0),
	}
	inRack := &topology.Constraint{Levels: []string{"rack"}, Required: true}
	reading := cpus(2)
	reading.data = datasets.Demand{Datasets: []datasets.Dataset{{Name: "coco", NodeLabel: datasets.NodeLabelPrefix + "coco"}}, Locality: datasets.Preferred}

	d, _ := chooseDomain(inRack, nodes, cpus(2), nil, nil)
	assert.Equal(t, "rack=a", d.String(), "without data: best fit")
	d, _ = chooseDomain(inRack, nodes, reading, nil, nil)
	assert.Equal(t, "rack=b", d.String(), "rack b caches coco")

	big := cpus(8)
	big.data = reading.data
	nodes[0] = withData(rackNode("a0", "a", "x", 4))
	nodes = append(nodes, rackNode("c0", "c", "y", 0), rackNode("c1", "c", "y", 0))
	d, _ = chooseDomain(inRack, nodes, big, nil, nil)
	assert.Equal(t, "rack=b", d.String(), "rack a caches it too but cannot hold 8 CPUs; c holds it without data")
}

// A rack whose uplink cannot carry the gang's IO bandwidth beside what its pods request is not
// chosen, however well the gang would fill it; with no rack that carries it, the gang says so.
func TestChooseDomainKeepsARacksUplink(t *testing.T) {
	const network corev1.ResourceName = "io.tephra.dev/network"
	netNode := func(name, rack string, usedNet int64) fwk.NodeInfo {
		n := framework.NewNodeInfo()
		n.SetNode(st.MakeNode().Name(name).Label("rack", rack).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourcePods: "110", network: "20"}).Obj())
		if usedNet > 0 {
			n.AddPod(st.MakePod().Name(name + "-used").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", network: fmt.Sprint(usedNet)}).Node(name).Obj())
		}
		return n
	}
	// Rack a: half its CPUs used, and 16 of its uplink's 20. Rack b: empty.
	nodes := []fwk.NodeInfo{netNode("a0", "a", 8), netNode("a1", "a", 8), netNode("b0", "b", 0), netNode("b1", "b", 0)}
	limits := []bandwidth.Limit{{Level: "rack", Capacity: bandwidth.Amounts{network: 20}}}
	gang := minimumNeeds{need: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), network: resource.MustParse("6")}, missing: 2,
		smallest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), network: resource.MustParse("3")}}
	inRack := &topology.Constraint{Levels: []string{"rack"}, Required: true}

	d, _ := chooseDomain(inRack, nodes, gang, nil, nil)
	assert.Equal(t, "rack=a", d.String(), "without an uplink limit: best fit")
	gang.bandwidth, gang.use = limits, bandwidth.UseOf(limits, nodes)
	d, _ = chooseDomain(inRack, nodes, gang, nil, nil)
	assert.Equal(t, "rack=b", d.String(), "16 + 6 would pass rack a's 20")

	gang.use = bandwidth.UseOf(limits, []fwk.NodeInfo{nodes[0], nodes[1], netNode("b0", "b", 8), netNode("b1", "b", 8)})
	_, why := chooseDomain(inRack, nodes, gang, nil, nil)
	assert.Equal(t, "no rack domain holds it (2 with room lack the network bandwidth it requests)", why)
}
