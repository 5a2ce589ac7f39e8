package foreign

import (
	corev1 "k8s.io/api/core/v1"
)

// positiveCounts drops the zero and negative entries of a per-task count, which Tephra's API
// refuses and which require nothing.
func positiveCounts(m map[string]int32) map[string]int32 {
	var out map[string]int32
	for k, v := range m {
		if v > 0 {
			if out == nil {
				out = map[string]int32{}
			}
			out[k] = v
		}
	}
	return out
}

// negativeQuantity names a negative quantity of list, or "" if none is.
func negativeQuantity(list corev1.ResourceList) string {
	for name, q := range list {
		if q.Sign() < 0 {
			return string(name)
		}
	}
	return ""
}
