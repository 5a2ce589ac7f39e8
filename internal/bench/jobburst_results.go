package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// JobBurstResults are one run of the Job burst benchmark (RunJobBurst), as written to jobs.json.
type JobBurstResults struct {
	Command string `json:"command"`
	// Jobs is N: the J1 burst's Jobs, and the pods of J8's N/8 Jobs.
	Jobs  int `json:"jobs"`
	Nodes int `json:"nodes"`
	Reps  int `json:"reps"`
	// Workers and QPS are the submitting client's concurrency and rate limit.
	Workers int     `json:"workers"`
	QPS     float64 `json:"qps"`

	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	Machine    Machine   `json:"machine"`
	Kubernetes string    `json:"kubernetes"`
	Tephra     string    `json:"tephra"`

	Shapes []*JobShape   `json:"shapes"`
	Runs   []JobBurstRun `json:"runs"`

	// Dir is the run's folder: results, report and the cluster's logs.
	Dir string `json:"-"`
}

// JobBurstRun is one burst: one shape's Jobs of one kind, created at once. Times are seconds
// from the first create call.
type JobBurstRun struct {
	Kind  string `json:"kind"`
	Shape string `json:"shape"`
	Rep   int    `json:"rep"`
	Jobs  int    `json:"jobs"`
	Pods  int    `json:"pods"`
	// Seen and Bound count the pods the driver's informer saw, and saw bound.
	Seen  int `json:"seen"`
	Bound int `json:"bound"`
	// Error says why the burst did not complete.
	Error string `json:"error,omitempty"`

	// SubmittedSeconds is until the last create call was answered.
	SubmittedSeconds float64 `json:"submittedSeconds"`
	// AllPodsExistSeconds is until the informer had seen every pod, AllPodsBoundSeconds until it
	// had seen every pod bound.
	AllPodsExistSeconds float64 `json:"allPodsExistSeconds"`
	AllPodsBoundSeconds float64 `json:"allPodsBoundSeconds"`
	// FirstPodSeconds is, per Job, from its own create call to the first of its pods seen.
	FirstPodSeconds *Quantiles `json:"firstPodSeconds,omitempty"`
	// JobsWithPods counts the Jobs of which a pod was seen.
	JobsWithPods int `json:"jobsWithPods"`
	// ControllerCPUSeconds is the user+system CPU time of the process whose controller makes the
	// pods (tephra-controllers, or kube-controller-manager) from the first create call until the
	// figures were read, half a second after the last bind.
	ControllerCPUSeconds *float64 `json:"controllerCPUSeconds,omitempty"`
	// APIServerCPUSeconds and ControlPlaneCPUSeconds are the same for the kube-apiserver, and
	// for every process of the control plane together (the apiserver, etcd, both controller
	// processes, the scheduler and kwok).
	APIServerCPUSeconds    *float64 `json:"apiserverCPUSeconds,omitempty"`
	ControlPlaneCPUSeconds *float64 `json:"controlPlaneCPUSeconds,omitempty"`
	// MutatingRequestsPerPod is the apiserver's mutating requests over the same span, per pod,
	// the Jobs' creation included.
	MutatingRequestsPerPod *float64 `json:"mutatingRequestsPerPod,omitempty"`
	// WritesPerPodByResource splits MutatingRequestsPerPod by resource ("pods/binding", "events"):
	// where a kind's writes go.
	WritesPerPodByResource map[string]float64 `json:"writesPerPodByResource,omitempty"`
	// EmptySeconds is emptying the namespace after the burst, for tuning the harness.
	EmptySeconds float64 `json:"emptySeconds"`
}

// complete says whether every pod was seen and bound; if not, why.
func (r JobBurstRun) complete() (bool, string) {
	switch {
	case r.Error != "":
		return false, r.Error
	case r.Seen < r.Pods:
		return false, fmt.Sprintf("%d of %d pods created", r.Seen, r.Pods)
	case r.Bound < r.Pods:
		return false, fmt.Sprintf("%d of %d pods bound", r.Bound, r.Pods)
	}
	return true, ""
}

// measureBurst fills a run's times from when each Job's create call was made (calls, by the
// index of the Job's name), when the last was answered, and what the informer saw.
func measureBurst(run *JobBurstRun, sh *JobShape, calls []time.Time, answered time.Time, o burstObservation) {
	// A Job whose create call was never made (the submission failed first) has no call time.
	var first time.Time
	for _, t := range calls {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() {
		return
	}
	since := func(t time.Time) float64 { return t.Sub(first).Seconds() }
	run.Seen, run.Bound = o.seen, o.bound
	run.SubmittedSeconds = since(answered)
	if o.seen >= o.want {
		run.AllPodsExistSeconds = since(o.lastSeen)
	}
	if o.bound >= o.want {
		run.AllPodsBoundSeconds = since(o.lastBound)
	}
	var firstPod []float64
	for i, call := range calls {
		if seen, ok := o.firstPod[sh.jobName(i)]; ok && !call.IsZero() {
			firstPod = append(firstPod, seen.Sub(call).Seconds())
		}
	}
	run.JobsWithPods = len(firstPod)
	run.FirstPodSeconds = quantiles(firstPod)
}

// Failures lists the bursts that did not complete.
func (res *JobBurstResults) Failures() []string {
	var out []string
	for _, r := range res.Runs {
		if ok, why := r.complete(); !ok {
			out = append(out, fmt.Sprintf("%s %s (rep %d): %s", r.Kind, r.Shape, r.Rep, why))
		}
	}
	return out
}

// burstSummary is one kind's figures in one shape: the median over its completed repetitions.
// Figures that do not apply are NaN.
type burstSummary struct {
	completed, failed                  int
	submitted, allExist, allBound      float64
	firstPodP50, firstPodP99           float64
	controllerCPU, mutatingRequestsPod float64
	apiserverCPU, controlPlaneCPU      float64
}

func (res *JobBurstResults) summarize(kind, shape string) burstSummary {
	var s burstSummary
	var submitted, exist, bound, p50, p99, cpu, writes, apiCPU, allCPU []float64
	for _, r := range res.runs(kind, shape) {
		if ok, _ := r.complete(); !ok {
			s.failed++
			continue
		}
		s.completed++
		submitted = append(submitted, r.SubmittedSeconds)
		exist = append(exist, r.AllPodsExistSeconds)
		bound = append(bound, r.AllPodsBoundSeconds)
		if r.FirstPodSeconds != nil {
			p50 = append(p50, r.FirstPodSeconds.P50)
			p99 = append(p99, r.FirstPodSeconds.P99)
		}
		if r.ControllerCPUSeconds != nil {
			cpu = append(cpu, *r.ControllerCPUSeconds)
		}
		if r.MutatingRequestsPerPod != nil {
			writes = append(writes, *r.MutatingRequestsPerPod)
		}
		if r.APIServerCPUSeconds != nil && r.ControlPlaneCPUSeconds != nil {
			apiCPU = append(apiCPU, *r.APIServerCPUSeconds)
			allCPU = append(allCPU, *r.ControlPlaneCPUSeconds)
		}
	}
	s.submitted, s.allExist, s.allBound = median(submitted), median(exist), median(bound)
	s.firstPodP50, s.firstPodP99 = median(p50), median(p99)
	s.controllerCPU, s.mutatingRequestsPod = median(cpu), median(writes)
	s.apiserverCPU, s.controlPlaneCPU = median(apiCPU), median(allCPU)
	return s
}

// runs are the bursts of a kind and shape, in the order they ran.
func (res *JobBurstResults) runs(kind, shape string) []JobBurstRun {
	var out []JobBurstRun
	for _, r := range res.Runs {
		if r.Kind == kind && r.Shape == shape {
			out = append(out, r)
		}
	}
	return out
}

// burstGoalFactor is issue #61's goal: Tephra's time until every pod exists at most this many
// times the batch/v1 Job controller's.
const burstGoalFactor = 1.0

// goals checks, for each shape, Tephra's time until every pod exists against batch/v1's.
func (res *JobBurstResults) goals() []goal {
	var list []goal
	for _, sh := range res.Shapes {
		tephra, batch := res.summarize(TephraJobKind, sh.Name), res.summarize(BatchJobKind, sh.Name)
		text := fmt.Sprintf("%s: Tephra's time until every pod exists at most %.1f × batch/v1's (Tephra / batch/v1)", sh.Name, burstGoalFactor)
		list = append(list, atMost(text, tephra.allExist, batch.allExist, burstGoalFactor))
	}
	return list
}

// optional is v as a pointer, nil if v is NaN or err is set: a figure that could not be read.
func optional(v float64, err error) *float64 {
	if err != nil || math.IsNaN(v) {
		return nil
	}
	return &v
}

const jobBurstJSON = "jobs.json"

// WriteJSON writes the results, indented, to path.
func (res *JobBurstResults) WriteJSON(path string) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadJobBurstResults reads a jobs.json.
func ReadJobBurstResults(path string) (*JobBurstResults, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res := &JobBurstResults{}
	if err := json.Unmarshal(data, res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// readJobBurst reads the Job burst published beside the other benchmarks' results, if any.
func readJobBurst(docsDir string) (*JobBurstResults, error) {
	res, err := ReadJobBurstResults(filepath.Join(docsDir, "benchmarks", jobBurstJSON))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return res, err
}

// PublishJobBurst writes the results to docsDir/benchmarks/jobs.json and renders
// docsDir/benchmarks.md again with them beside the other benchmarks' published results.
func PublishJobBurst(docsDir string, res *JobBurstResults) error {
	assets := filepath.Join(docsDir, "benchmarks")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return err
	}
	if err := res.WriteJSON(filepath.Join(assets, jobBurstJSON)); err != nil {
		return err
	}
	matrix, sweep, err := readPublishedResults(assets)
	if err != nil {
		return err
	}
	upstream, err := readUpstream(docsDir)
	if err != nil {
		return err
	}
	return writeReport(docsDir, matrix, sweep, upstream)
}
