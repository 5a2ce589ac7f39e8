package placement

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// scorer scores a node from its accelerators, one entry per accelerator resource the pod asks
// for: what would be used with the pod placed (requested), what is used now (allocated) and what
// the node has (allocatable). Entries with allocatable 0 are left out of the score, as upstream's
// NodeResourcesFit leaves out resources a node does not have
// (pkg/scheduler/framework/plugins/noderesources/resource_allocation.go).
type scorer func(requested, allocated, allocatable []int64) int64

// scorerFor returns the strategy's scorer (nil for None: the plugin does not score accelerator
// pods).
func scorerFor(strategy string) scorer {
	switch strategy {
	case MostAllocated, Fragmentation:
		// Fragmentation scores in fragmentationScore once its mix knows the pod's resources,
		// and packs as MostAllocated until then.
		return mostAllocatedScorer
	case LeastAllocated:
		return leastAllocatedScorer
	}
	return nil
}

// half splits the score range: MostAllocated scores nodes whose accelerators are partly used
// above half, empty ones below.
const half = fwk.MaxScore / 2

// mostAllocatedScorer packs, like upstream's MostAllocated (most_allocated.go), on the share of
// the node's accelerators used once the pod is placed: among nodes of one size, the fullest that
// fits wins (best fit), which leaves whole nodes free for gangs. Across sizes the share alone
// would break a small empty node (a 1-GPU pod fills half of an empty 2-GPU node) before topping
// up a big partly used one (2 of 8 GPUs). A node already partly used therefore scores in the
// upper half and an empty one in the lower: a pod breaks a whole node only where no partly used
// node fits it, and then the one it fills most.
func mostAllocatedScorer(requested, allocated, allocatable []int64) int64 {
	var sum, count int64
	partlyUsed := false
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		sum += mostRequestedScore(requested[i], allocatable[i])
		count++
		partlyUsed = partlyUsed || allocated[i] > 0
	}
	if count == 0 {
		return 0
	}
	share := sum / count
	if partlyUsed {
		return half + share*(fwk.MaxScore-half)/fwk.MaxScore
	}
	return share * half / fwk.MaxScore
}

// leastAllocatedScorer spreads, like upstream's LeastAllocated: the emptiest node once the pod is
// placed wins.
func leastAllocatedScorer(requested, _, allocatable []int64) int64 {
	var sum, count int64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		sum += fwk.MaxScore - mostRequestedScore(requested[i], allocatable[i])
		count++
	}
	if count == 0 {
		return 0
	}
	return sum / count
}

// mostRequestedScore is the share of capacity requested, 0 to MaxScore (upstream's function of
// the same name).
func mostRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	if requested > capacity {
		requested = capacity
	}
	return requested * fwk.MaxScore / capacity
}

// avoidScore scores a node for a pod that asks for no accelerator: MaxScore without accelerators;
// with some, at most half, less the more of them are free, so that such pods go to nodes without
// accelerators where they fit, and else take the CPU and memory of nodes whose accelerators are
// used rather than of those a gang could still use whole.
func avoidScore(used, total int64) int64 {
	if total <= 0 {
		return fwk.MaxScore
	}
	if used > total {
		used = total
	}
	return used * half / total
}
