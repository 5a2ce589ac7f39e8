package bench

import (
	"math"
	"time"
)

// QueueResult is scenario Q's figures on one configuration. They are computed from what the
// driver's informer saw of each pod (created, bound, ended), the same way for every
// configuration: for L, B0 and B1, which know nothing of queues, they show what first-come,
// first-served does with the same jobs.
type QueueResult struct {
	// GPUs is the cluster's GPU pool, Q's capacity.
	GPUs int `json:"gpus"`
	// MakespanSeconds is from the first bind to the last pod's end.
	MakespanSeconds float64 `json:"makespanSeconds"`
	// LowerBoundSeconds is the makespan of a perfect scheduler on this pool: the jobs' GPU-seconds
	// over the GPUs (no job is longer than that here).
	LowerBoundSeconds float64 `json:"lowerBoundSeconds"`
	// Utilisation is the mean fraction of the GPUs held by bound, not yet ended pods, from the
	// first bind to the last (while pods wait, a GPU left idle is lost).
	Utilisation float64 `json:"utilisation"`
	// Evicted counts pods deleted before they ended (reclaimed or preempted).
	Evicted int `json:"evicted,omitempty"`
	// Queues are the figures of each queue.
	Queues []QueueFigures `json:"queues"`
	// Series is what each queue held and deserved over time, for the plot.
	Series *QueueSeries `json:"series,omitempty"`
}

// QueueSeries are the GPUs each queue held, and deserved, every StepSeconds from the first bind
// to the last end.
type QueueSeries struct {
	StepSeconds float64 `json:"stepSeconds"`
	// Held[q][i] and Deserved[q][i] are queue q's at step i.
	Held     [][]float64 `json:"held"`
	Deserved [][]float64 `json:"deserved"`
}

// seriesStep is the step of QueueSeries.
const seriesStep = 250 * time.Millisecond

// QueueFigures are one queue's figures in scenario Q.
type QueueFigures struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
	Pods   int    `json:"pods"`
	// AdmissionSeconds is its pods' create→bind times.
	AdmissionSeconds *Quantiles `json:"admissionSeconds,omitempty"`
	// Share and Deserved are the queue's mean share of the GPUs (held by its bound pods) and its
	// mean deserved share (weighted water-filling of the GPUs over the queues' demand, held plus
	// waiting, at each instant), sampled every 100 ms from the first bind to the last;
	// Deviation is the mean of |share − deserved|. All are fractions of the GPUs.
	Share     float64 `json:"share"`
	Deserved  float64 `json:"deserved"`
	Deviation float64 `json:"deviation"`
}

// shareSampling is how often Q's shares are sampled.
const shareSampling = 100 * time.Millisecond

// queueResult computes Q's figures from the recorder's pods on a pool of gpus GPUs.
func queueResult(pods []podRecord, gpus int, evicted int) *QueueResult {
	res := &QueueResult{GPUs: gpus, Evicted: evicted}
	span := queueSpanOf(pods)
	if gpus > 0 {
		res.LowerBoundSeconds = span.gpuSeconds / float64(gpus)
	}
	if !span.firstBind.IsZero() && !span.lastEnd.IsZero() {
		res.MakespanSeconds = span.lastEnd.Sub(span.firstBind).Seconds()
	}
	res.Utilisation = utilisation(pods, gpus, span.firstBind, span.lastBind)

	index := map[string]int{}
	weights := make([]float64, len(benchQueues))
	for i, q := range benchQueues {
		index[q.Name] = i
		weights[i] = float64(q.Weight)
		res.Queues = append(res.Queues, QueueFigures{Name: q.Name, Weight: q.Weight})
	}
	addAdmissions(res, pods, index)
	occupancy := newQueueOccupancy(pods, gpus, index, weights)
	if !span.firstBind.IsZero() && !span.lastEnd.IsZero() {
		res.Series = queueSeries(occupancy, span.firstBind, span.lastEnd)
	}
	addShares(res, occupancy, gpus, span.firstBind, span.lastBind)
	return res
}

// queueSpan is when Q's pods were bound and ended, and the GPU-seconds they ran.
type queueSpan struct {
	// firstBind, lastBind and lastEnd are zero if no pod was bound.
	firstBind, lastBind, lastEnd time.Time
	// gpuSeconds counts every pod's run, bound or not: the work Q asks for.
	gpuSeconds float64
}

// queueSpanOf reads the span of the recorder's pods.
func queueSpanOf(pods []podRecord) queueSpan {
	var s queueSpan
	for _, p := range pods {
		s.gpuSeconds += float64(p.gpus) * p.run.Seconds()
		if p.bound.IsZero() {
			continue
		}
		if s.firstBind.IsZero() || p.bound.Before(s.firstBind) {
			s.firstBind = p.bound
		}
		if p.bound.After(s.lastBind) {
			s.lastBind = p.bound
		}
		if p.ended.After(s.lastEnd) {
			s.lastEnd = p.ended
		}
	}
	return s
}

// addAdmissions counts each queue's pods and sets its create→bind times; pods of no bench queue
// are left out.
func addAdmissions(res *QueueResult, pods []podRecord, index map[string]int) {
	admissions := make([][]float64, len(benchQueues))
	for _, p := range pods {
		i, ok := index[p.queue]
		if !ok {
			continue
		}
		res.Queues[i].Pods++
		if !p.bound.IsZero() {
			admissions[i] = append(admissions[i], p.bound.Sub(p.created).Seconds())
		}
	}
	for i := range res.Queues {
		res.Queues[i].AdmissionSeconds = quantiles(admissions[i])
	}
}

// queueOccupancy tells what each queue held and deserved at an instant. Its slices are reused
// from one instant to the next: a caller reads what at returns before it calls at again.
type queueOccupancy struct {
	pods  []podRecord
	gpus  int
	index map[string]int
	// weights are the queues' weights, in benchQueues' order.
	weights               []float64
	held, waiting, demand []float64
}

func newQueueOccupancy(pods []podRecord, gpus int, index map[string]int, weights []float64) *queueOccupancy {
	return &queueOccupancy{pods: pods, gpus: gpus, index: index, weights: weights,
		held: make([]float64, len(benchQueues)), waiting: make([]float64, len(benchQueues)),
		demand: make([]float64, len(benchQueues))}
}

// at returns the GPUs each queue held at t (its bound, not yet ended pods') and the GPUs it
// deserved, water-filled over the queues' demand (held plus waiting).
func (o *queueOccupancy) at(t time.Time) ([]float64, []float64) {
	clear(o.held)
	clear(o.waiting)
	for _, p := range o.pods {
		i, ok := o.index[p.queue]
		if !ok || p.created.After(t) {
			continue
		}
		switch {
		case p.bound.IsZero() || p.bound.After(t):
			if p.ended.IsZero() || p.ended.After(t) {
				o.waiting[i] += float64(p.gpus)
			}
		case p.ended.IsZero() || p.ended.After(t):
			o.held[i] += float64(p.gpus)
		}
	}
	for i := range o.demand {
		o.demand[i] = o.held[i] + o.waiting[i]
	}
	return o.held, waterFill(float64(o.gpus), o.weights, o.demand)
}

// queueSeries samples what each queue held and deserved every seriesStep from the first bind to
// a step past the last end, for the plot.
func queueSeries(occupancy *queueOccupancy, firstBind, lastEnd time.Time) *QueueSeries {
	series := &QueueSeries{StepSeconds: seriesStep.Seconds(),
		Held: make([][]float64, len(benchQueues)), Deserved: make([][]float64, len(benchQueues))}
	for t := firstBind; !t.After(lastEnd.Add(seriesStep)); t = t.Add(seriesStep) {
		h, d := occupancy.at(t)
		for i := range benchQueues {
			series.Held[i] = append(series.Held[i], h[i])
			series.Deserved[i] = append(series.Deserved[i], math.Round(d[i]*100)/100)
		}
	}
	return series
}

// addShares sets each queue's mean share, deserved share and deviation, sampled every
// shareSampling from the first bind to the last (all zero if nothing was bound).
func addShares(res *QueueResult, occupancy *queueOccupancy, gpus int, firstBind, lastBind time.Time) {
	samples := 0
	for t := firstBind; !firstBind.IsZero() && !t.After(lastBind); t = t.Add(shareSampling) {
		held, deserved := occupancy.at(t)
		for i := range res.Queues {
			share := held[i] / float64(gpus)
			res.Queues[i].Share += share
			res.Queues[i].Deserved += deserved[i] / float64(gpus)
			res.Queues[i].Deviation += math.Abs(share - deserved[i]/float64(gpus))
		}
		samples++
	}
	for i := range res.Queues {
		if samples == 0 {
			continue
		}
		res.Queues[i].Share /= float64(samples)
		res.Queues[i].Deserved /= float64(samples)
		res.Queues[i].Deviation /= float64(samples)
	}
}

// utilisation is the mean fraction of gpus held by bound, not yet ended pods over [from, to]
// (0 if the span is empty).
func utilisation(pods []podRecord, gpus int, from, to time.Time) float64 {
	if gpus == 0 || from.IsZero() || !to.After(from) {
		return 0
	}
	var held float64 // GPU-seconds held within [from, to]
	for _, p := range pods {
		if p.bound.IsZero() {
			continue
		}
		end := to
		if !p.ended.IsZero() && p.ended.Before(to) {
			end = p.ended
		}
		start := p.bound
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			held += float64(p.gpus) * end.Sub(start).Seconds()
		}
	}
	return held / (float64(gpus) * to.Sub(from).Seconds())
}

// waterFill divides capacity among claimants in proportion to their weights, none getting more
// than its demand, what one does not use going to the others: the deserved share of
// docs/queues.md for sibling queues with no guarantee or capability (without its rounding to
// whole units).
func waterFill(capacity float64, weights, demand []float64) []float64 {
	share := make([]float64, len(weights))
	open := make([]int, 0, len(weights))
	for i := range weights {
		if demand[i] > 0 && weights[i] > 0 {
			open = append(open, i)
		}
	}
	left := capacity
	for len(open) > 0 && left > 1e-9 {
		var total float64
		for _, i := range open {
			total += weights[i]
		}
		// Claimants whose remaining demand is below their part are held at their demand; the
		// rest of the round's capacity is divided again among the others.
		held := false
		for _, i := range open {
			if demand[i]-share[i] <= left*weights[i]/total {
				held = true
			}
		}
		if !held {
			for _, i := range open {
				share[i] += left * weights[i] / total
			}
			break
		}
		next := open[:0:0]
		spent := 0.0
		for _, i := range open {
			if rest := demand[i] - share[i]; rest <= left*weights[i]/total {
				share[i] += rest
				spent += rest
			} else {
				next = append(next, i)
			}
		}
		left -= spent
		open = next
	}
	return share
}

// queueSummary is a configuration's Q figures: medians over its completed repetitions.
type queueSummary struct {
	makespan, lowerBound, utilisation, deviation, evicted float64
	queues                                                []QueueFigures
}

func summarizeQueues(runs []RunResult) queueSummary {
	var s queueSummary
	var makespan, bound, util, dev, evicted []float64
	perQueue := make([]struct {
		pods                                 int
		p50, p99, share, deserved, deviation []float64
	}, len(benchQueues))
	for _, r := range runs {
		if ok, _ := r.complete(); !ok || r.Queues == nil {
			continue
		}
		q := r.Queues
		makespan = append(makespan, q.MakespanSeconds)
		bound = append(bound, q.LowerBoundSeconds)
		util = append(util, q.Utilisation)
		evicted = append(evicted, float64(q.Evicted))
		var sum float64
		for i, f := range q.Queues {
			if i >= len(perQueue) {
				break
			}
			sum += f.Deviation
			perQueue[i].pods = f.Pods
			if f.AdmissionSeconds != nil {
				perQueue[i].p50 = append(perQueue[i].p50, f.AdmissionSeconds.P50)
				perQueue[i].p99 = append(perQueue[i].p99, f.AdmissionSeconds.P99)
			}
			perQueue[i].share = append(perQueue[i].share, f.Share)
			perQueue[i].deserved = append(perQueue[i].deserved, f.Deserved)
			perQueue[i].deviation = append(perQueue[i].deviation, f.Deviation)
		}
		dev = append(dev, sum/float64(max(len(q.Queues), 1)))
	}
	s.makespan, s.lowerBound, s.utilisation = median(makespan), median(bound), median(util)
	s.deviation, s.evicted = median(dev), median(evicted)
	for i, q := range benchQueues {
		f := QueueFigures{Name: q.Name, Weight: q.Weight, Pods: perQueue[i].pods,
			Share: median(perQueue[i].share), Deserved: median(perQueue[i].deserved), Deviation: median(perQueue[i].deviation)}
		if len(perQueue[i].p50) > 0 {
			f.AdmissionSeconds = &Quantiles{P50: median(perQueue[i].p50), P99: median(perQueue[i].p99)}
		}
		s.queues = append(s.queues, f)
	}
	return s
}
