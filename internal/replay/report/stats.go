package report

import (
	"math"
	"slices"
)

// Stats summarise durations (trace seconds): their count, mean and nearest-rank percentiles
// (the smallest value with at least p% of the values at or below it, so every figure is a value
// that was observed). Figures are NaN when N is 0.
type Stats struct {
	N                   int
	Mean, P50, P90, P99 float64
}

// StatsOf summarises values.
func StatsOf(values []float64) Stats {
	s := Stats{N: len(values), Mean: math.NaN(), P50: math.NaN(), P90: math.NaN(), P99: math.NaN()}
	if len(values) == 0 {
		return s
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	s.Mean = sum / float64(len(sorted))
	s.P50, s.P90, s.P99 = percentile(sorted, 50), percentile(sorted, 90), percentile(sorted, 99)
	return s
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted values, as
// internal/bench computes it.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
