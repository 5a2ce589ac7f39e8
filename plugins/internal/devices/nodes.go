package devices

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/quota"
)

// nodeWithDevices is a NodeInfo whose allocatable and requested resources also count devices,
// as scalar resources named as queues name them: what the node's ResourceSlices offer, and what
// its pods' claims are charged. Tephra's capacity math (internal/capacity) reads a node's
// resources through GetAllocatable and GetRequested only, so a gang's device needs are checked
// against nodes, and its topology domain chosen, as its CPU and memory are.
type nodeWithDevices struct {
	fwk.NodeInfo
	allocatable, requested fwk.Resource
}

func (n *nodeWithDevices) GetAllocatable() fwk.Resource { return n.allocatable }
func (n *nodeWithDevices) GetRequested() fwk.Resource   { return n.requested }

// withScalars is a Resource with more scalar resources.
type withScalars struct {
	fwk.Resource
	scalars map[corev1.ResourceName]int64
}

func (r withScalars) GetScalarResources() map[corev1.ResourceName]int64 { return r.scalars }

// WithDevices returns the nodes with their devices counted (see nodeWithDevices). Nodes whose
// slices offer no device are returned as they are.
func (d *Devices) WithDevices(nodes []fwk.NodeInfo) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = n
		node := n.Node()
		if node == nil {
			continue
		}
		offered := d.inventory.OnNode(node.Name)
		if len(offered) == 0 {
			continue
		}
		alloc, req := n.GetAllocatable(), n.GetRequested()
		allocatable := make(map[corev1.ResourceName]int64, len(alloc.GetScalarResources())+len(offered))
		for name, v := range alloc.GetScalarResources() {
			allocatable[name] = v
		}
		for name, v := range offered {
			allocatable[name] += v
		}
		requested := make(map[corev1.ResourceName]int64, len(req.GetScalarResources()))
		for name, v := range req.GetScalarResources() {
			requested[name] = v
		}
		for _, pi := range n.GetPods() {
			pod := pi.GetPod()
			if len(pod.Spec.ResourceClaims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil {
				continue
			}
			for name, v := range d.Charge(pod).Charged {
				requested[name] += v
			}
		}
		out[i] = &nodeWithDevices{NodeInfo: n, allocatable: withScalars{alloc, allocatable}, requested: withScalars{req, requested}}
	}
	return out
}

// FreeOn is what a node's slices offer less what its pods (assumed ones too) are charged.
func (d *Devices) FreeOn(node fwk.NodeInfo) quota.Amounts {
	free := d.inventory.OnNode(node.Node().Name)
	if len(free) == 0 {
		return free
	}
	for _, pi := range node.GetPods() {
		if pod := pi.GetPod(); UsesDevices(pod) {
			free.Sub(d.Charge(pod).Charged)
		}
	}
	return free
}

// UsesDevices says whether a pod has claims whose devices it may be charged.
func UsesDevices(pod *corev1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil
}
