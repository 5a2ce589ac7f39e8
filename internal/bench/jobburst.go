package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// The Job burst benchmark (issue #61, `make bench-jobs`, and `make bench` after the matrix):
// bursts of Jobs created at once on one control plane with Tephra installed as `make up`
// installs it, once as Tephra Jobs and once as batch/v1 Jobs, timing how soon every pod exists
// and is bound. jobburst_workload.go builds the Jobs, jobburst_cluster.go runs the control plane,
// jobburst_recorder.go watches the pods, jobburst_results.go and jobburst_report.go hold and
// render the figures.

// JobBurstSettings say what a Job burst run does.
type JobBurstSettings struct {
	// Jobs is N: J1 creates N one-pod Jobs, J8 N/8 Jobs of 8 pods (default 1000, the issue's).
	Jobs int
	// Reps is how many times each shape runs with each kind (default 3).
	Reps int
	// OutDir receives the results, the report and the cluster's logs. Required.
	OutDir string
	// DocsDir, if set, also receives the results (DocsDir/benchmarks/jobs.json) and the report
	// (DocsDir/benchmarks.md, beside the other benchmarks' published results).
	DocsDir string
	// Keep keeps the cluster's etcd data and certificates; logs are always kept.
	Keep bool
	// Log receives progress messages and Progress the progress bars; nothing is printed if nil.
	Log, Progress io.Writer
}

// Default sizes of a Job burst run, and the submitting client's concurrency and rate limit, high
// enough that neither limits the creation on a machine of 2 cores.
const (
	DefaultJobBurstJobs    = 1000
	DefaultJobBurstReps    = 3
	DefaultJobBurstWorkers = 32
	DefaultJobBurstQPS     = 5000
)

// warmUpJobs is the size of the warm-up burst of each kind: one Job of J8.
const warmUpJobs = 8

func (s JobBurstSettings) withDefaults() (JobBurstSettings, error) {
	if s.Jobs == 0 {
		s.Jobs = DefaultJobBurstJobs
	}
	if s.Reps == 0 {
		s.Reps = DefaultJobBurstReps
	}
	if s.Log == nil {
		s.Log = io.Discard
	}
	switch {
	case s.OutDir == "":
		return s, fmt.Errorf("bench: JobBurstSettings.OutDir is required")
	case s.Jobs < 8:
		return s, fmt.Errorf("jobs-n %d: want at least 8, one Job of J8", s.Jobs)
	case s.Reps < 1:
		return s, fmt.Errorf("%d repetitions: want at least 1", s.Reps)
	}
	return s, nil
}

// Command is the command line that repeats a run with these settings.
func (s JobBurstSettings) Command() string {
	var flags []string
	if s.Jobs != DefaultJobBurstJobs {
		flags = append(flags, fmt.Sprintf("--jobs-n=%d", s.Jobs))
	}
	if s.Reps != DefaultJobBurstReps {
		flags = append(flags, fmt.Sprintf("--jobs-reps=%d", s.Reps))
	}
	if len(flags) == 0 {
		return "make bench-jobs"
	}
	return fmt.Sprintf("make bench-jobs BENCH_JOBS_FLAGS='%s'", strings.Join(flags, " "))
}

// RunJobBurst runs the Job burst benchmark: for each repetition and shape, a burst of each kind,
// the order rotated (runOrder), all on one control plane. Every burst goes into the results,
// failed or not (Failures); err is set when the benchmark could not run at all.
func RunJobBurst(ctx context.Context, s JobBurstSettings) (*JobBurstResults, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	root, outDir, err := repoAndOutDir(s.OutDir)
	if err != nil {
		return nil, err
	}
	s.OutDir = outDir
	res := &JobBurstResults{
		Command: s.Command(), Jobs: s.Jobs, Nodes: kwokNodesFor(s.Jobs), Reps: s.Reps,
		Workers: DefaultJobBurstWorkers, QPS: DefaultJobBurstQPS, Shapes: JobShapes,
		Started: time.Now(), Machine: thisMachine(), Tephra: localcluster.TephraVersion(ctx, root),
	}
	res.Dir = filepath.Join(s.OutDir, "jobs-"+res.Started.Format("20060102-150405"))
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return nil, err
	}
	bins, err := localcluster.Build(ctx, root, s.Log)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(s.Log, "Job burst: %s; %s; the cluster's logs under %s\n", res.Command, res.describe(), res.Dir)
	start := time.Now()
	cluster, err := startBurstCluster(ctx, root, bins, filepath.Join(res.Dir, "cluster"), res.Nodes, float32(res.QPS), io.Discard)
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	defer cluster.shutdown(s.Keep)
	if v, err := cluster.Client.Discovery().ServerVersion(); err == nil {
		res.Kubernetes = v.GitVersion
	}
	fmt.Fprintf(s.Log, "control plane and %d nodes ready in %.1fs\n", res.Nodes, time.Since(start).Seconds())

	d := &burstDriver{settings: s, cluster: cluster, workers: res.Workers}
	if err := d.warmUp(ctx); err != nil {
		return res, err
	}
	for rep := 1; rep <= s.Reps; rep++ {
		for si, sh := range res.Shapes {
			for _, i := range runOrder(len(jobKinds), rep-1+si) {
				run := d.runOne(ctx, jobKinds[i], sh, rep, s.Jobs)
				res.Runs = append(res.Runs, run)
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
			}
		}
	}
	res.Finished = time.Now()
	fmt.Fprintf(s.Log, "\nJob burst done in %v\n", res.Finished.Sub(res.Started).Round(time.Second))
	if err := res.WriteJSON(filepath.Join(res.Dir, jobBurstJSON)); err != nil {
		return res, err
	}
	return res, os.WriteFile(filepath.Join(res.Dir, "benchmarks.md"), []byte(jobBurstSection(res)), 0o644)
}

// burstDriver runs the bursts on the cluster.
type burstDriver struct {
	settings JobBurstSettings
	cluster  *burstCluster
	workers  int
}

func (d *burstDriver) logf(format string, args ...any) {
	fmt.Fprintf(d.settings.Log, format+"\n", args...)
}

// warmUp runs one small burst of each kind first, so that neither kind's first measured burst
// pays for what a running cluster has long done: the apiserver's first requests of each
// resource, the controllers' and the scheduler's first work on each kind.
func (d *burstDriver) warmUp(ctx context.Context) error {
	gang := JobShapes[len(JobShapes)-1]
	for _, kind := range jobKinds {
		run := d.runOne(ctx, kind, gang, 0, warmUpJobs)
		if ok, why := run.complete(); !ok {
			return fmt.Errorf("the warm-up burst of %s Jobs failed: %s (logs in %s)", kind, why, filepath.Join(d.cluster.Dir(), "logs"))
		}
	}
	return nil
}

// runOne runs one burst of n pods' worth of the shape's Jobs of one kind, and empties the
// namespace after it. A failure is returned in the run's Error.
func (d *burstDriver) runOne(ctx context.Context, kind string, sh *JobShape, rep, n int) JobBurstRun {
	jobs := sh.jobs(n)
	run := JobBurstRun{Kind: kind, Shape: sh.Name, Rep: rep, Jobs: jobs, Pods: jobs * sh.PodsPerJob}
	label := fmt.Sprintf("%s %s rep %d", kind, sh.Name, rep)
	if rep == 0 {
		label = fmt.Sprintf("%s warm-up", kind)
	}
	if err := d.burst(ctx, kind, sh, label, &run); err != nil {
		run.Error = err.Error()
		d.logf("%s failed: %s (logs in %s)", label, run.Error, filepath.Join(d.cluster.Dir(), "logs"))
	}
	start := time.Now()
	if err := d.cluster.empty(ctx); err != nil && run.Error == "" {
		run.Error = fmt.Sprintf("emptying the namespace after the burst: %v", err)
	}
	run.EmptySeconds = time.Since(start).Seconds()
	d.logf("%-22s submitted %.2fs, all %d pods exist %.2fs, bound %.2fs; emptied in %.1fs",
		label, run.SubmittedSeconds, run.Pods, run.AllPodsExistSeconds, run.AllPodsBoundSeconds, run.EmptySeconds)
	return run
}

// burst creates the Jobs, waits until every pod is bound and measures the burst into run.
func (d *burstDriver) burst(ctx context.Context, kind string, sh *JobShape, label string, run *JobBurstRun) error {
	c := d.cluster
	rec := newJobPodRecorder(run.Pods)
	if err := rec.start(ctx, c.fast, burstNamespace); err != nil {
		return err
	}
	defer rec.close()
	cpuBefore, cpuErr := c.controllerCPU(kind)
	apiBefore, allBefore, clusterErr := c.clusterCPU()
	writesBefore, writesErr := c.mutatingRequestsByResource(ctx)

	calls, answered, err := c.submit(ctx, kind, sh, run.Jobs, d.workers)
	if err == nil {
		err = d.waitBound(ctx, rec, label, calls[0])
	}
	if err == nil {
		// The writes that follow the last bind (its event, the Jobs' status) belong to the burst.
		time.Sleep(settle)
	}
	measureBurst(run, sh, calls, answered, rec.observation())
	if err != nil {
		return err
	}
	cpuAfter, cpuAfterErr := c.controllerCPU(kind)
	apiAfter, allAfter, clusterAfterErr := c.clusterCPU()
	writesAfter, writesAfterErr := c.mutatingRequestsByResource(ctx)
	run.ControllerCPUSeconds = optional(cpuAfter-cpuBefore, errors.Join(cpuErr, cpuAfterErr))
	run.APIServerCPUSeconds = optional(apiAfter-apiBefore, errors.Join(clusterErr, clusterAfterErr))
	run.ControlPlaneCPUSeconds = optional(allAfter-allBefore, errors.Join(clusterErr, clusterAfterErr))
	if errors.Join(writesErr, writesAfterErr) == nil {
		run.WritesPerPodByResource = map[string]float64{}
		total := 0.0
		for resource, after := range writesAfter {
			if n := after - writesBefore[resource]; n > 0 {
				run.WritesPerPodByResource[resource] = n / float64(run.Pods)
				total += n
			}
		}
		run.MutatingRequestsPerPod = new(total / float64(run.Pods))
	}
	return nil
}

// waitBound waits until the recorder has seen every pod bound, showing progress from start.
func (d *burstDriver) waitBound(ctx context.Context, rec *jobPodRecorder, label string, start time.Time) error {
	bar := newProgressBar(d.settings.Progress, label, rec.want, start)
	deadline := time.NewTimer(drainTimeout(rec.want))
	defer deadline.Stop()
	stall := time.NewTimer(stallTimeout)
	defer stall.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for !rec.done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			seen, bound := rec.progress()
			return fmt.Errorf("%d of %d pods created and %d bound after %v", seen, rec.want, bound, drainTimeout(rec.want))
		case <-stall.C:
			seen, bound := rec.progress()
			return fmt.Errorf("no pod created or bound for %v (%d of %d created, %d bound)", stallTimeout, seen, rec.want, bound)
		case <-rec.changed:
			stall.Reset(stallTimeout)
		case <-tick.C:
		}
		seen, bound := rec.progress()
		bar.update(bound, fmt.Sprintf("bound, %d exist", seen))
	}
	seen, bound := rec.progress()
	bar.finish(bound, fmt.Sprintf("bound, %d exist", seen))
	return nil
}
