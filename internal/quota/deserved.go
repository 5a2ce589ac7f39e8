package quota

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Deserved computes every queue's deserved share, per resource, at the given demand (allocated
// plus pending requests of each leaf queue). The cluster total is root's share; each parent's
// share is divided among its children by water-filling:
//
//   - children get shares in proportion to their weights;
//   - a child is raised to its guarantee (bounded by its demand) and held at min(capability,
//     demand), and what it is raised or held at is taken from or given back to its siblings,
//     again by weight, until the shares add up to the parent's (or every child is held);
//   - when the guarantees themselves do not fit, they are scaled down in proportion.
//
// So a guarantee is a floor, not an addition, and idle capacity goes to those who ask for it.
// With usage history (Node.Usage, history.go), a child's weight is multiplied by a factor that
// falls with its recent usage of the resource against the parent's share; without any, shares
// are by weight.
// Shares are whole units (millicores for CPU), rounded down, so children never sum above their
// parent.
func Deserved(t *Tree, total Amounts, demand map[string]Amounts) map[string]Amounts {
	subtree := subtreeDemand(t, demand)
	out := map[string]Amounts{}
	rootShare := Amounts{}
	for name, v := range total {
		share := min(v, subtree[t.Root.Name][name])
		if limit, ok := t.Root.Capability[name]; ok {
			share = min(share, limit)
		}
		rootShare[name] = max(share, 0)
	}
	out[t.Root.Name] = rootShare
	var divideChildren func(*Node)
	divideChildren = func(n *Node) {
		if n.Leaf() {
			return
		}
		shares := make([]Amounts, len(n.Children))
		for i := range shares {
			shares[i] = Amounts{}
		}
		for _, name := range out[n.Name].Names() {
			children := make([]claim, len(n.Children))
			factors := historyFactors(n.Children, name, out[n.Name][name], t.HistoryHalfLife)
			for i, c := range n.Children {
				children[i] = claimOf(c, name, subtree[c.Name][name])
				if factors != nil {
					children[i].weight *= factors[i]
				}
			}
			for i, v := range waterFill(float64(out[n.Name][name]), children) {
				shares[i][name] = v
			}
		}
		for i, c := range n.Children {
			out[c.Name] = shares[i]
			divideChildren(c)
		}
	}
	divideChildren(t.Root)
	return out
}

// subtreeDemand sums the leaves' demand up the tree.
func subtreeDemand(t *Tree, demand map[string]Amounts) map[string]Amounts {
	out := map[string]Amounts{}
	var sum func(*Node) Amounts
	sum = func(n *Node) Amounts {
		total := Amounts{}
		if n.Leaf() {
			total.Add(demand[n.Name])
		}
		for _, c := range n.Children {
			total.Add(sum(c))
		}
		out[n.Name] = total
		return total
	}
	sum(t.Root)
	return out
}

// claim is one child's stake in one resource of its parent's share.
type claim struct {
	weight, floor, ceiling float64
}

func claimOf(n *Node, name corev1.ResourceName, demand int64) claim {
	ceiling := float64(max(demand, 0))
	if limit, ok := n.Capability[name]; ok {
		ceiling = math.Min(ceiling, float64(limit))
	}
	floor := math.Min(float64(n.Guarantee[name]), ceiling)
	return claim{weight: float64(n.Weight), floor: math.Max(floor, 0), ceiling: ceiling}
}

// waterFill divides share among the claims: each gets clamp(level*weight, floor, ceiling) for the
// level at which they add up to share. The sum is monotonic in the level, so bisection finds it.
func waterFill(share float64, claims []claim) []int64 {
	out := make([]int64, len(claims))
	if len(claims) == 0 || share <= 0 {
		return out
	}
	var floors, ceilings float64
	for _, c := range claims {
		floors += c.floor
		ceilings += c.ceiling
	}
	values := make([]float64, len(claims))
	switch {
	case ceilings <= share:
		for i, c := range claims {
			values[i] = c.ceiling
		}
	case floors >= share:
		for i, c := range claims {
			values[i] = c.floor * share / floors
		}
	default:
		at := func(level float64) (sum float64) {
			for i, c := range claims {
				values[i] = math.Min(math.Max(level*c.weight, c.floor), c.ceiling)
				sum += values[i]
			}
			return sum
		}
		low, high := 0.0, 0.0
		for _, c := range claims {
			high = math.Max(high, c.ceiling/c.weight)
		}
		for range 200 {
			mid := (low + high) / 2
			if at(mid) < share {
				low = mid
			} else {
				high = mid
			}
		}
		at(high)
	}
	return roundDown(values, int64(share))
}

// roundDown turns shares into whole units without letting their sum exceed the parent's, and
// without losing a unit to float error (5.9999999 is 6). The float error forgiven is a few ulps
// of the value: a tolerance of a unit or more would round exact shares of large amounts (memory
// in bytes: 1792Gi is 1.9e12) up, and the correction below would then take a unit from a queue
// whose gang needs its whole share, which would wait for good (make replay found it).
func roundDown(values []float64, share int64) []int64 {
	out := make([]int64, len(values))
	var sum int64
	for i, v := range values {
		out[i] = int64(math.Floor(v + 1e-6 + math.Abs(v)*1e-15))
		sum += out[i]
	}
	// Rounding each share up by its float error can, in rare cases, overshoot by a unit or two:
	// take them back from the largest shares.
	if sum > share {
		order := make([]int, len(out))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return out[order[a]] > out[order[b]] })
		for i := 0; sum > share; i = (i + 1) % len(order) {
			if out[order[i]] > 0 {
				out[order[i]]--
				sum--
			}
		}
	}
	return out
}
