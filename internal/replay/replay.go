package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/replay/report"
	"github.com/tephra-dev/tephra/internal/replay/trace"
)

// DefaultSpeedup plays a day of trace in 10 minutes.
const DefaultSpeedup = 144

// Options are what a replay runs.
type Options struct {
	// Root is the Tephra repository; Binaries are its built components (built if nil).
	Root     string
	Binaries *localcluster.Binaries
	// Dir holds a directory per configuration's control plane (its logs stay there).
	Dir string
	// Log receives progress.
	Log io.Writer
	// Jobs are the trace, sorted by submit time.
	Jobs []trace.Job
	// Shape is the cluster; Queues the trace's queues with their weights and guarantees.
	Shape  ClusterShape
	Queues []report.Queue
	// Speedup divides the trace's times.
	Speedup float64
	// Configurations are run one after another, each on a fresh control plane.
	Configurations []*Configuration
	// StallTimeout ends a run when, all jobs submitted, no job works and nothing progressed for
	// this long (wall clock): what is left would wait for good, as a deadlock of partial gangs
	// does.
	StallTimeout time.Duration
	// MaxWall ends a run after this long (wall clock) whatever is left; 0: no limit.
	MaxWall time.Duration
	// Horizon ends a run at this trace time whatever is left: jobs not ended by then are
	// unfinished, or never ran. 0: DefaultHorizon of the trace.
	Horizon float64
	// Data plays the jobs' datasets, for a trace that names them.
	Data DataOptions
}

// DefaultHorizon is twice the trace time before which no scheduler could end every job: the
// latest submission plus duration, or the GPU-seconds the trace asks for over the cluster's
// GPUs, whichever is later. A configuration that leaves jobs waiting past it has its unfinished
// jobs reported rather than waited for: a stock scheduler's backlog of partial gangs can take
// many times longer to drain, and a replay must end in a known time (docs/replay.md).
func DefaultHorizon(jobs []trace.Job, gpus int) float64 {
	var last, gpuSeconds float64
	for _, j := range jobs {
		last = max(last, j.Submit+j.Duration)
		gpuSeconds += float64(j.Replicas*j.GPUs) * j.Duration
	}
	if gpus > 0 {
		last = max(last, gpuSeconds/float64(gpus))
	}
	return 2 * last
}

// Result is one configuration's run.
type Result struct {
	Run report.Run
	// Wall is how long the run took, the control plane's start excluded.
	Wall time.Duration
	// Stopped says why the run stopped before every job ended ("" if none was left).
	Stopped string
	// Problems are what the driver could not do (jobs not submitted).
	Problems []string
	// CPU is the CPU time, in seconds, each process of the control plane and the driver
	// (DriverProcess) used over the run, by process name.
	CPU map[string]float64 `json:",omitempty"`
}

// Replay runs the trace through each configuration, one after another, each on a fresh control
// plane, and returns what each observed.
func Replay(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Speedup <= 0 {
		return nil, fmt.Errorf("speedup %v: must be more than 0", opts.Speedup)
	}
	if err := opts.Shape.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Horizon <= 0 {
		opts.Horizon = DefaultHorizon(opts.Jobs, opts.Shape.TotalGPUs())
	}
	if opts.Binaries == nil {
		bins, err := localcluster.Build(ctx, opts.Root, opts.Log)
		if err != nil {
			return nil, err
		}
		opts.Binaries = bins
	}
	var results []Result
	for _, config := range opts.Configurations {
		result, err := replayOne(ctx, opts, config)
		if err != nil {
			return results, fmt.Errorf("configuration %s: %w", config.Name, err)
		}
		results = append(results, result)
	}
	return results, nil
}

// replayOne runs the trace through one configuration on a control plane of its own.
func replayOne(ctx context.Context, opts Options, config *Configuration) (Result, error) {
	cluster, err := startControlPlane(ctx, opts, config)
	if err != nil {
		return Result{}, err
	}
	defer cluster.Stop()

	client, tephra, err := unthrottledClients(cluster)
	if err != nil {
		return Result{}, err
	}
	if err := prepare(ctx, cluster, client, opts, config); err != nil {
		return Result{}, err
	}
	var problems []string
	if config.Queues {
		problems = jobsAboveCapability(opts.Jobs, config.queueSpecs(opts.Queues, opts.Shape.TotalGPUs(), opts.Speedup))
		for _, p := range problems {
			fmt.Fprintf(opts.Log, "%s: %s\n", config.Name, p)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := newDriver(config, &workloads{config: config, client: client, tephra: tephra, speedup: opts.Speedup}, client, opts.Jobs, opts.Speedup, opts.Log)
	if slices.ContainsFunc(opts.Jobs, func(j trace.Job) bool { return j.Dataset != "" }) {
		d.caches = newNodeCaches(opts.Data)
	}
	if err := d.watch(runCtx); err != nil {
		return Result{}, err
	}
	workers := d.act(runCtx, 8)
	cpuBefore := cpuSeconds(cluster)
	t0 := time.Now()
	d.mu.Lock()
	d.t0, d.lastProgress = t0, t0
	d.mu.Unlock()
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		d.submitAll(runCtx, t0)
	}()
	fmt.Fprintf(opts.Log, "%s: replaying %d jobs at %gx\n", config.Name, len(opts.Jobs), opts.Speedup)

	stopped, err := waitUntilStopped(ctx, opts, config, d, submitted, t0)
	if err != nil {
		return Result{}, err
	}
	end := time.Now()
	cpu := cpuUsed(cpuBefore, cpuSeconds(cluster))
	cancel()
	workers.Wait()
	<-submitted
	run := d.run(end)
	run.GPUs, run.Queues = opts.Shape.TotalGPUs(), opts.Queues
	run.Nodes, run.NodeGPUs = opts.Shape.Nodes, opts.Shape.GPUs
	if stopped == "done" {
		stopped = ""
	}
	fmt.Fprintf(opts.Log, "%s: finished in %s\n", config.Name, end.Sub(t0).Round(time.Second))
	return Result{Run: run, Wall: end.Sub(t0), Stopped: stopped, Problems: append(problems, d.failures...), CPU: cpu}, nil
}

// startControlPlane starts the configuration's control plane in a directory of its own, emptied
// first so that nothing of an earlier run is left in it. A control plane that failed to start is
// stopped, so that nothing it started outlives the error.
func startControlPlane(ctx context.Context, opts Options, config *Configuration) (*localcluster.Cluster, error) {
	dir := filepath.Join(opts.Dir, config.Name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	local := localcluster.Options{Dir: dir, Root: opts.Root, Binaries: opts.Binaries, Log: opts.Log}
	local.UsageHalfLife = config.playedUsageHalfLife(opts.Speedup)
	if err := config.options(&local, opts.Root, dir); err != nil {
		return nil, err
	}
	config.playedPluginArgs(&local, opts.Speedup)
	fmt.Fprintf(opts.Log, "%s: starting a control plane in %s\n", config.Name, dir)
	cluster, err := localcluster.Start(ctx, local)
	if err != nil {
		if cluster != nil {
			cluster.Stop()
		}
		return nil, err
	}
	return cluster, nil
}

// unthrottledClients are the driver's own clients: no client-side rate limit, so that submitting
// and playing the jobs keeps up with the trace.
func unthrottledClients(cluster *localcluster.Cluster) (*kubernetes.Clientset, *versioned.Clientset, error) {
	fast := rest.CopyConfig(cluster.Config)
	fast.QPS, fast.Burst = -1, 0
	client, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return nil, nil, err
	}
	tephra, err := versioned.NewForConfig(fast)
	if err != nil {
		return nil, nil, err
	}
	return client, tephra, nil
}

// waitUntilStopped watches the run's progress every half second, logging it every 30 seconds,
// until stopReason gives a reason to stop, and returns that reason ("done" when every job
// ended). It returns the context's error when the context ends first.
func waitUntilStopped(ctx context.Context, opts Options, config *Configuration, d *driver, submitted <-chan struct{}, t0 time.Time) (string, error) {
	stopped := ""
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	lastReport := t0
	for stopped == "" {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
		allEnded, working, count, last := d.progress()
		now := time.Now()
		allSubmitted := false
		select {
		case <-submitted:
			allSubmitted = true
		default:
		}
		stopped = stopReason(opts, allSubmitted, allEnded, working, t0, last, now)
		if now.Sub(lastReport) >= 30*time.Second {
			lastReport = now
			fmt.Fprintf(opts.Log, "%s: %s, trace time %s, %d of %d jobs submitted\n", config.Name, now.Sub(t0).Round(time.Second),
				time.Duration(float64(now.Sub(t0))*opts.Speedup).Round(time.Minute), count, len(opts.Jobs))
		}
	}
	return stopped, nil
}

// stopReason says why a run started at t0 stops now, its last progress at last; "" while it goes
// on. A run stops when every job ended ("done"); when, all jobs submitted, none works and nothing
// moved for the stall timeout, since what is left would wait for good; at its wall-clock limit;
// and, all jobs submitted, at its horizon of trace time.
func stopReason(opts Options, allSubmitted, allEnded, working bool, t0, last, now time.Time) string {
	switch {
	case allSubmitted && allEnded:
		return "done"
	case allSubmitted && !working && now.Sub(last) > opts.StallTimeout:
		return fmt.Sprintf("no job worked and nothing progressed for %s after the last submission: what is left would wait for good", opts.StallTimeout)
	case opts.MaxWall > 0 && now.Sub(t0) > opts.MaxWall:
		return fmt.Sprintf("the run reached its limit of %s", opts.MaxWall)
	case allSubmitted && now.Sub(t0).Seconds()*opts.Speedup >= opts.Horizon:
		return fmt.Sprintf("the run reached its horizon of %s of trace time", report.Duration(opts.Horizon))
	}
	return ""
}

// prepare creates the nodes, the namespace, the priority classes and, for a configuration with
// queues, the Queues; and checks that the apiserver serves the upstream gangs a configuration
// writes.
func prepare(ctx context.Context, c *localcluster.Cluster, client kubernetes.Interface, opts Options, config *Configuration) error {
	if err := createNodes(ctx, c, opts.Shape); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := createPriorityClasses(ctx, client, opts.Jobs); err != nil {
		return err
	}
	if config.upstreamPodGroups() {
		if err := servesUpstreamPodGroups(client); err != nil {
			return err
		}
	}
	if config.Gangs == BatchJobs {
		if err := keepsJobGangs(ctx, client); err != nil {
			return err
		}
	}
	if config.Queues {
		return createQueues(ctx, c, config.queueSpecs(opts.Queues, opts.Shape.TotalGPUs(), opts.Speedup))
	}
	return nil
}

// keepsJobGangs checks, with a Job created in a dry run, that the apiserver keeps a Job's
// spec.scheduling: without WorkloadWithJob it drops the field, and every gang would silently be
// scheduled pod by pod.
func keepsJobGangs(ctx context.Context, client kubernetes.Interface) error {
	probe := batchJob(trace.Job{Name: "probe", Replicas: 2, MinReplicas: 2, Duration: 1, MilliCPU: 1000, Memory: "4Gi"}, "replay-probe")
	created, err := client.BatchV1().Jobs(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("creating a gang Job in a dry run: %w", err)
	}
	if created.Spec.Scheduling == nil {
		return errors.New("the apiserver drops a Job's spec.scheduling: its feature gate WorkloadWithJob is off")
	}
	return nil
}

// servesUpstreamPodGroups checks that the apiserver serves scheduling.k8s.io/v1beta1 PodGroups.
func servesUpstreamPodGroups(client kubernetes.Interface) error {
	resources, err := client.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
	if err != nil {
		return fmt.Errorf("the apiserver does not serve scheduling.k8s.io/v1beta1: %w", err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "podgroups" {
			return nil
		}
	}
	return errors.New("the apiserver serves scheduling.k8s.io/v1beta1 without podgroups")
}
