package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/test/localcluster"
)

const (
	// stallTimeout fails a scenario in which no pod has been bound for this long.
	stallTimeout = 90 * time.Second
	// settle is how long the driver waits after the last bind before it reads the scheduler's
	// CPU time and the apiserver's counters, so that the writes that follow a bind (events,
	// status) are counted.
	settle = time.Second
)

// drainTimeout bounds a scenario's drain: generous, since a broken configuration is caught by
// stallTimeout first.
func drainTimeout(pods int) time.Duration {
	return 3*time.Minute + time.Duration(pods)*50*time.Millisecond
}

// Run runs the benchmark. Every configuration's runs go into the results, failed or not (see
// Results.Failures); err is set when the benchmark could not run at all.
func Run(ctx context.Context, s Settings) (*Results, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(s.OutDir) {
		s.OutDir = filepath.Join(root, s.OutDir)
	}
	bins, err := localcluster.Build(ctx, root, s.Log)
	if err != nil {
		return nil, err
	}
	res := &Results{
		Kind: "matrix", Smoke: s.Smoke, Command: s.Command(),
		Nodes: s.Nodes, Pods: s.Pods, Reps: s.Reps,
		Started: time.Now(), Machine: thisMachine(), Tephra: localcluster.TephraVersion(ctx, root),
	}
	nodeCounts := []int{s.Nodes}
	if len(s.Sweep) > 0 {
		res.Kind, res.Nodes, res.Sweep = "sweep", 0, s.Sweep
		nodeCounts = s.Sweep
	}
	for _, c := range Configurations {
		if len(s.Configs) == 0 || slices.Contains(s.Configs, c.Name) {
			res.Configurations = append(res.Configurations, ConfigurationStatus{Configuration: *c})
		}
	}
	for _, sc := range Scenarios {
		if res.Kind == "sweep" && sc.Name != "P" {
			continue
		}
		if len(s.Scenarios) == 0 || slices.Contains(s.Scenarios, sc.Name) {
			res.Scenarios = append(res.Scenarios, sc)
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
	fmt.Fprintf(s.Log, "benchmark: %s; clusters' logs under %s\n", res.Command, runDir)

	d := &driver{settings: s, root: root, bins: bins, runDir: runDir, res: res}
	for _, nodes := range nodeCounts {
		for rep := 1; rep <= s.Reps; rep++ {
			for i := range res.Configurations {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				if res.Configurations[i].Unavailable == "" {
					d.runConfiguration(ctx, &res.Configurations[i], rep, nodes)
				}
			}
		}
	}
	res.Finished = time.Now()
	return res, res.writeOutputs(runDir, ".")
}

// driver runs configurations and scenarios and collects their results.
type driver struct {
	settings Settings
	root     string
	bins     *localcluster.Binaries
	runDir   string
	res      *Results
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.settings.Log, format+"\n", args...)
}

// runConfiguration starts a fresh cluster for a configuration and runs every scenario on it.
func (d *driver) runConfiguration(ctx context.Context, config *ConfigurationStatus, rep, nodes int) {
	dir := filepath.Join(d.runDir, fmt.Sprintf("%s-n%d-rep%d", config.Name, nodes, rep))
	d.logf("\n== %s, %d nodes, repetition %d/%d: %s", config.Name, nodes, rep, d.settings.Reps, config.Title)
	b, err := startCluster(ctx, d.root, d.bins, &config.Configuration, dir, nodes, d.settings.Log)
	if err == nil {
		defer b.finish(d.settings.Keep)
		if d.res.Kubernetes == "" {
			if v, err := b.Client.Discovery().ServerVersion(); err == nil {
				d.res.Kubernetes = v.GitVersion
			}
		}
	}
	for _, sc := range d.res.Scenarios {
		run := RunResult{Configuration: config.Name, Scenario: sc.Name, Rep: rep, Nodes: nodes}
		if sc.Skip != "" {
			continue
		}
		if err == nil {
			run, err = d.runScenario(ctx, b, sc, run)
		}
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
		if run.Error != "" {
			d.logf("%s %s failed: %s (logs in %s)", config.Name, sc.Name, run.Error, filepath.Join(dir, "logs"))
		}
		d.res.Runs = append(d.res.Runs, run)
	}
}

// runScenario runs one scenario on a cluster: backlog, drain, measurements, clean-up. A failure
// of the scenario is returned in run.Error; err is set when the cluster cannot go on (or the
// configuration turned out unavailable).
func (d *driver) runScenario(ctx context.Context, b *benchCluster, sc *Scenario, run RunResult) (RunResult, error) {
	ns := "bench-" + strings.ToLower(sc.Name)
	w := newWorkload(sc, ns, d.settings.Pods, run.Nodes)
	run.Pods = w.measured()
	run.Blockers = len(w.pods) - run.Pods
	if _, err := b.fast.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return run, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	rec, err := startRecorder(ctx, b.fast, w)
	if err != nil {
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
	// The next scenario needs the nodes empty again.
	if err := b.clean(ctx, w); err != nil {
		return run, fmt.Errorf("cleaning up after %s: %w", sc.Name, err)
	}
	return run, nil
}

// drain creates the backlog, starts the scheduler (or binder), waits until every measured pod is
// bound and fills run with what was measured.
func (d *driver) drain(ctx context.Context, b *benchCluster, sc *Scenario, w *workload, rec *recorder, run *RunResult) error {
	label := fmt.Sprintf("%s %s rep %d", run.Configuration, sc.Name, run.Rep)
	if err := w.createGangs(ctx, b); err != nil {
		return err
	}
	if err := w.createPods(ctx, b); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		seen, _, _ := rec.counts()
		return seen == len(w.pods), nil
	})
	if err != nil {
		seen, _, _ := rec.counts()
		return fmt.Errorf("the recorder saw %d of %d pods created: %w", seen, len(w.pods), err)
	}
	before, err := b.mutatingRequests(ctx)
	if err != nil {
		return err
	}

	start := time.Now()
	var bd *binder
	if b.config.Binder {
		if bd, err = startBinder(ctx, b, w); err != nil {
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
	}
	if err := d.waitDrained(ctx, b, label, start, run.Pods, rec, bd); err != nil {
		return err
	}
	time.Sleep(settle)

	o := rec.observation()
	run.Bound = len(o.binds)
	run.BoundAll = o.bound
	if len(o.binds) > 0 {
		run.DrainSeconds = o.binds[len(o.binds)-1].Sub(start).Seconds()
	}
	avg, samples := throughput(o.binds)
	run.Throughput = Throughput{Average: avg, Samples: samples}
	if len(samples) > 0 {
		run.Throughput.P50, run.Throughput.P99 = percentile(samples, 50), percentile(samples, 99)
	}
	run.LatencySeconds = quantiles(seconds(o.latencies))
	run.GangWholeSeconds = quantiles(seconds(o.gangLatencies))
	run.Gangs, run.GangsWhole, run.BlockersWhole = o.gangs, o.gangsWhole, o.blockersWhole
	run.PeakPartialGangPods = o.peakPartial
	if !b.config.Binder {
		stats, err := readProcStats(b.Pid(localcluster.Scheduler))
		if err != nil {
			return fmt.Errorf("reading the scheduler's CPU and memory: %w", err)
		}
		run.SchedulerCPUSecondsPer1000Pods = ptr.To(stats.CPUSeconds / float64(max(o.bound, 1)) * 1000)
		run.SchedulerPeakRSSMiB = ptr.To(float64(stats.PeakRSSBytes) / (1 << 20))
	}
	after, err := b.mutatingRequests(ctx)
	if err != nil {
		return err
	}
	run.MutatingRequestsPerPod = (after - before) / float64(max(o.bound, 1))
	return nil
}

// waitDrained waits until every measured pod is bound, drawing a progress bar. It fails when the
// scheduler or binder fails, when no pod has been bound for stallTimeout, or after drainTimeout.
func (d *driver) waitDrained(ctx context.Context, b *benchCluster, label string, start time.Time, pods int, rec *recorder, bd *binder) error {
	bar := newProgressBar(d.settings.Progress, label, pods, start)
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(drainTimeout(pods))
	lastBound, lastProgress := -1, time.Now()
	var binderDone <-chan error
	if bd != nil {
		binderDone = bd.Done()
	}
	for {
		_, bound, toBind := rec.counts()
		if toBind <= 0 {
			bar.finish(pods-toBind, "done")
			return nil
		}
		if bound != lastBound {
			lastBound, lastProgress = bound, time.Now()
		}
		note := ""
		switch {
		case bd == nil && !b.Running(localcluster.Scheduler):
			bar.finish(pods-toBind, "scheduler exited")
			return fmt.Errorf("the scheduler exited; see %s", b.LogPath(localcluster.Scheduler))
		case time.Since(lastProgress) > stallTimeout:
			bar.finish(pods-toBind, "stalled")
			return fmt.Errorf("no pod bound for %v; %d of %d bound", stallTimeout, pods-toBind, pods)
		case time.Since(lastProgress) > 5*time.Second:
			note = fmt.Sprintf("(no bind for %ds)", int(time.Since(lastProgress).Seconds()))
		}
		bar.update(pods-toBind, note)
		select {
		case <-ctx.Done():
			bar.finish(pods-toBind, "interrupted")
			return ctx.Err()
		case <-deadline:
			bar.finish(pods-toBind, "timed out")
			return fmt.Errorf("timed out after %v; %d of %d bound", drainTimeout(pods), pods-toBind, pods)
		case err := <-binderDone:
			binderDone = nil
			if err != nil {
				bar.finish(pods-toBind, "binder failed")
				return err
			}
		case <-rec.Changed():
		case <-ticker.C:
		}
	}
}

// clean deletes a workload's pods and PodGroups and waits until the pods are gone. A force
// delete (grace period 0) removes a pod at once: no kubelet needs to confirm it.
func (b *benchCluster) clean(ctx context.Context, w *workload) error {
	err := parallel(ctx, 32, len(w.pods), func(ctx context.Context, i int) error {
		err := b.fast.CoreV1().Pods(w.namespace).Delete(ctx, w.pods[i].name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s: %w", w.pods[i].name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	all := metav1.ListOptions{}
	switch b.config.Gangs {
	case TephraGangs:
		err = b.Tephra.SchedulingV1alpha1().PodGroups(w.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
	case UpstreamGangs:
		err = b.fast.SchedulingV1beta1().PodGroups(w.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
	case NoGangs:
	}
	if err != nil {
		return fmt.Errorf("deleting PodGroups: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.fast.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
}
