package quota

import corev1 "k8s.io/api/core/v1"

// Distance is how far queues' allocations are from their deserved shares: the sum, over the
// given queues and resources, of |allocated - deserved|, each resource counted as a fraction of
// the cluster's total of it so that resources of different units add up. Shares are fractional
// and pods are whole, so a queue is rarely at its share exactly; reclaim moves whole pods only
// when a move strictly lowers this distance (MoveConverges), which brings shares as close as
// whole pods allow without ever moving a pod back.
func Distance(allocated, deserved map[string]Amounts, total Amounts, resources []corev1.ResourceName, queues []string) float64 {
	var d float64
	for _, q := range queues {
		for _, name := range resources {
			if total[name] <= 0 {
				continue
			}
			diff := float64(allocated[q][name] - deserved[q][name])
			if diff < 0 {
				diff = -diff
			}
			d += diff / float64(total[name])
		}
	}
	return d
}

// distanceEpsilon ignores rounding: a move must lower the distance by more than this.
const distanceEpsilon = 1e-9

// MoveConverges says whether moving taken from the queues of taken (by queue) to queue to, which
// gains gained, strictly lowers the distance of the queues involved from their deserved shares,
// in the given resources. The reverse of a move that converges never does, so reclaim by this
// rule cannot cycle.
func MoveConverges(allocated, deserved map[string]Amounts, total Amounts, resources []corev1.ResourceName, taken map[string]Amounts, to string, gained Amounts) bool {
	queues := []string{to}
	after := map[string]Amounts{to: allocated[to].Clone()}
	after[to].Add(gained)
	for q, amounts := range taken {
		if q == to {
			continue
		}
		queues = append(queues, q)
		after[q] = allocated[q].Clone()
		after[q].Sub(amounts)
	}
	before := Distance(allocated, deserved, total, resources, queues)
	return Distance(after, deserved, total, resources, queues) < before-distanceEpsilon
}
