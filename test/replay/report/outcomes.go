package report

import (
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// gpu is the resource the replay's pods ask for, as internal/quota names it.
const gpu corev1.ResourceName = "nvidia.com/gpu"

const (
	// DefaultPartialTolerance is the Options.PartialTolerance used when none is given: long
	// enough that a gang bound all at once (its pods a few milliseconds apart, times the
	// speedup) is not a partial gang, short enough that a pod stuck waiting for its siblings is.
	DefaultPartialTolerance = 30.0
	// DefaultSamples is the Options.Samples used when none is given: enough for a smooth plot.
	DefaultSamples = 400
)

// Options tune Analyze. The zero value is the defaults.
type Options struct {
	// PartialTolerance, in trace seconds, is how long a job may hold part of its gang before it
	// counts as a partial-gang job: shorter windows are a gang being bound, not a gang stuck.
	// Zero means DefaultPartialTolerance; a negative value counts every window.
	PartialTolerance float64
	// Samples is the number of grid times for the time series and the queue shares. Zero means
	// DefaultSamples.
	Samples int
}

func (o Options) withDefaults() Options {
	if o.PartialTolerance == 0 {
		o.PartialTolerance = DefaultPartialTolerance
	}
	o.PartialTolerance = max(o.PartialTolerance, 0)
	if o.Samples <= 0 {
		o.Samples = DefaultSamples
	}
	return o
}

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
// test/bench computes it.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Summary is the outcome of a set of jobs: a run's, or one queue's.
type Summary struct {
	// Queue is the queue's name, "" for the whole run. Weight and Guarantee (GPUs) are what its
	// deserved share was computed with.
	Queue             string
	Weight, Guarantee int64
	// Jobs were submitted; Finished ended their work; NeverRan never had their minimum running;
	// Unfinished started but did not finish before the run's end.
	Jobs, Finished, NeverRan, Unfinished int
	// JCT is Ended − Submit over the finished jobs; Wait is Started[0] − Submit (submit to the
	// minimum first running) over the jobs that started.
	JCT, Wait Stats
	// MeanShare and MeanDeserved are the fraction of the cluster's GPUs the queue held and
	// deserved, and ShareMAD the mean of |held − deserved|, over the contended grid times only
	// (see Outcomes.ContendedSamples); NaN when there were none. For the whole run, MeanShare
	// and MeanDeserved are the queues' sums and ShareMAD the mean of the MADs of the queues that
	// had jobs (a queue without jobs deserves nothing and holds nothing: it would only dilute).
	MeanShare, MeanDeserved, ShareMAD float64
}

// BigGangGPUs is the size, in GPUs over all its pods, from which a job counts in
// Outcomes.BigGangs.
const BigGangGPUs = 32

// Series are a run's time series on a regular grid, for the plots.
type Series struct {
	// Times are the grid's times: the midpoints of Samples equal cells from 0 to the run's End,
	// so that their mean is an integral's and no sample sits on the run's first or last instant.
	Times []float64
	// Allocated and Busy are the fractions of the GPUs held (by any pod) and held by pods of
	// working jobs (see Outcomes.BusyGPUSeconds) at each time.
	Allocated, Busy []float64
	// Share and Deserved are, per queue (in Outcomes.Queues' order) and time, the fraction of
	// the GPUs the queue held and deserved.
	Share, Deserved [][]float64
	// Contended says, per time, whether the queues asked for at least the cluster.
	Contended []bool
}

// Outcomes are what happened in one configuration's run. Durations are trace seconds.
type Outcomes struct {
	Config, Title string
	GPUs          int
	End           float64
	// Options are those it was computed with, defaults filled in.
	Options Options
	// All summarises every job; Queues each queue, sorted by name. Jobs that name no queue are
	// in v1alpha1.DefaultQueue, as Tephra puts them.
	All    Summary
	Queues []Summary
	// BigGangs summarises the jobs of BigGangGPUs GPUs or more: those that need reservations
	// and lose most to fragmentation, and whose wait backfill must not make worse.
	BigGangs Summary
	// JCTs are the finished jobs' completion times, sorted, for the CDF.
	JCTs []float64
	// Makespan is the last finished job's end minus the first submit: over finished jobs only,
	// so read it with All.Unfinished and All.NeverRan. NaN if no job finished.
	Makespan float64

	// CapacityGPUSeconds is GPUs × End. AllocatedGPUSeconds integrates the GPUs held: a pod holds
	// its job's GPUs from Bound until Ended (until End if it never ended). BusyGPUSeconds counts
	// only the GPUs held while their job was working: at least MinReplicas of its pods running
	// (Running ≤ t < Ended). Both are exact integrals over the pods' event times.
	CapacityGPUSeconds, AllocatedGPUSeconds, BusyGPUSeconds float64

	// PartialGPUSeconds integrates the GPUs held by pods whose job had some but fewer than
	// MinReplicas pods holding: gangs that are not whole, which hold GPUs nobody can use.
	PartialGPUSeconds float64
	// PartialJobs counts the jobs that held a partial gang for longer than
	// Options.PartialTolerance at a stretch.
	PartialJobs int
	// PartialPodsAtEnd and PartialGPUsAtEnd are the pods still holding in a partial gang when
	// the run ended, and their GPUs: the deadlock that gang scheduling prevents. No tolerance
	// applies: a run ends when its jobs ended or the replay gave up waiting, not mid-bind.
	PartialPodsAtEnd, PartialGPUsAtEnd int

	// PreemptedPods counts the pods the scheduler evicted; DiscardedGPUSeconds is the work they
	// lost, Σ GPUs × (Ended − Running) over those that ran.
	PreemptedPods       int
	DiscardedGPUSeconds float64
	// WorkGPUSeconds is the trace's work, Σ Replicas × GPUs × Duration over every job: what
	// DiscardedGPUSeconds is a part of.
	WorkGPUSeconds float64
	// RestartedJobs counts the jobs whose minimum came to run more than once (a preemption made it
	// start again), and MostRestarts is the most times one job started again.
	RestartedJobs, MostRestarts int

	// WholeFreeWhileBigWait and ScatteredFreeWhileBigWait are the mean free GPUs on nodes with no
	// GPU held and on partly held nodes, over the grid times at which a big gang waited (NaN when
	// none waited, or the run has no nodes' record): a gang of whole nodes can use only the first.
	WholeFreeWhileBigWait, ScatteredFreeWhileBigWait float64

	// HeldBesideIdleWaitSeconds is the wait, summed over jobs, spent while the job's queue held at
	// least its deserved share and the cluster had GPUs free for the job's minimum in total: wait a
	// fair-share hold may have caused beside idle GPUs (or that placement did: the free GPUs may
	// be scattered). WaitSeconds is all the jobs' wait, over the same grid.
	HeldBesideIdleWaitSeconds, WaitSeconds float64

	// FirstPod is how long each job's first pod took to appear after the job was submitted,
	// over the jobs whose pods' Seen was recorded: in C a Tephra Job's controller creates them,
	// in B0 and B1 the replay itself. It is part of every wait, and the speedup multiplies it.
	FirstPod Stats

	// ContendedSamples is the number of grid times at which the queues' demand (GPUs asked by
	// the jobs submitted and not ended) was at least the cluster's: only then is a share below
	// the deserved one a scheduler's choice; below capacity everyone gets what they ask.
	ContendedSamples int
	Series           Series
}

// firstSeen is when the job's first pod was seen; 0 when no pod's Seen was recorded.
func firstSeen(j Job) float64 {
	first := 0.0
	for _, p := range j.Pods {
		if p.Seen > 0 && (first == 0 || p.Seen < first) {
			first = p.Seen
		}
	}
	return first
}

// AllocatedFraction is the mean fraction of the GPUs held; NaN for a run without capacity.
func (o *Outcomes) AllocatedFraction() float64 {
	return ratio(o.AllocatedGPUSeconds, o.CapacityGPUSeconds)
}

// BusyFraction is the mean fraction of the GPUs held by working jobs; NaN for a run without
// capacity.
func (o *Outcomes) BusyFraction() float64 { return ratio(o.BusyGPUSeconds, o.CapacityGPUSeconds) }

func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// Analyze computes a run's outcomes with the default Options.
func Analyze(run Run) Outcomes { return Options{}.Analyze(run) }

// Compare analyses each configuration's run of the same trace with the default Options, in the
// runs' order.
func Compare(runs []Run) []Outcomes { return Options{}.Compare(runs) }

// Compare analyses each run with these options, in the runs' order.
func (o Options) Compare(runs []Run) []Outcomes {
	out := make([]Outcomes, len(runs))
	for i, run := range runs {
		out[i] = o.Analyze(run)
	}
	return out
}

// Analyze computes a run's outcomes.
func (o Options) Analyze(run Run) Outcomes {
	o = o.withDefaults()
	end := run.End
	if math.IsNaN(end) || end < 0 {
		end = 0
	}
	out := Outcomes{Config: run.Config, Title: run.Title, GPUs: run.GPUs, End: end, Options: o,
		CapacityGPUSeconds: float64(max(run.GPUs, 0)) * end}

	queues := queueSpecs(run)
	index := map[string]int{}
	for i, q := range queues {
		index[q.Name] = i
	}
	var jct, wait, bigJCT, bigWait, firstPod []float64
	perQueue := make([]struct{ jct, wait []float64 }, len(queues))
	out.All, out.BigGangs = Summary{}, Summary{}
	out.Queues = make([]Summary, len(queues))
	for i, q := range queues {
		out.Queues[i] = Summary{Queue: q.Name, Weight: q.Weight, Guarantee: q.Guarantee}
	}
	g := newGrid(end, o.Samples)
	allocated, busy := make([]int64, g.n+1), make([]int64, g.n+1)
	held, demand := make([][]int64, len(queues)), make([][]int64, len(queues))
	for i := range queues {
		held[i], demand[i] = make([]int64, g.n+1), make([]int64, g.n+1)
	}
	firstSubmit, lastEnd := math.Inf(1), math.Inf(-1)

	for _, j := range run.Jobs {
		qi := index[queueOf(j)]
		q := &out.Queues[qi]
		q.Jobs++
		out.All.Jobs++
		firstSubmit = math.Min(firstSubmit, j.Submit)
		if j.Replicas*j.GPUs >= BigGangGPUs {
			big := &out.BigGangs
			big.Jobs++
			switch {
			case !math.IsNaN(j.Ended):
				big.Finished++
				bigJCT = append(bigJCT, j.Ended-j.Submit)
			case len(j.Started) > 0:
				big.Unfinished++
			}
			if len(j.Started) == 0 {
				big.NeverRan++
			} else {
				bigWait = append(bigWait, j.Started[0]-j.Submit)
			}
		}
		switch {
		case !math.IsNaN(j.Ended):
			out.All.Finished++
			q.Finished++
			jct = append(jct, j.Ended-j.Submit)
			perQueue[qi].jct = append(perQueue[qi].jct, j.Ended-j.Submit)
			lastEnd = math.Max(lastEnd, j.Ended)
		case len(j.Started) > 0:
			out.All.Unfinished++
			q.Unfinished++
		}
		if len(j.Started) == 0 {
			out.All.NeverRan++
			q.NeverRan++
		} else {
			wait = append(wait, j.Started[0]-j.Submit)
			perQueue[qi].wait = append(perQueue[qi].wait, j.Started[0]-j.Submit)
		}

		if seen := firstSeen(j); seen > 0 {
			firstPod = append(firstPod, math.Max(seen-j.Submit, 0))
		}

		out.WorkGPUSeconds += float64(j.Replicas*j.GPUs) * j.Duration
		if restarts := len(j.Started) - 1; restarts > 0 {
			out.RestartedJobs++
			out.MostRestarts = max(out.MostRestarts, restarts)
		}

		f := timeline(j, end)
		out.AllocatedGPUSeconds += f.allocated
		out.BusyGPUSeconds += f.busy
		out.PartialGPUSeconds += f.partial
		if f.partialWindows > 0 && f.longestPartial > o.PartialTolerance {
			out.PartialJobs++
		}
		out.PartialPodsAtEnd += f.partialPodsAtEnd
		out.PartialGPUsAtEnd += f.partialPodsAtEnd * j.GPUs
		for _, s := range f.segments {
			from, to := g.span(s.from, s.to)
			gpus := int64(s.pods * j.GPUs)
			addRange(allocated, from, to, gpus)
			addRange(held[qi], from, to, gpus)
			if s.working {
				addRange(busy, from, to, gpus)
			}
		}
		ended := math.Inf(1)
		if !math.IsNaN(j.Ended) {
			ended = j.Ended
		}
		from, to := g.span(j.Submit, ended)
		addRange(demand[qi], from, to, int64(j.Replicas*j.GPUs))

		for _, p := range j.Pods {
			if !p.Preempted {
				continue
			}
			out.PreemptedPods++
			if !math.IsNaN(p.Running) {
				stopped := p.Ended
				if math.IsNaN(stopped) {
					stopped = end
				}
				out.DiscardedGPUSeconds += float64(j.GPUs) * math.Max(stopped-p.Running, 0)
			}
		}
	}

	out.WholeFreeWhileBigWait, out.ScatteredFreeWhileBigWait = freeWhileBigGangsWait(run, g, end)

	out.All.JCT, out.All.Wait = StatsOf(jct), StatsOf(wait)
	out.BigGangs.JCT, out.BigGangs.Wait = StatsOf(bigJCT), StatsOf(bigWait)
	out.FirstPod = StatsOf(firstPod)
	out.JCTs = slices.Sorted(slices.Values(jct))
	for i := range out.Queues {
		out.Queues[i].JCT, out.Queues[i].Wait = StatsOf(perQueue[i].jct), StatsOf(perQueue[i].wait)
	}
	out.Makespan = math.NaN()
	if out.All.Finished > 0 {
		out.Makespan = lastEnd - firstSubmit
	}
	shares(&out, queues, g, allocated, busy, held, demand)
	out.HeldBesideIdleWaitSeconds, out.WaitSeconds = heldBesideIdle(run, &out, index, g, end)
	return out
}

// heldBesideIdle sums, over the grid, the jobs' wait while their queue held at least its deserved
// share and the cluster's free GPUs could hold the job's minimum, and all the jobs' wait.
func heldBesideIdle(run Run, out *Outcomes, index map[string]int, g grid, end float64) (held, all float64) {
	s := &out.Series
	if g.n == 0 || len(s.Allocated) != g.n {
		return 0, 0
	}
	for _, j := range run.Jobs {
		started := end
		if len(j.Started) > 0 {
			started = j.Started[0]
		}
		qi, need := index[queueOf(j)], float64(j.MinReplicas*j.GPUs)
		from, to := g.span(j.Submit, started)
		for k := from; k < to; k++ {
			all += g.dt
			free := (1 - s.Allocated[k]) * float64(out.GPUs)
			if s.Share[qi][k] >= s.Deserved[qi][k]-1e-9 && free >= need {
				held += g.dt
			}
		}
	}
	return held, all
}

// queueSpec is a queue as its deserved share is computed.
type queueSpec struct {
	Name              string
	Weight, Guarantee int64
}

// queueSpecs are the run's queues and those its jobs name, sorted by name. A queue the jobs name
// but Run.Queues lacks gets the defaults (weight 1, no guarantee), as a Queue object would.
func queueSpecs(run Run) []queueSpec {
	byName := map[string]queueSpec{}
	for _, q := range run.Queues {
		if q.Name != "" {
			byName[q.Name] = queueSpec{Name: q.Name, Weight: max(q.Weight, 1), Guarantee: max(q.Guarantee, 0)}
		}
	}
	for _, j := range run.Jobs {
		if name := queueOf(j); byName[name].Name == "" {
			byName[name] = queueSpec{Name: name, Weight: 1}
		}
	}
	out := make([]queueSpec, 0, len(byName))
	for _, q := range byName {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// queueOf is the queue a job is in: v1alpha1.DefaultQueue when it names none.
func queueOf(j Job) string {
	if j.Queue == "" {
		return v1alpha1.DefaultQueue
	}
	return j.Queue
}

// shares turns the grid's difference arrays into the series, and computes the queues' deserved
// shares and their deviations.
func shares(out *Outcomes, queues []queueSpec, g grid, allocated, busy []int64, held, demand [][]int64) {
	s := &out.Series
	s.Times = make([]float64, g.n)
	for k := range s.Times {
		s.Times[k] = g.at(k)
	}
	capacity := float64(out.GPUs)
	fraction := func(v int64) float64 {
		if capacity <= 0 {
			return 0
		}
		return float64(v) / capacity
	}
	s.Allocated, s.Busy = cumulate(allocated, g.n, fraction), cumulate(busy, g.n, fraction)
	s.Share, s.Deserved = make([][]float64, len(queues)), make([][]float64, len(queues))
	demands := make([][]int64, len(queues))
	for i := range queues {
		s.Share[i] = cumulate(held[i], g.n, fraction)
		s.Deserved[i] = make([]float64, g.n)
		demands[i] = cumulate(demand[i], g.n, func(v int64) int64 { return v })
	}
	s.Contended = make([]bool, g.n)

	var tree *quota.Tree
	if out.GPUs > 0 {
		objects := make([]*v1alpha1.Queue, 0, len(queues))
		for _, q := range queues {
			if q.Name == v1alpha1.RootQueue {
				continue
			}
			obj := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.Name}}
			obj.Spec.Weight = int32(min(q.Weight, math.MaxInt32))
			if q.Guarantee > 0 {
				obj.Spec.Guarantee = corev1.ResourceList{gpu: *resource.NewQuantity(q.Guarantee, resource.DecimalSI)}
			}
			objects = append(objects, obj)
		}
		tree = quota.NewTree(objects)
	}
	total := quota.Amounts{gpu: int64(out.GPUs)}
	deviation, share, deserved := make([]float64, len(queues)), make([]float64, len(queues)), make([]float64, len(queues))
	for k := 0; k < g.n && tree != nil; k++ {
		asked := map[string]quota.Amounts{}
		var sum int64
		for i, q := range queues {
			asked[q.Name] = quota.Amounts{gpu: demands[i][k]}
			sum += demands[i][k]
		}
		d := quota.Deserved(tree, total, asked)
		s.Contended[k] = sum >= int64(out.GPUs)
		if s.Contended[k] {
			out.ContendedSamples++
		}
		for i, q := range queues {
			s.Deserved[i][k] = fraction(d[q.Name][gpu])
			if s.Contended[k] {
				deviation[i] += math.Abs(s.Share[i][k] - s.Deserved[i][k])
				share[i] += s.Share[i][k]
				deserved[i] += s.Deserved[i][k]
			}
		}
	}

	out.All.MeanShare, out.All.MeanDeserved, out.All.ShareMAD = math.NaN(), math.NaN(), math.NaN()
	for i := range out.Queues {
		q := &out.Queues[i]
		q.MeanShare, q.MeanDeserved, q.ShareMAD = math.NaN(), math.NaN(), math.NaN()
	}
	if out.ContendedSamples == 0 {
		return
	}
	n := float64(out.ContendedSamples)
	out.All.MeanShare, out.All.MeanDeserved = 0, 0
	var mads []float64
	for i := range out.Queues {
		q := &out.Queues[i]
		q.MeanShare, q.MeanDeserved, q.ShareMAD = share[i]/n, deserved[i]/n, deviation[i]/n
		out.All.MeanShare += q.MeanShare
		out.All.MeanDeserved += q.MeanDeserved
		if q.Jobs > 0 {
			mads = append(mads, q.ShareMAD)
		}
	}
	if len(mads) > 0 {
		out.All.ShareMAD = StatsOf(mads).Mean
	}
}

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

// freeWhileBigGangsWait is the mean free GPUs on whole nodes and on partly held ones over the
// grid times at which a big gang waited (submitted, its minimum not yet running), from the nodes
// the pods were bound to.
func freeWhileBigGangsWait(run Run, g grid, end float64) (whole, scattered float64) {
	if run.Nodes <= 0 || run.NodeGPUs <= 0 || g.n == 0 {
		return math.NaN(), math.NaN()
	}
	waiting := make([]bool, g.n)
	for _, j := range run.Jobs {
		if j.Replicas*j.GPUs < BigGangGPUs {
			continue
		}
		started := end
		if len(j.Started) > 0 {
			started = j.Started[0]
		}
		from, to := g.span(j.Submit, started)
		for k := from; k < to; k++ {
			waiting[k] = true
		}
	}
	held := make([]map[string]int, g.n)
	for _, j := range run.Jobs {
		for _, p := range j.Pods {
			if p.Node == "" || math.IsNaN(p.Bound) {
				continue
			}
			ended := p.Ended
			if math.IsNaN(ended) {
				ended = end
			}
			from, to := g.span(p.Bound, ended)
			for k := from; k < to; k++ {
				if !waiting[k] {
					continue
				}
				if held[k] == nil {
					held[k] = map[string]int{}
				}
				held[k][p.Node] += j.GPUs
			}
		}
	}
	samples := 0
	for k := range g.n {
		if !waiting[k] {
			continue
		}
		samples++
		used := 0
		for _, gpus := range held[k] {
			used += min(gpus, run.NodeGPUs)
		}
		free := run.Nodes*run.NodeGPUs - used
		w := (run.Nodes - len(held[k])) * run.NodeGPUs
		whole += float64(w)
		scattered += float64(free - w)
	}
	if samples == 0 {
		return math.NaN(), math.NaN()
	}
	return whole / float64(samples), scattered / float64(samples)
}
