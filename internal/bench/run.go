package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

const (
	// stallTimeout fails a run in which no pod has been bound (or, in Q, has ended) for this
	// long.
	stallTimeout = 90 * time.Second
	// settle is how long the driver waits after the last bind before it reads the scheduler's
	// CPU time and the apiserver's counters, so that the writes that follow a bind (events,
	// status) are counted.
	settle = 500 * time.Millisecond
)

// drainTimeout bounds a run's drain: generous, since a broken configuration is caught by
// stallTimeout first.
func drainTimeout(pods int) time.Duration {
	return 3*time.Minute + time.Duration(pods)*50*time.Millisecond
}

// Run runs the benchmark. Every configuration's runs go into the results, failed or not (see
// Results.Failures); err is set when the benchmark could not run at all.
//
// Runs are interleaved: for each repetition, for each scenario, each configuration in turn, the
// order rotated by one from one repetition (and scenario) to the next (runOrder). Every run gets a fresh control plane with the simulated nodes
// (cluster.go) and a fresh scheduler process (or L's binder), started on a backlog of pods.
func Run(ctx context.Context, s Settings) (*Results, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	root, outDir, err := repoAndOutDir(s.OutDir)
	if err != nil {
		return nil, err
	}
	s.OutDir = outDir
	started := time.Now()
	bins, err := localcluster.Build(ctx, root, s.Log)
	if err != nil {
		return nil, err
	}
	res := &Results{
		Kind: "matrix", Smoke: s.Smoke, Command: s.Command(),
		Nodes: s.Nodes, Pods: s.Pods, Reps: s.Reps, QScale: s.qScale(),
		Started: started, Machine: thisMachine(), Tephra: localcluster.TephraVersion(ctx, root),
	}
	nodeCounts := []int{s.Nodes}
	if len(s.Sweep) > 0 {
		res.Kind, res.Nodes, res.Sweep = "sweep", 0, s.Sweep
		nodeCounts = s.Sweep
	}
	for _, sc := range Scenarios {
		if res.Kind == "sweep" && !slices.Contains(sweepScenarios, sc.Name) {
			continue
		}
		if len(s.Scenarios) == 0 || slices.Contains(s.Scenarios, sc.Name) {
			res.Scenarios = append(res.Scenarios, sc)
		}
	}
	var configs []*Configuration
	for _, c := range Configurations {
		// A configuration that runs none of the scenarios is left out.
		chosen := len(s.Configs) == 0 || slices.Contains(s.Configs, c.Name)
		if len(s.Configs) == 0 && res.Kind == "sweep" {
			chosen = slices.Contains(sweepConfigurations, c.Name)
		}
		if chosen && slices.ContainsFunc(res.Scenarios, c.runs) {
			res.Configurations = append(res.Configurations, ConfigurationStatus{Configuration: *c})
			configs = append(configs, c)
		}
	}
	runDir := filepath.Join(s.OutDir, res.Kind+"-"+res.Started.Format("20060102-150405"))
	if s.Smoke {
		runDir = filepath.Join(s.OutDir, "smoke-"+res.Started.Format("20060102-150405"))
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	res.Dir = runDir
	res.EstimatedMinutes = Estimate(s, configs, res.Scenarios).Minutes()
	fmt.Fprintf(s.Log, "benchmark: %s; estimated %.0f min on 2 cores; clusters' logs under %s\n", res.Command, res.EstimatedMinutes, runDir)

	d := &driver{settings: s, root: root, bins: bins, runDir: runDir, res: res}
	if s.Smoke {
		d.smoke(ctx, s.Nodes)
		nodeCounts = nil
	}
	for _, nodes := range nodeCounts {
		for rep := 1; rep <= s.Reps; rep++ {
			for si, sc := range res.Scenarios {
				for _, i := range runOrder(len(res.Configurations), rep-1+si) {
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					if res.Configurations[i].Unavailable == "" && sc.Skip == "" && res.Configurations[i].runs(sc) {
						// Its own control plane: nothing to carry over if it fails.
						_ = d.runOne(ctx, &res.Configurations[i], sc, rep, nodes, nil)
					}
				}
			}
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Finished = time.Now()
	fmt.Fprintf(s.Log, "\nbenchmark done in %v (estimated %.0f min)\n", res.Finished.Sub(res.Started).Round(time.Second), res.EstimatedMinutes)
	return res, res.writeOutputs(runDir, ".")
}

// runOrder is the order of n configurations in one repetition of one scenario: rotated by shift,
// so that over the repetitions each configuration runs in each position (L B0 B1 C, then B0 B1 C
// L, ...) and none always follows the same one onto a machine still busy with its predecessor's
// teardown.
func runOrder(n, shift int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = (i + shift) % n
	}
	return order
}

// driver runs configurations and scenarios and collects their results.
type driver struct {
	settings Settings
	root     string
	bins     *localcluster.Binaries
	runDir   string
	// mu guards res in smoke runs, whose configurations run in parallel.
	mu  sync.Mutex
	res *Results
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.settings.Log, format+"\n", args...)
}

// smoke runs every scenario once per configuration, the configurations in parallel, each on one
// control plane emptied between scenarios: a smoke run checks that everything completes, and
// this takes a third of the time of a fresh control plane per run, one after the other.
func (d *driver) smoke(ctx context.Context, nodes int) {
	// Progress bars of parallel runs would overwrite each other; runOne logs a line per run.
	d.settings.Progress = nil
	d.settings.Log = &lockedWriter{w: d.settings.Log}
	var wg sync.WaitGroup
	for i := range d.res.Configurations {
		config := &d.res.Configurations[i]
		wg.Go(func() {
			dir := filepath.Join(d.runDir, config.Name)
			b, err := startCluster(ctx, d.root, d.bins, &config.Configuration, dir, io.Discard)
			if err == nil {
				defer b.finish(d.settings.Keep)
				err = b.prepare(ctx, nodes, io.Discard)
			}
			for _, sc := range d.res.Scenarios {
				if sc.Skip != "" || config.Unavailable != "" || !config.runs(sc) {
					continue
				}
				if err != nil {
					d.record(config, RunResult{Configuration: config.Name, Scenario: sc.Name, Rep: 1, Nodes: nodes}, err, dir)
					continue
				}
				err = d.runOne(ctx, config, sc, 1, nodes, b)
			}
		})
	}
	wg.Wait()
	order := func(r RunResult) (int, int) {
		s := slices.IndexFunc(d.res.Scenarios, func(sc *Scenario) bool { return sc.Name == r.Scenario })
		c := slices.IndexFunc(d.res.Configurations, func(c ConfigurationStatus) bool { return c.Name == r.Configuration })
		return s, c
	}
	slices.SortStableFunc(d.res.Runs, func(a, b RunResult) int {
		as, ac := order(a)
		bs, bc := order(b)
		if as != bs {
			return as - bs
		}
		return ac - bc
	})
}

// lockedWriter serializes writes for the parallel runs of a smoke run.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runOne runs one scenario on one configuration and records the result. shared is the
// configuration's control plane in smoke runs, emptied afterwards; nil, the run gets a fresh one.
// The error says that shared cannot be used any more.
func (d *driver) runOne(ctx context.Context, config *ConfigurationStatus, sc *Scenario, rep, nodes int, shared *benchCluster) error {
	run := RunResult{Configuration: config.Name, Scenario: sc.Name, Rep: rep, Nodes: nodes}
	name := fmt.Sprintf("%s-rep%d", sc.Name, rep)
	if len(d.settings.Sweep) > 0 {
		name = fmt.Sprintf("%s-n%d-rep%d", sc.Name, nodes, rep)
	}
	dir := filepath.Join(d.runDir, config.Name, name)
	b, err := shared, error(nil)
	if shared == nil {
		start := time.Now()
		b, err = startCluster(ctx, d.root, d.bins, &config.Configuration, dir, io.Discard)
		if err == nil {
			defer b.finish(d.settings.Keep)
			err = b.prepare(ctx, nodes, io.Discard)
		}
		run.Timings.SetupSeconds = time.Since(start).Seconds()
	} else {
		dir = b.Dir()
	}
	if err == nil {
		d.mu.Lock()
		if d.res.Kubernetes == "" {
			if v, err := b.Client.Discovery().ServerVersion(); err == nil {
				d.res.Kubernetes = v.GitVersion
			}
		}
		d.mu.Unlock()
		run, err = d.runScenario(ctx, b, sc, run)
		if shared != nil && err == nil {
			start := time.Now()
			if err = b.clean(ctx, "bench-"+strings.ToLower(sc.Name), sc.Devices); err != nil {
				err = fmt.Errorf("emptying the control plane after %s: %w", sc.Name, err)
			}
			run.Timings.SetupSeconds = time.Since(start).Seconds()
		}
	}
	d.record(config, run, err, dir)
	return err
}

// record adds a run's result, or marks the configuration unavailable.
func (d *driver) record(config *ConfigurationStatus, run RunResult, err error, dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var unavailableErr *UnavailableError
	if errors.As(err, &unavailableErr) {
		config.Unavailable = unavailableErr.Reason
		d.logf("%s is unavailable: %s", config.Name, unavailableErr.Reason)
		d.res.Runs = slices.DeleteFunc(d.res.Runs, func(r RunResult) bool { return r.Configuration == config.Name })
		return
	}
	if err != nil && run.Error == "" {
		run.Error = err.Error()
	}
	label := fmt.Sprintf("%s %s rep %d", run.Configuration, run.Scenario, run.Rep)
	if run.Error != "" {
		d.logf("%s failed: %s (logs in %s)", label, run.Error, filepath.Join(dir, "logs"))
	}
	setup := "control plane and nodes"
	if d.settings.Smoke {
		setup = "emptying"
	}
	d.logf("%-20s %s %.1fs, backlog %.1fs, drain %.1fs; %v elapsed of an estimated %.0f min",
		label, setup, run.Timings.SetupSeconds, run.Timings.CreateSeconds,
		run.Timings.DrainSeconds, time.Since(d.res.Started).Round(time.Second), d.res.EstimatedMinutes)
	d.res.Runs = append(d.res.Runs, run)
}

// runScenario runs one scenario on a cluster: backlog, drain, measurements. A failure of the
// scenario is returned in run.Error; err is set when the run could not start (or the
// configuration turned out unavailable).
func (d *driver) runScenario(ctx context.Context, b *benchCluster, sc *Scenario, run RunResult) (RunResult, error) {
	ns := "bench-" + strings.ToLower(sc.Name)
	w := newWorkload(sc, ns, workloadSize{pods: d.settings.Pods, nodes: len(b.nodes), gpus: b.gpus(), qScale: d.settings.qScale()})
	run.Pods = w.measured()
	run.Blockers = len(w.pods) - run.Pods
	if sc.Devices {
		start := time.Now()
		if err := b.publishDevices(ctx); err != nil {
			return run, err
		}
		run.Timings.SetupSeconds += time.Since(start).Seconds()
	}
	if err := b.createNamespace(ctx, ns); err != nil {
		return run, err
	}
	rec := newRecorder(w)
	if err := rec.start(ctx, b.fast, ns); err != nil {
		return run, err
	}
	drainErr := d.drain(ctx, b, sc, w, rec, &run)
	rec.close()
	if drainErr != nil {
		var unavailableErr *UnavailableError
		if errors.As(drainErr, &unavailableErr) {
			return run, drainErr
		}
		run.Error = drainErr.Error()
	}
	return run, nil
}

// drain creates the backlog, starts the scheduler (or binder), waits until every measured pod is
// bound (in Q: has ended) and fills run with what was measured.
func (d *driver) drain(ctx context.Context, b *benchCluster, sc *Scenario, w *workload, rec *recorder, run *RunResult) error {
	label := fmt.Sprintf("%s %s rep %d", run.Configuration, sc.Name, run.Rep)
	if w.queues() {
		// Q's pods must run and end: a kwok plays the GPU nodes' kubelets.
		kwok, err := b.startPodKwok(ctx)
		if err != nil {
			return err
		}
		defer kwok.stop()
	}
	created := time.Now()
	if w.devices {
		// The claims are generated while the pods are created, as in a cluster.
		if err := w.createClaimTemplate(ctx, b); err != nil {
			return err
		}
		if err := b.startClaimController(ctx); err != nil {
			return err
		}
		defer b.StopComponent(localcluster.ControllerManager)
	}
	if err := createBacklog(ctx, b, w, rec); err != nil {
		return err
	}
	run.Timings.CreateSeconds = time.Since(created).Seconds()
	base, err := readCostBaseline(ctx, b)
	if err != nil {
		return err
	}

	start := time.Now()
	var bd *binder
	var prof *profiler
	if b.config.Binder {
		if bd, err = startBinder(ctx, b, w, rec); err != nil {
			return err
		}
		defer bd.stop()
	} else {
		if err := b.StartComponent(ctx, localcluster.Scheduler); err != nil {
			if b.config.Gangs == UpstreamGangs {
				return unavailable("tephra-scheduler does not start with --feature-gates=%s: %v", b.config.FeatureGates, err)
			}
			return err
		}
		defer b.StopComponent(localcluster.Scheduler)
		run.Timings.SchedulerStartSeconds = time.Since(start).Seconds()
		if prof, err = d.profileScheduler(ctx, b, run); err != nil {
			return err
		}
	}
	drainErr := d.waitDrained(ctx, b, label, start, w, rec, bd)
	run.Timings.DrainSeconds = time.Since(start).Seconds()
	if prof != nil {
		// Stopped now, analyzed once the run's figures are read.
		files, err := prof.finish(ctx)
		wall := time.Since(start)
		heap := filepath.Join(prof.dir, prof.prefix+"-heap.pb.gz")
		defer d.analyzeProfile(ctx, files, heap, err, wall, run)
	}
	if drainErr != nil {
		if ctx.Err() == nil {
			drainErr = fmt.Errorf("%w (%s)", drainErr, b.writeUnbound(ctx, w.namespace))
		}
		return drainErr
	}
	time.Sleep(d.settle())

	o := rec.observation()
	recordObservation(run, o, start, w, b.gpus())
	if err := recordCosts(ctx, b, o, base, run); err != nil {
		return err
	}
	if w.devices {
		// After the figures: listing the claims costs the apiserver.
		allocated, err := b.allocatedDevices(ctx, w.namespace, rec)
		if err != nil {
			return err
		}
		run.DevicesAllocated = ptr.To(allocated)
	}
	return nil
}

// createBacklog creates the workload's gangs and pods, then waits until the recorder has seen
// every pod and, where the configuration makes them, every pod's claim: the scheduler starts on
// the whole backlog.
func createBacklog(ctx context.Context, b *benchCluster, w *workload, rec *recorder) error {
	if err := w.createGangs(ctx, b); err != nil {
		return err
	}
	if err := w.createPods(ctx, b); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return rec.counts().seen == len(w.pods), nil
	})
	if err != nil {
		return fmt.Errorf("the recorder saw %d of %d pods created: %w", rec.counts().seen, len(w.pods), err)
	}
	if w.devices {
		// Every claim exists before the scheduler starts, as the rest of the backlog does.
		if err := b.waitClaims(ctx, w, rec); err != nil {
			return err
		}
	}
	return nil
}

// profileScheduler starts profiling the scheduler if the run is one of the profiled ones (nil
// otherwise), and marks the run profiled.
func (d *driver) profileScheduler(ctx context.Context, b *benchCluster, run *RunResult) (*profiler, error) {
	if !d.profiled(run) {
		return nil, nil
	}
	dir := filepath.Join(d.runDir, "profiles")
	prof, err := startProfiler(ctx, b, dir, fmt.Sprintf("%s-%s-rep%d", run.Configuration, run.Scenario, run.Rep))
	if err != nil {
		return nil, err
	}
	run.Profiled = true
	return prof, nil
}

// settle is 0 in smoke runs, whose figures do not matter.
func (d *driver) settle() time.Duration {
	if d.settings.Smoke {
		return 0
	}
	return settle
}

// profiledScenarios are the scenarios in which C's scheduler is profiled, one of each kind:
// plain pods, gangs, gangs that never fit, and gangs that claim devices.
var profiledScenarios = []string{"P", "G8", "GI", "G8-DRA"}

// profiled says whether a run's scheduler is profiled: C's in profiledScenarios in the first
// repetition (at the first node count of a sweep), and B0's in the same runs for reference.
func (d *driver) profiled(run *RunResult) bool {
	nodes := d.settings.Nodes
	if len(d.settings.Sweep) > 0 {
		nodes = d.settings.Sweep[0]
	}
	return *d.settings.Profile && (run.Configuration == "C" || run.Configuration == "B0") &&
		slices.Contains(profiledScenarios, run.Scenario) && run.Rep == 1 && run.Nodes == nodes
}

// analyzeProfile analyzes a run's CPU profiles, taken over wall, and its heap profile, and adds
// the summary to the results. A profile that failed (err) is reported, not fatal.
func (d *driver) analyzeProfile(ctx context.Context, files []string, heap string, err error, wall time.Duration, run *RunResult) {
	summary := ProfileSummary{Configuration: run.Configuration, Scenario: run.Scenario, Rep: run.Rep}
	analyzeProfiles(ctx, d.runDir, files, wall, &summary)
	analyzeHeapProfile(ctx, d.runDir, heap, &summary)
	if err != nil && summary.Error == "" {
		summary.Error = err.Error()
	}
	if summary.Error != "" {
		d.logf("profile of %s %s: %s", run.Configuration, run.Scenario, summary.Error)
	}
	d.mu.Lock()
	d.res.Profiles = append(d.res.Profiles, summary)
	d.mu.Unlock()
}

// waitDrained waits until every measured pod is bound (in Q: has ended), drawing a progress bar.
// It fails when the scheduler or binder fails, when nothing has progressed for stallTimeout, or
// after drainTimeout.
func (d *driver) waitDrained(ctx context.Context, b *benchCluster, label string, start time.Time, w *workload, rec *recorder, bd *binder) error {
	total := w.measured()
	progress := func(c recorderCounts) int { return total - c.toBind }
	if w.queues() {
		total = len(w.pods)
		progress = func(c recorderCounts) int { return c.ended }
	}
	bar := newProgressBar(d.settings.Progress, label, total, start)
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(drainTimeout(total))
	last, lastProgress := recorderCounts{bound: -1}, time.Now()
	var binderDone <-chan error
	if bd != nil {
		binderDone = bd.Done()
	}
	for {
		c := rec.counts()
		done := progress(c)
		if done >= total {
			bar.finish(done, "done")
			return nil
		}
		if c.bound != last.bound || c.ended != last.ended {
			last, lastProgress = c, time.Now()
		}
		note := ""
		switch {
		case bd == nil && !b.Running(localcluster.Scheduler):
			bar.finish(done, "scheduler exited")
			return fmt.Errorf("the scheduler exited; see %s", b.LogPath(localcluster.Scheduler))
		case time.Since(lastProgress) > stallTimeout:
			bar.finish(done, "stalled")
			return fmt.Errorf("nothing bound or ended for %v; %d of %d done", stallTimeout, done, total)
		case time.Since(lastProgress) > 5*time.Second:
			note = fmt.Sprintf("(no progress for %ds)", int(time.Since(lastProgress).Seconds()))
		}
		bar.update(done, note)
		select {
		case <-ctx.Done():
			bar.finish(done, "interrupted")
			return ctx.Err()
		case <-deadline:
			bar.finish(done, "timed out")
			return fmt.Errorf("timed out after %v; %d of %d done", drainTimeout(total), done, total)
		case err := <-binderDone:
			binderDone = nil
			if err != nil {
				bar.finish(done, "binder failed")
				return err
			}
		case <-rec.Changed():
		case <-ticker.C:
		}
	}
}

// repoAndOutDir returns the repository's root and outDir made absolute under it.
func repoAndOutDir(outDir string) (root, abs string, err error) {
	if root, err = localcluster.RepoRoot(); err != nil {
		return "", "", err
	}
	if !filepath.IsAbs(outDir) {
		outDir = filepath.Join(root, outDir)
	}
	return root, outDir, nil
}
