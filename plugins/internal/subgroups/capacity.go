package subgroups

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/capacity"
)

// freeCapacity is the free capacity of a group domain's nodes, in the resources its sub-groups
// ask for, as the sub-groups fitted so far leave it.
type freeCapacity struct {
	free map[string]map[corev1.ResourceName]int64
}

func newFreeCapacity(nodes []fwk.NodeInfo, needs []Need) *freeCapacity {
	names := map[corev1.ResourceName]bool{corev1.ResourcePods: true}
	for _, n := range needs {
		for name := range n.Total {
			names[name] = true
		}
		for name := range n.Smallest {
			names[name] = true
		}
	}
	f := &freeCapacity{free: make(map[string]map[corev1.ResourceName]int64, len(nodes))}
	for _, node := range nodes {
		free := make(map[corev1.ResourceName]int64, len(names))
		for name := range names {
			if a, u := capacity.Of(node, name); a > u {
				free[name] = a - u
			}
		}
		f.free[node.Node().Name] = free
	}
	return f
}

// take fits a sub-group's missing members into nodes and, if they fit, takes their capacity:
// the nodes must hold its total in all and its members one by one, each member on the node
// that it leaves with the least free (best fit, so that the next sub-group finds whole nodes).
// Members ask at least Smallest each; what the total asks beyond that is taken from the same
// nodes, then from the others. Nothing is taken when they do not fit.
func (f *freeCapacity) take(nodes []fwk.NodeInfo, n Need) bool {
	if n.Missing <= 0 {
		return true
	}
	names := make([]string, 0, len(nodes))
	for _, node := range nodes {
		names = append(names, node.Node().Name)
	}
	sort.Strings(names)
	for name, q := range n.Total {
		var free int64
		for _, node := range names {
			free += f.free[node][name]
		}
		if free < capacity.Amount(name, q) {
			return false
		}
	}
	trial := make(map[string]map[corev1.ResourceName]int64, len(names))
	for _, node := range names {
		trial[node] = copyAmounts(f.free[node])
	}
	smallest := amountsOf(n.Smallest)
	smallest[corev1.ResourcePods] = 1
	chosen := map[string]bool{}
	for range n.Missing {
		best, bestLeft := "", int64(-1)
		for _, node := range names {
			left, ok := fits(trial[node], smallest)
			if ok && (best == "" || left < bestLeft) {
				best, bestLeft = node, left
			}
		}
		if best == "" {
			return false
		}
		for name, a := range smallest {
			trial[best][name] -= a
		}
		chosen[best] = true
	}
	// The rest of the total, beyond Missing × Smallest, from the chosen nodes first.
	for name, q := range n.Total {
		rest := capacity.Amount(name, q) - int64(n.Missing)*smallest[name]
		for _, pass := range []bool{true, false} {
			for _, node := range names {
				if rest <= 0 || chosen[node] != pass {
					continue
				}
				take := min(rest, trial[node][name])
				trial[node][name] -= take
				rest -= take
			}
		}
		if rest > 0 {
			return false
		}
	}
	for node, amounts := range trial {
		f.free[node] = amounts
	}
	return true
}

// share is the nodes' free capacity left, each resource as a share of the cluster's, summed.
func (f *freeCapacity) share(nodes []fwk.NodeInfo, total map[corev1.ResourceName]int64) float64 {
	var share float64
	for name, t := range total {
		if name == corev1.ResourcePods || t == 0 {
			continue
		}
		var free int64
		for _, node := range nodes {
			free += f.free[node.Node().Name][name]
		}
		share += float64(free) / float64(t)
	}
	return share
}

// fits says whether a member of the given size fits the free amounts and what it leaves of the
// scarcest resource, relative to its size (for best fit).
func fits(free, size map[corev1.ResourceName]int64) (int64, bool) {
	left := int64(-1)
	for name, want := range size {
		if want <= 0 {
			continue
		}
		have := free[name]
		if have < want {
			return 0, false
		}
		if l := (have - want) / want; left < 0 || l < left {
			left = l
		}
	}
	return left, true
}

func amountsOf(list corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(list)+1)
	for name, q := range list {
		out[name] = capacity.Amount(name, q)
	}
	return out
}

func copyAmounts(in map[corev1.ResourceName]int64) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
