package bench

import (
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of values; NaN if there are
// none. values need not be sorted.
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// median of values; NaN if there are none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// throughput turns bind times (in order) into pods per second: the average over the span from
// the first bind to the last (at least a second), and the counts of binds in each whole second of
// that span, the 1-second samples (the last, partial second is left out; a drain shorter than a
// second is one sample of all its binds).
func throughput(binds []time.Time) (average float64, samples []float64) {
	if len(binds) == 0 {
		return 0, nil
	}
	first, last := binds[0], binds[len(binds)-1]
	span := max(last.Sub(first), time.Second)
	average = float64(len(binds)) / span.Seconds()
	whole := int(last.Sub(first) / time.Second)
	if whole == 0 {
		return average, []float64{float64(len(binds))}
	}
	samples = make([]float64, whole)
	for _, t := range binds {
		if k := int(t.Sub(first) / time.Second); k < whole {
			samples[k]++
		}
	}
	return average, samples
}
