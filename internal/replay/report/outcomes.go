package report

import (
	"math"
	"slices"
)

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
	// ReceivedGPUSeconds and DeservedGPUSeconds integrate the GPUs the queue held and deserved
	// over the contended grid times (each standing for its cell of the grid): what a team got
	// against what it was promised while the cluster could not give everyone what they asked.
	// Zero when no grid time was contended. For the whole run, the queues' sums.
	ReceivedGPUSeconds, DeservedGPUSeconds float64
	// ToShare is how long the queue took to reach its deserved share once it was owed room
	// (toshare.go); for the whole run, over every queue's episodes.
	ToShare ToShare
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

	// PreemptedPods counts the pods the scheduler evicted; DiscardedGPUSeconds is the work
	// preemptions threw away: what the jobs whose minimum they broke had worked since they last
	// started, every running pod of the job counted (jobFigures.discarded).
	PreemptedPods       int
	DiscardedGPUSeconds float64
	// WorkGPUSeconds is the trace's work, Σ Replicas × GPUs × Duration over every job: what
	// DiscardedGPUSeconds is a part of.
	WorkGPUSeconds float64
	// RestartedJobs counts the jobs whose minimum came to run more than once (a preemption made it
	// start again), and MostRestarts is the most times one job started again.
	RestartedJobs, MostRestarts int

	// AgainstB1 splits the finished jobs' JCT against B1's, job by job, between the jobs restarted
	// by a preemption and the others; nil for B1 and when the comparison has no B1 run.
	AgainstB1 *JCTAgainst
	// jct is each finished job's JCT, and restarted says which jobs' minimum started more than
	// once: what AgainstB1 compares.
	jct       map[string]float64
	restarted map[string]bool

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

	// DataJobs counts the jobs that read a dataset, PulledData those of them whose starts waited
	// to pull it, and Transfer is the trace seconds each of those waited (Job.Transfer).
	DataJobs, PulledData int
	Transfer             Stats

	// RoomToBind is, for each pod asking GPUs that was bound and whose Seen was recorded (more
	// than 0) and came before its Bound, Bound − t, t the first instant with Seen ≤ t < Bound at
	// which
	//   - free room fitted it and the rest of its gang: the nodes' free GPUs took, a pod on one
	//     node, as many pods of its GPUs as its job's minimum less the job's pods holding at t,
	//     and at least this one (a node has Run.NodeGPUs; what it held is from the pods' Node
	//     and their Bound ≤ t < Ended, Ended NaN holding on), and
	//   - its queue's share allowed them: the GPUs its queue's pods held at t plus theirs were at
	//     most the queue's deserved GPUs at t, or the cluster was not contended at t (the queues
	//     asked less than the cluster: then nobody's share holds anyone back). Deserved GPUs and
	//     contention are the queue shares', computed exactly at the event times (submits, ends,
	//     binds) rather than on the grid.
	// It is the part of the wait a scheduler answers for once neither a full cluster nor the
	// pod's share held it back. The room may have gone to another pod after t and the pod counts
	// on from t all the same. A gang's pod cannot bind before room for its whole minimum comes,
	// under any gang scheduler, so its room is the gang's. Pods for which no such t came are not in it but
	// in BoundWithoutRoom. N is 0 for a run without the nodes' record (Run.Nodes, NodeGPUs).
	RoomToBind Stats
	// BoundWithoutRoom counts the pods RoomToBind would measure for which no such t came before
	// their bind: the room came at the very instant of the bind (the victims of a preemption
	// seen gone together with the bind), or not at all by the definition: bound over the queue's
	// share while the cluster was contended (as B0 and B1, which know no shares, do), or to a
	// node the record has full.
	BoundWithoutRoom int

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

// Compare analyses each run with these options, in the runs' order, and each against B1's run
// when there is one.
func (o Options) Compare(runs []Run) []Outcomes {
	out := make([]Outcomes, len(runs))
	for i, run := range runs {
		out[i] = o.Analyze(run)
	}
	for i := range out {
		if out[i].Config == againstConfig {
			for j := range out {
				if j != i {
					out[j].AgainstB1 = jctAgainst(&out[j], &out[i])
				}
			}
		}
	}
	return out
}

// againstConfig is the run every other is compared with job by job.
const againstConfig = "B1"

// JCTAgainst is, over the jobs that finished in both of two runs, the sum of each job's JCT less
// its JCT in the other run, in seconds, for the jobs this run restarted by a preemption and for
// the others, with how many of each. A mean JCT above the other's comes from the work reclaim threw
// away (and the wait to start again) when Restarted carries it, from order and placement when
// Others does.
type JCTAgainst struct {
	Restarted, Others        float64
	RestartedJobs, OtherJobs int
}

func jctAgainst(o, base *Outcomes) *JCTAgainst {
	out := &JCTAgainst{}
	for name, jct := range o.jct {
		was, ok := base.jct[name]
		if !ok {
			continue
		}
		if o.restarted[name] {
			out.Restarted += jct - was
			out.RestartedJobs++
		} else {
			out.Others += jct - was
			out.OtherJobs++
		}
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
	var all, big tally
	perQueue := make([]tally, len(queues))
	for i, q := range queues {
		perQueue[i].s = Summary{Queue: q.Name, Weight: q.Weight, Guarantee: q.Guarantee}
	}
	var firstPod, transfers []float64
	g := newGrid(end, o.Samples)
	onGrid := newGPUGrid(g, len(queues))
	firstSubmit, lastEnd := math.Inf(1), math.Inf(-1)

	out.jct, out.restarted = map[string]float64{}, map[string]bool{}
	for _, j := range run.Jobs {
		qi := index[queueOf(j)]
		all.add(j)
		if !math.IsNaN(j.Ended) {
			out.jct[j.Name] = j.Ended - j.Submit
		}
		perQueue[qi].add(j)
		if j.Replicas*j.GPUs >= BigGangGPUs {
			big.add(j)
		}
		firstSubmit = math.Min(firstSubmit, j.Submit)
		if !math.IsNaN(j.Ended) {
			lastEnd = math.Max(lastEnd, j.Ended)
		}
		if seen := firstSeen(j); seen > 0 {
			firstPod = append(firstPod, math.Max(seen-j.Submit, 0))
		}
		if j.Dataset != "" {
			out.DataJobs++
			if j.Transfer > 0 {
				out.PulledData++
				transfers = append(transfers, j.Transfer)
			}
		}

		f := timeline(j, end)
		out.addPreemptions(j, f)
		out.addHeldGPUs(j, f)
		onGrid.add(j, qi, f.segments)
	}

	out.All, out.BigGangs = all.summary(), big.summary()
	out.Queues = make([]Summary, len(queues))
	for i := range perQueue {
		out.Queues[i] = perQueue[i].summary()
	}
	out.FirstPod = StatsOf(firstPod)
	out.Transfer = StatsOf(transfers)
	out.JCTs = slices.Sorted(slices.Values(all.jct))
	out.WholeFreeWhileBigWait, out.ScatteredFreeWhileBigWait = freeWhileBigGangsWait(run, g, end)
	out.Makespan = math.NaN()
	if out.All.Finished > 0 {
		out.Makespan = lastEnd - firstSubmit
	}
	shares(&out, queues, g, onGrid.allocated, onGrid.busy, onGrid.held, onGrid.demand)
	var toShare []ToShare
	out.All.ToShare, toShare = toShareOf(out.Series, out.End, out.GPUs)
	for i := range out.Queues {
		out.Queues[i].ToShare = toShare[i]
	}
	out.HeldBesideIdleWaitSeconds, out.WaitSeconds = heldBesideIdle(run, &out, index, g, end)
	out.RoomToBind, out.BoundWithoutRoom = roomToBind(run, queues, index)
	return out
}

// addPreemptions counts a job's work, its restarts, its preempted pods and the work they threw
// away (the discarded work is reported as a part of the whole).
func (o *Outcomes) addPreemptions(j Job, f jobFigures) {
	o.WorkGPUSeconds += float64(j.Replicas*j.GPUs) * j.Duration
	if restarts := len(j.Started) - 1; restarts > 0 {
		o.restarted[j.Name] = true
		o.RestartedJobs++
		o.MostRestarts = max(o.MostRestarts, restarts)
	}
	for _, p := range j.Pods {
		if p.Preempted {
			o.PreemptedPods++
		}
	}
	o.DiscardedGPUSeconds += f.discarded
}

// addHeldGPUs adds a job's GPU-seconds held, busy and partial, and its pods partial at the end.
// The job counts as a partial-gang job only when a partial gang of it lasted longer than
// Options.PartialTolerance: shorter windows are a gang being bound.
func (o *Outcomes) addHeldGPUs(j Job, f jobFigures) {
	o.AllocatedGPUSeconds += f.allocated
	o.BusyGPUSeconds += f.busy
	o.PartialGPUSeconds += f.partial
	if f.partialWindows > 0 && f.longestPartial > o.Options.PartialTolerance {
		o.PartialJobs++
	}
	o.PartialPodsAtEnd += f.partialPodsAtEnd
	o.PartialGPUsAtEnd += f.partialPodsAtEnd * j.GPUs
}

// gpuGrid gathers, as difference arrays over the grid, the GPUs held (by every pod, by the pods
// of working jobs, and by each queue's pods) and the GPUs each queue's jobs asked for: what
// shares turns into the series. Difference arrays make adding a stretch of time cost two cells,
// whatever its length.
type gpuGrid struct {
	g               grid
	allocated, busy []int64
	held, demand    [][]int64
}

func newGPUGrid(g grid, queues int) gpuGrid {
	d := gpuGrid{g: g, allocated: make([]int64, g.n+1), busy: make([]int64, g.n+1)}
	d.held, d.demand = make([][]int64, queues), make([][]int64, queues)
	for i := range queues {
		d.held[i], d.demand[i] = make([]int64, g.n+1), make([]int64, g.n+1)
	}
	return d
}

// add puts a job of queue qi on the grid: the GPUs its pods held over its segments, and the GPUs
// it asked for from its submit until it ended (until the run's end if it never did).
func (d *gpuGrid) add(j Job, qi int, segments []segment) {
	for _, s := range segments {
		from, to := d.g.span(s.from, s.to)
		gpus := int64(s.pods * j.GPUs)
		addRange(d.allocated, from, to, gpus)
		addRange(d.held[qi], from, to, gpus)
		if s.working {
			addRange(d.busy, from, to, gpus)
		}
	}
	ended := math.Inf(1)
	if !math.IsNaN(j.Ended) {
		ended = j.Ended
	}
	from, to := d.g.span(j.Submit, ended)
	addRange(d.demand[qi], from, to, int64(j.Replicas*j.GPUs))
}

// tally gathers a set of jobs into a Summary.
type tally struct {
	s         Summary
	jct, wait []float64
}

// add counts a job: finished, started and unfinished, or never ran, with its JCT and wait.
func (t *tally) add(j Job) {
	t.s.Jobs++
	switch {
	case !math.IsNaN(j.Ended):
		t.s.Finished++
		t.jct = append(t.jct, j.Ended-j.Submit)
	case len(j.Started) > 0:
		t.s.Unfinished++
	}
	if len(j.Started) == 0 {
		t.s.NeverRan++
	} else {
		t.wait = append(t.wait, j.Started[0]-j.Submit)
	}
}

// summary is the Summary of the jobs added; the shares are left to shares.
func (t *tally) summary() Summary {
	s := t.s
	s.JCT, s.Wait = StatsOf(t.jct), StatsOf(t.wait)
	return s
}
