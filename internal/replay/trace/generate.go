package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// GenerateOptions say what trace Generate makes. The zero value of a field takes its default.
type GenerateOptions struct {
	// Seed makes the trace: the same options give the same trace.
	Seed uint64
	// Span is how long jobs are submitted for, in seconds (default 86400, a day).
	Span float64
	// GPUs is the capacity of the cluster that Load refers to (default 64).
	GPUs int
	// Load is the GPU load offered to that cluster: the jobs' GPU time over GPUs*Span
	// (default 0.8). Summary.Load measures it.
	Load float64
	// Queues are the queues jobs go to (default team-a, team-b, team-c); each must be a
	// lowercase DNS-1123 label.
	Queues []string
	// MeanDuration is the mean of the jobs' durations, in seconds (default 1800).
	MeanDuration float64
	// MaxGPUsPerPod is the most GPUs of a pod (default 8, the GPUs of a node).
	MaxGPUsPerPod int
	// DatasetsPerQueue, if more than 0, makes every job read one of its queue's that many
	// datasets, the first the most often (each next one half as often), as teams reuse a few
	// datasets; each dataset has a size of DatasetGB gigabytes at most (default 500), drawn once.
	// The draws are apart from the jobs', so that the rest of the trace is the same with or
	// without datasets.
	DatasetsPerQueue int
	DatasetGB        float64
}

// Defaults of GenerateOptions.
const (
	DefaultSpan         = 86400
	DefaultGPUs         = 64
	DefaultLoad         = 0.8
	DefaultMeanDuration = 1800
)

// DefaultQueues are the queues of GenerateOptions by default.
var DefaultQueues = []string{"team-a", "team-b", "team-c"}

// jobClass is a kind of job of the generated mix: weight is its share of the jobs; a job of
// the class has a number of pods and of GPUs per pod drawn uniformly from pods and gpusPerPod.
type jobClass struct {
	weight           float64
	pods, gpusPerPod []int
}

// jobMix is the shapes of generated jobs, like those of GPU clusters' traces (Philly, Alibaba's):
// most jobs are small, one pod of a GPU or two, and a few large gangs hold much of the GPU
// time. A gang's pods are half or whole 8-GPU nodes, as distributed training asks.
var jobMix = []jobClass{
	{weight: 0.70, pods: []int{1}, gpusPerPod: []int{1, 2}},
	{weight: 0.25, pods: []int{2, 3, 4}, gpusPerPod: []int{4, 8}},
	{weight: 0.05, pods: []int{8, 9, 10, 11, 12, 13, 14, 15, 16}, gpusPerPod: []int{8}},
}

// Shape of everything else about generated jobs.
const (
	// elasticShare of multi-pod jobs are elastic: they start with half their pods (rounded
	// up), which lets a scheduler that grows jobs show it.
	elasticShare = 0.1
	// durationSigma is the spread of the log-normal durations: the 90th percentile is about
	// 3.6 times the median, as in training clusters where short debugging runs outnumber long
	// trainings.
	durationSigma = 1.0
	// maxDurationFactor caps a duration at this many times the mean, so that one run of a
	// week does not decide a day's replay; minDuration floors it at a minute (or half the mean,
	// if that is less), the shortest job worth a scheduler's while.
	maxDurationFactor = 8
	minDuration       = 60
	// Each queue alternates between busy and quiet periods of exponential length (these
	// means, in seconds); a busy queue gets busyWeight times the share of the jobs of a quiet
	// one. Real teams submit in bursts, and bursts are what fair sharing between queues is for.
	meanBusy, meanQuiet = 3600, 3 * 3600
	busyWeight          = 5
)

// Generate makes a synthetic trace of the given load, deterministic given opts. Jobs arrive
// as a Poisson process over [0, Span), at the rate that makes their expected GPU time
// Load*GPUs*Span; each job draws:
//
//   - its shape from jobMix: 70% one pod of 1 or 2 GPUs, 25% gangs of 2 to 4 pods of 4 or 8
//     GPUs, 5% gangs of 8 to 16 pods of 8 GPUs; GPUs per pod at most MaxGPUsPerPod, and pods
//     cut so that no job asks for more than half the cluster's GPUs (or one GPU);
//   - elastic (MinReplicas half of Replicas, rounded up) for 10% of the multi-pod jobs, a
//     gang (MinReplicas = Replicas) otherwise;
//   - a log-normal duration, capped at 8 times MeanDuration and floored at a minute, whose
//     distribution is set so that the mean after capping is MeanDuration; whole seconds;
//   - a queue, from queues that alternate between busy and quiet periods (see meanBusy).
//
// Pods ask for 4 cores and 16Gi per GPU (a core and DefaultMemory without GPUs). Submit is
// rounded to milliseconds. Jobs are named job-00001, job-00002... in order of submission.
func Generate(opts GenerateOptions) []Job {
	opts = opts.withDefaults()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x7e9a_5eed))
	limit := max(1, opts.GPUs/2)
	shape := func(pods, perPod int) (int, int) { return capShape(pods, perPod, opts.MaxGPUsPerPod, limit) }
	durations := newDurations(opts.MeanDuration)
	rate := opts.Load * float64(opts.GPUs) / (meanGPUs(shape) * opts.MeanDuration)
	queues := newBurstyQueues(opts.Queues, rng)

	var jobs []Job
	for t := rng.ExpFloat64() / rate; t < opts.Span; t += rng.ExpFloat64() / rate {
		c := pickClass(rng)
		pods, perPod := shape(c.pods[rng.IntN(len(c.pods))], c.gpusPerPod[rng.IntN(len(c.gpusPerPod))])
		j := Job{
			Name:        fmt.Sprintf("job-%05d", len(jobs)+1),
			Submit:      math.Round(t*1000) / 1000,
			Duration:    durations.draw(rng),
			Queue:       queues.pick(t, rng),
			Replicas:    pods,
			MinReplicas: pods,
			GPUs:        perPod,
			MilliCPU:    max(DefaultMilliCPU, int64(perPod)*DefaultCPUPerGPU*1000),
			Memory:      DefaultMemory,
		}
		if perPod > 0 {
			j.Memory = fmt.Sprintf("%dGi", 16*perPod)
		}
		if pods > 1 && rng.Float64() < elasticShare {
			j.MinReplicas = (pods + 1) / 2
		}
		jobs = append(jobs, j)
	}
	if opts.DatasetsPerQueue > 0 {
		assignDatasets(jobs, opts)
	}
	return jobs
}

// DefaultDatasetGB bounds the size of a generated dataset.
const DefaultDatasetGB = 500

// assignDatasets gives every job one of its queue's datasets (GenerateOptions.DatasetsPerQueue),
// from a random stream of its own.
func assignDatasets(jobs []Job, opts GenerateOptions) {
	rng := rand.New(rand.NewPCG(opts.Seed, 0xda7a_5e75))
	maxGB := opts.DatasetGB
	if maxGB <= 0 {
		maxGB = DefaultDatasetGB
	}
	sizes := map[string]float64{}
	for i := range jobs {
		// The k-th dataset is half as likely as the one before it.
		k := 0
		for k < opts.DatasetsPerQueue-1 && rng.Float64() < 0.5 {
			k++
		}
		name := fmt.Sprintf("%s-data-%d", jobs[i].Queue, k)
		if _, ok := sizes[name]; !ok {
			sizes[name] = math.Round(maxGB * (0.25 + 0.75*rng.Float64()))
		}
		jobs[i].Dataset, jobs[i].DatasetGB = name, sizes[name]
	}
}

func (o GenerateOptions) withDefaults() GenerateOptions {
	if o.Span <= 0 {
		o.Span = DefaultSpan
	}
	if o.GPUs <= 0 {
		o.GPUs = DefaultGPUs
	}
	if o.Load <= 0 {
		o.Load = DefaultLoad
	}
	if len(o.Queues) == 0 {
		o.Queues = slices.Clone(DefaultQueues)
	}
	if o.MeanDuration <= 0 {
		o.MeanDuration = DefaultMeanDuration
	}
	if o.MaxGPUsPerPod <= 0 {
		o.MaxGPUsPerPod = DefaultMaxGPUsPerPod
	}
	return o
}

// capShape fits a job of pods pods of perPod GPUs to pods of at most maxPerPod GPUs and to
// limit GPUs in all: fewer pods first, since a smaller gang is still the same kind of job.
func capShape(pods, perPod, maxPerPod, limit int) (int, int) {
	perPod = min(perPod, maxPerPod)
	if pods*perPod > limit {
		pods = max(1, limit/perPod)
		perPod = min(perPod, limit)
	}
	return pods, perPod
}

// meanGPUs is the expected GPUs of a job of jobMix, after shape: the rate of arrivals that
// gives the load depends on it.
func meanGPUs(shape func(pods, perPod int) (int, int)) float64 {
	var total, weights float64
	for _, c := range jobMix {
		weights += c.weight
		each := c.weight / float64(len(c.pods)*len(c.gpusPerPod))
		for _, pods := range c.pods {
			for _, perPod := range c.gpusPerPod {
				p, g := shape(pods, perPod)
				total += each * float64(p*g)
			}
		}
	}
	return total / weights
}

func pickClass(rng *rand.Rand) jobClass {
	var weights float64
	for _, c := range jobMix {
		weights += c.weight
	}
	x := rng.Float64() * weights
	for _, c := range jobMix {
		if x < c.weight {
			return c
		}
		x -= c.weight
	}
	return jobMix[len(jobMix)-1]
}

// durations draws log-normal durations clamped to [lo, hi], of parameter mu.
type durations struct {
	mu, lo, hi float64
}

// newDurations finds the log-normal whose durations, once clamped, have the given mean:
// clamping moves the mean (the cap lowers it more than the floor raises it), and the load
// depends on the mean.
func newDurations(mean float64) durations {
	d := durations{lo: min(minDuration, mean/2), hi: maxDurationFactor * mean}
	low, high := math.Log(d.lo)-10*durationSigma, math.Log(d.hi)+10*durationSigma
	// The clamped mean grows with mu, from lo to hi; halve the interval until it is found.
	for range 200 {
		d.mu = (low + high) / 2
		if d.mean() < mean {
			low = d.mu
		} else {
			high = d.mu
		}
	}
	return d
}

// mean is the expected clamped duration: lo below lo, hi above hi, the log-normal's partial
// expectation between.
func (d durations) mean() float64 {
	s := durationSigma
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	lnLo, lnHi := math.Log(d.lo), math.Log(d.hi)
	between := math.Exp(d.mu+s*s/2) * (phi((lnHi-d.mu-s*s)/s) - phi((lnLo-d.mu-s*s)/s))
	return d.lo*phi((lnLo-d.mu)/s) + between + d.hi*(1-phi((lnHi-d.mu)/s))
}

func (d durations) draw(rng *rand.Rand) float64 {
	x := math.Exp(d.mu + durationSigma*rng.NormFloat64())
	return max(1, math.Round(min(max(x, d.lo), d.hi)))
}

// burstyQueues picks the queues of jobs: each queue is busy or quiet until a time, then
// switches.
type burstyQueues struct {
	names []string
	busy  []bool
	until []float64
}

func newBurstyQueues(names []string, rng *rand.Rand) *burstyQueues {
	q := &burstyQueues{names: names, busy: make([]bool, len(names)), until: make([]float64, len(names))}
	for i := range names {
		// Busy as often as a queue is busy at a random moment, so that the trace's start is
		// not special.
		q.busy[i] = rng.Float64() < meanBusy/(meanBusy+meanQuiet)
		q.until[i] = q.period(i, rng)
	}
	return q
}

// period draws how long queue i stays in its state.
func (q *burstyQueues) period(i int, rng *rand.Rand) float64 {
	if q.busy[i] {
		return rng.ExpFloat64() * meanBusy
	}
	return rng.ExpFloat64() * meanQuiet
}

// pick is the queue of a job submitted at t, not before the last job's.
func (q *burstyQueues) pick(t float64, rng *rand.Rand) string {
	var weights float64
	for i := range q.names {
		for q.until[i] <= t {
			q.busy[i] = !q.busy[i]
			q.until[i] += q.period(i, rng)
		}
		weights += q.weight(i)
	}
	x := rng.Float64() * weights
	for i := range q.names {
		if x < q.weight(i) {
			return q.names[i]
		}
		x -= q.weight(i)
	}
	return q.names[len(q.names)-1]
}

func (q *burstyQueues) weight(i int) float64 {
	if q.busy[i] {
		return busyWeight
	}
	return 1
}
