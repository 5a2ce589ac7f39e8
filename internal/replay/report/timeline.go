package report

import (
	"math"
	"slices"
)

// segment is a stretch of a job's life in which none of its pods changed: how many pods held
// their GPUs, whether the job was working (its minimum running) and whether its gang was
// partial (some but fewer than its minimum pods holding).
type segment struct {
	from, to         float64
	pods             int
	working, partial bool
}

// jobFigures are one job's GPU-seconds and partial-gang figures, integrated exactly over its
// pods' event times.
type jobFigures struct {
	segments []segment
	// allocated, busy and partial are GPU-seconds held, held while working, held partially.
	allocated, busy, partial float64
	// partialWindows counts the stretches of consecutive partial segments; longestPartial is the
	// longest's length.
	partialWindows int
	longestPartial float64
	// partialPodsAtEnd are the pods still holding at end while fewer than the minimum did.
	partialPodsAtEnd int
	// discarded is the work a preemption threw away: the GPU-seconds its running pods worked in
	// each stretch of work that ended when a preempted pod's end left fewer than the minimum
	// running. The job must do that work again. An elastic pod evicted while the minimum runs on
	// throws nothing away, and the other pods of a gang that lost a member lose their work too.
	discarded float64
}

// minimum is a job's gang minimum: MinReplicas, or Replicas when unset, and at least one pod.
func minimum(j Job) int {
	if j.MinReplicas > 0 {
		return j.MinReplicas
	}
	return max(j.Replicas, 1)
}

// interval is when a pod held its node (and ran), clamped to the run [0, end].
type interval struct{ bound, running, ended float64 }

// timeline cuts a job's life at its pods' event times (bind, run, end) and sums the figures over
// the pieces. Between two consecutive events no pod changes, so every piece has one state, and
// the integrals are exact.
func timeline(j Job, end float64) jobFigures {
	var f jobFigures
	clamp := func(t float64) float64 { return math.Min(math.Max(t, 0), end) }
	var pods []interval
	times := []float64{}
	for _, p := range j.Pods {
		if math.IsNaN(p.Bound) {
			continue
		}
		iv := interval{bound: clamp(p.Bound), running: math.NaN(), ended: end}
		if !math.IsNaN(p.Ended) {
			iv.ended = clamp(p.Ended)
		}
		if !math.IsNaN(p.Running) {
			iv.running = clamp(p.Running)
			times = append(times, iv.running)
		}
		if iv.ended <= iv.bound {
			continue
		}
		pods = append(pods, iv)
		times = append(times, iv.bound, iv.ended)
	}
	slices.Sort(times)
	times = slices.Compact(times)
	least := minimum(j)
	gpus := float64(j.GPUs)
	windowStart := math.NaN()
	closeWindow := func(at float64) {
		if !math.IsNaN(windowStart) {
			f.partialWindows++
			f.longestPartial = math.Max(f.longestPartial, at-windowStart)
			windowStart = math.NaN()
		}
	}
	for i := 0; i+1 < len(times); i++ {
		s := segment{from: times[i], to: times[i+1]}
		running := 0
		for _, iv := range pods {
			// The state is constant on [from, to): read it at from.
			if iv.bound <= s.from && s.from < iv.ended {
				s.pods++
				if iv.running <= s.from {
					running++
				}
			}
		}
		s.working = running >= least
		s.partial = s.pods > 0 && s.pods < least
		length := s.to - s.from
		held := gpus * float64(s.pods) * length
		f.allocated += held
		if s.working {
			f.busy += held
		}
		if s.partial {
			f.partial += held
			if math.IsNaN(windowStart) {
				windowStart = s.from
			}
		} else {
			closeWindow(s.from)
		}
		if s.pods > 0 {
			f.segments = append(f.segments, s)
		}
	}
	if len(times) > 0 {
		closeWindow(times[len(times)-1])
	}

	f.discarded = discardedWork(j, pods, times, least, end)

	// Still holding at the end: bound by then, and not ended (NaN) or ended after it.
	atEnd := 0
	for _, p := range j.Pods {
		if !math.IsNaN(p.Bound) && p.Bound <= end && (math.IsNaN(p.Ended) || p.Ended > end) {
			atEnd++
		}
	}
	if atEnd > 0 && atEnd < least {
		f.partialPodsAtEnd = atEnd
	}
	return f
}

// discardedWork is jobFigures.discarded, over the pods' intervals and the sorted event times.
func discardedWork(j Job, pods []interval, times []float64, least int, end float64) float64 {
	preemptedEnds := map[float64]bool{}
	for _, p := range j.Pods {
		if p.Preempted && !math.IsNaN(p.Ended) && p.Ended <= end {
			preemptedEnds[math.Max(p.Ended, 0)] = true
		}
	}
	if len(preemptedEnds) == 0 {
		return 0
	}
	discarded, stretch, working := 0.0, 0.0, false
	for i := 0; i+1 < len(times); i++ {
		from, to := times[i], times[i+1]
		running := 0
		for _, iv := range pods {
			if iv.running <= from && from < iv.ended {
				running++
			}
		}
		if running >= least {
			working = true
			stretch += float64(j.GPUs*running) * (to - from)
			continue
		}
		if working && preemptedEnds[from] {
			discarded += stretch
		}
		working, stretch = false, 0
	}
	return discarded
}
