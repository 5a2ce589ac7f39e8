// Package capacity reads what a node has and what its pods take, per resource, the way the
// scheduler's NodeInfo counts them, for plugins that reason about capacity beyond one node.
package capacity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// Of returns a node's allocatable amount of a resource and what its pods (including those the
// scheduler has assumed) request: CPU in millicores, pods as a count, others in units.
func Of(node fwk.NodeInfo, name corev1.ResourceName) (allocatable, requested int64) {
	alloc, req := node.GetAllocatable(), node.GetRequested()
	switch name {
	case corev1.ResourceCPU:
		return alloc.GetMilliCPU(), req.GetMilliCPU()
	case corev1.ResourceMemory:
		return alloc.GetMemory(), req.GetMemory()
	case corev1.ResourceEphemeralStorage:
		return alloc.GetEphemeralStorage(), req.GetEphemeralStorage()
	case corev1.ResourcePods:
		return int64(alloc.GetAllowedPodNumber()), int64(len(node.GetPods()))
	default:
		return alloc.GetScalarResources()[name], req.GetScalarResources()[name]
	}
}

// Amount is a quantity of a resource in the units Of counts it in: millicores for CPU, the plain
// value otherwise.
func Amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}
