package report

import "math"

// ToShare summarises how long a queue took to reach its deserved share once it was owed room:
// over the episodes that began at a contended grid time at which the queue held at least a GPU
// less than its deserved share (it asked for more: a share is capped at what a queue asks), each
// from that time to the first grid time at which it held its deserved share, or asked for no more
// than it held. An episode still open at the run's end counts until the end, and is counted in
// Unreached too. Times are trace seconds, on the report's grid (Options.Samples): an episode
// shorter than a cell may be missed, and each counts whole cells.
type ToShare struct {
	// Episodes counts the episodes, Unreached those still open at the run's end.
	Episodes, Unreached int
	// Mean and Max are the episodes' durations; NaN when there were none.
	Mean, Max float64
}

// toShareOf finds the episodes of each queue in the series, and those of all queues together.
func toShareOf(s Series, end float64, gpus int) (all ToShare, queues []ToShare) {
	var every []float64
	// A GPU's fraction, halved: held and deserved are whole GPUs.
	tolerance := 0.5 / float64(max(gpus, 1))
	for i := range s.Share {
		var durations []float64
		unreached := 0
		start := math.NaN()
		for k, at := range s.Times {
			below := s.Share[i][k] < s.Deserved[i][k]-tolerance
			switch {
			case math.IsNaN(start) && below && s.Contended[k]:
				start = at
			case !math.IsNaN(start) && !below:
				durations = append(durations, at-start)
				start = math.NaN()
			}
		}
		if !math.IsNaN(start) {
			durations = append(durations, end-start)
			unreached++
		}
		queues = append(queues, toShare(durations, unreached))
		every = append(every, durations...)
		all.Unreached += unreached
	}
	unreached := all.Unreached
	all = toShare(every, unreached)
	return all, queues
}

func toShare(durations []float64, unreached int) ToShare {
	t := ToShare{Episodes: len(durations), Unreached: unreached, Mean: math.NaN(), Max: math.NaN()}
	if len(durations) == 0 {
		return t
	}
	t.Mean, t.Max = StatsOf(durations).Mean, 0
	for _, d := range durations {
		t.Max = max(t.Max, d)
	}
	return t
}
