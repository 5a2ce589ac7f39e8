package report

import "math"

// cumulate turns a difference array into the n values it describes.
func cumulate[T any](diff []int64, n int, convert func(int64) T) []T {
	out := make([]T, n)
	var v int64
	for k := range n {
		v += diff[k]
		out[k] = convert(v)
	}
	return out
}

// addRange adds v to the values from..to-1 of a difference array.
func addRange(diff []int64, from, to int, v int64) {
	if from < to && v != 0 {
		diff[from] += v
		diff[to] -= v
	}
}

// grid is the run's sample times: the midpoints of n equal cells of [0, end]. An empty run has
// none.
type grid struct {
	n       int
	end, dt float64
}

func newGrid(end float64, samples int) grid {
	if end <= 0 || math.IsInf(end, 0) {
		return grid{}
	}
	return grid{n: samples, end: end, dt: end / float64(samples)}
}

func (g grid) at(k int) float64 { return (float64(k) + 0.5) * g.dt }

// span is the grid indices k with from ≤ at(k) < to.
func (g grid) span(from, to float64) (int, int) {
	if math.IsNaN(from) || math.IsNaN(to) {
		return 0, 0
	}
	return g.first(from), g.first(to)
}

// first is the first index k with at(k) ≥ x (n if none). It estimates k arithmetically and then
// checks against at(k) itself, so that a time exactly on a sample is classified as at(k) would.
func (g grid) first(x float64) int {
	switch {
	case g.n == 0 || x <= 0:
		return 0
	case x >= g.end:
		return g.n
	}
	k := min(max(int(math.Ceil(x/g.dt-0.5)), 0), g.n)
	for k > 0 && g.at(k-1) >= x {
		k--
	}
	for k < g.n && g.at(k) < x {
		k++
	}
	return k
}
