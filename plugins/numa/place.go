package numa

import (
	"math"
	"math/bits"

	fwk "k8s.io/kube-scheduler/framework"
)

// view is one node's NUMA zones as one pod sees them: for each zone, the free and allocatable
// amounts of the resources the pod needs aligned. It is the caller's copy, so placing the pod's
// requests subtracts from it freely.
type view struct {
	// policy is the node's, or the pod's PolicyAnnotation; podScope is the node's scope.
	policy   policy
	podScope bool
	zones    int
	// width is the number of the pod's aligned resources; managed has bit i set when the node's
	// zones list the pod's resource i. The others are not topology-managed there: ignored.
	width   int
	managed uint64
	// free and alloc hold zone z's amounts of the pod's resource i at z*width+i.
	free, alloc []int64
}

// assign places the pod's requests on the zones as kubelet's Topology Manager would in the node's
// scope, subtracting them from free, and returns the zones it takes from. failed is the first
// request the policy rejects; the ones after it are not placed.
//
// In container scope, kubelet admits the containers one at a time, each taking its resources
// before the next is admitted, so two containers cannot both count the same free CPUs; each init
// container is admitted alone, before them, and gives its resources back.
func (v *view) assign(d *demand, pol policy) (used uint64, failed *request) {
	if v.podScope {
		used, ok := v.admit(d.pod.amounts, pol, true)
		if !ok {
			return 0, &d.pod
		}
		return used, nil
	}
	for i := range d.inits {
		if _, ok := v.admit(d.inits[i].amounts, pol, false); !ok {
			return 0, &d.inits[i]
		}
	}
	for i := range d.containers {
		u, ok := v.admit(d.containers[i].amounts, pol, true)
		if !ok {
			return 0, &d.containers[i]
		}
		used |= u
	}
	return used, nil
}

// admit places one request and says whether the policy admits where it lands. kubelet admits
// under restricted only a placement it prefers, under single-numa-node only a preferred one on a
// single zone, and anything under best-effort and none.
func (v *view) admit(amounts []int64, pol policy, commit bool) (uint64, bool) {
	used, preferred := v.placeOne(amounts, commit)
	switch pol {
	case policyRestricted:
		return used, preferred
	case policySingleNUMANode:
		return used, preferred && bits.OnesCount64(used) <= 1
	}
	return used, true
}

// placeOne places a request as kubelet would: around the first zone (in NUMA order) around which
// the placement is preferred, or else, as best-effort does, around the zone that takes the fewest
// zones.
func (v *view) placeOne(amounts []int64, commit bool) (used uint64, preferred bool) {
	anchor, fewest := -1, maxZones+1
	for z := range v.zones {
		u, ok := v.place(amounts, z, false)
		if ok {
			return v.place(amounts, z, commit)
		}
		if n := bits.OnesCount64(u); n < fewest {
			anchor, fewest = z, n
		}
	}
	if anchor < 0 {
		return 0, false
	}
	used, _ = v.place(amounts, anchor, commit)
	return used, false
}

// place takes a request from the zones around zone z, as kubelet aligns it: each resource first
// from z, then from the other zones with the most of it free. It returns the zones it takes from,
// and whether kubelet prefers the placement: every resource whole, each on no more zones than
// the fewest that could ever hold it, by their allocatable. (kubelet's hint for a resource is a
// set of zones; the pod's is their intersection, preferred when each is the narrowest possible:
// here every resource's set holds z.) With commit, what it takes is subtracted from free.
func (v *view) place(amounts []int64, z int, commit bool) (used uint64, preferred bool) {
	preferred = true
	for i, want := range amounts {
		if want <= 0 || i >= 64 || v.managed&(1<<i) == 0 {
			continue
		}
		limit := v.fewestZones(i, want)
		var set uint64
		n := 0
		for at := z; at >= 0 && want > 0; at = v.mostFree(i, set) {
			set |= 1 << at
			n++
			cell := &v.free[at*v.width+i]
			got := min(*cell, want)
			if got > 0 {
				used |= 1 << at
			}
			want -= got
			if commit {
				*cell -= got
			}
		}
		if want > 0 || n > limit {
			preferred = false
		}
	}
	return used, preferred
}

// mostFree is the zone outside set with the most of resource i free; -1 if none has any.
func (v *view) mostFree(i int, set uint64) int {
	best := -1
	for z := range v.zones {
		if f := v.free[z*v.width+i]; set&(1<<z) == 0 && f > 0 && (best < 0 || f > v.free[best*v.width+i]) {
			best = z
		}
	}
	return best
}

// fewestZones is the fewest zones whose allocatable amounts of resource i add up to want; more
// than the node's zones if all of them do not.
func (v *view) fewestZones(i int, want int64) int {
	var set uint64
	n := 0
	for want > 0 {
		best := -1
		for z := range v.zones {
			if a := v.alloc[z*v.width+i]; set&(1<<z) == 0 && a > 0 && (best < 0 || a > v.alloc[best*v.width+i]) {
				best = z
			}
		}
		if best < 0 {
			return v.zones + 1
		}
		set |= 1 << best
		want -= v.alloc[best*v.width+i]
		n++
	}
	return n
}

// zoneStep splits the score range in ten: the number of zones the pod takes picks the step, the
// strategy the place within it, so that nodes compare on zones first.
const zoneStep = fwk.MaxScore / 10

// score rates the pod's placement once assigned: the fewer zones it takes, the higher the step;
// within a step, MostAllocated rates the zones it takes higher the fuller they are, LeastAllocated
// the emptier. A placement that takes nothing (no zone has any of it free) scores 0.
func (v *view) score(used uint64, strategy string) int64 {
	if used == 0 {
		return 0 // the zones have none of what the pod needs
	}
	zones := int64(bits.OnesCount64(used))
	var sum float64
	var n int
	for z := range v.zones {
		if used&(1<<z) == 0 {
			continue
		}
		for i := 0; i < v.width && i < 64; i++ {
			if a := v.alloc[z*v.width+i]; v.managed&(1<<i) != 0 && a > 0 {
				sum += min(1, max(0, float64(a-v.free[z*v.width+i])/float64(a)))
				n++
			}
		}
	}
	fullness := 0.0
	if n > 0 {
		fullness = sum / float64(n)
	}
	if strategy == LeastAllocated {
		fullness = 1 - fullness
	}
	return (10-min(zones, 10))*zoneStep + int64(math.Round(fullness*float64(zoneStep-1)))
}
