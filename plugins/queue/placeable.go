package queue

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Whether a waiting workload could use the room a hold keeps free depends on where that room is:
// a gang of 8-GPU pods cannot use 40 free GPUs scattered 2 and 3 to a node. placeableOnNodes
// answers it from the scheduler's snapshot of the nodes, as the room is now and is about to be
// (terminating pods' room counts as free). It is a count, not a placement: it leaves out taints,
// ports, topology and the rest of the filters, and counts the room nominated to other pods as
// free, so that in doubt a queue is held, as it was before the check.

// placeableOnNodes returns a check, for one decision, of whether count pods like the entry's fit
// on the nodes' free capacity together. It reads the snapshot once, on first use.
func (q *Queue) placeableOnNodes() func(e *ledger.Entry, count int) bool {
	var nodes []fwk.NodeInfo
	var offered map[corev1.ResourceName]bool
	memo := map[string]bool{}
	return func(e *ledger.Entry, count int) bool {
		pod, err := q.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(e.Namespace).Get(e.Name)
		if err != nil {
			return true // in doubt, the workload could use the room
		}
		affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
		key := ""
		if pod.Spec.Affinity == nil && len(pod.Spec.NodeSelector) == 0 {
			// Pods without node constraints fit where their requests do: one answer per shape.
			key = fmt.Sprint(e.Requests, count)
			if ok, seen := memo[key]; seen {
				return ok
			}
		}
		if nodes == nil {
			if nodes, err = q.handle.SnapshotSharedLister().NodeInfos().List(); err != nil {
				return true
			}
			offered = offeredResources(nodes)
		}
		ok := fitsOnNodes(nodes, offered, e.Requests, count, func(node *corev1.Node) bool {
			match, err := affinity.Match(node)
			return err == nil && match
		})
		if key != "" {
			memo[key] = ok
		}
		return ok
	}
}

// offeredResources are the resources some node's allocatable names: the others (devices charged
// from ResourceSlices) are not counted per node here.
func offeredResources(nodes []fwk.NodeInfo) map[corev1.ResourceName]bool {
	offered := map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true}
	for _, n := range nodes {
		for name := range n.GetAllocatable().GetScalarResources() {
			offered[name] = true
		}
	}
	return offered
}

// fitsOnNodes says whether count pods of the requests fit on the nodes that match, each node
// holding as many as its free capacity (allocatable less requested, plus what its terminating
// pods hold) allows.
func fitsOnNodes(nodes []fwk.NodeInfo, offered map[corev1.ResourceName]bool, requests quota.Amounts, count int, matches func(*corev1.Node) bool) bool {
	left := count
	for _, n := range nodes {
		if n.Node() == nil || !matches(n.Node()) {
			continue
		}
		var leaving quota.Amounts
		for _, pi := range n.GetPods() {
			if p := pi.GetPod(); p.DeletionTimestamp != nil {
				if leaving == nil {
					leaving = quota.Amounts{}
				}
				leaving.Add(quota.PodRequests(p))
			}
		}
		fit := left
		for name, v := range requests {
			if v <= 0 || !offered[name] {
				continue
			}
			allocatable, requested := capacity.Of(n, name)
			fit = min(fit, int(max(allocatable-requested+leaving[name], 0)/v))
		}
		if left -= fit; left <= 0 {
			return true
		}
	}
	return false
}
