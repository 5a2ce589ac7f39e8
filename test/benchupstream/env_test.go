package benchupstream

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/tephra-dev/tephra/internal/bench"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/plugins/registry"
)

// env is what every run shares: the repository, the copied workload files, where results go.
type env struct {
	root, tree, results              string
	kubernetesVersion, tephraVersion string
	// reuse: results already in the results folder stand for their suite and profile.
	reuse bool
}

// tephraSchedulerOnly is Tephra's profile without its controllers, for workloads without
// PodGroups: it is not published, and measures what the controllers cost in the one process.
const tephraSchedulerOnly = "tephra-scheduler"

// profileRun is how one profile runs the harness.
type profileRun struct {
	name string
	// schedulerConfig is the configuration the derived workload files name ("" keeps upstream's).
	schedulerConfig string
	registry        frameworkruntime.Registry
	options         []perf.SchedulerPerfOption
}

// prepare builds etcd (bin/, cached) and puts it on PATH for the harness, copies upstream's
// workload files to bin/bench-upstream/tree, and points the harness's results there.
func prepare(b *testing.B, reuse, cpuProfiles bool) *env {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := localcluster.RepoRoot()
	require.NoError(b, err)
	bins, err := localcluster.Build(ctx, root, os.Stderr)
	require.NoError(b, err)
	work := filepath.Join(root, "bin", "bench-upstream")
	e := &env{root: root, tree: filepath.Join(work, "tree"), results: filepath.Join(work, "results"), reuse: reuse}
	for _, dir := range []string{e.tree, filepath.Join(work, "path"), e.results} {
		if dir == e.results && reuse {
			continue
		}
		require.NoError(b, os.RemoveAll(dir))
	}
	pathDir := filepath.Join(work, "path")
	for _, dir := range []string{pathDir, e.results} {
		require.NoError(b, os.MkdirAll(dir, 0o755))
	}
	// The harness runs the first `etcd` on PATH.
	require.NoError(b, os.Symlink(bins.Etcd, filepath.Join(pathDir, "etcd")))
	b.Setenv("PATH", pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	out, err := goCommand(ctx, root, "list", "-m", "-f", "{{.Dir}} {{.Version}}", "k8s.io/kubernetes")
	require.NoError(b, err)
	moduleDir, version, _ := strings.Cut(out, " ")
	e.kubernetesVersion = version
	e.tephraVersion = localcluster.TephraVersion(ctx, root)
	require.NoError(b, copyWorkloadFiles(moduleDir, e.tree))
	for name, value := range map[string]string{
		// The derived files hold only the selected workloads, without labels.
		"perf-scheduling-label-filter": "",
		"data-items-dir":               e.results,
		"perf-cpuprofile":              fmt.Sprint(cpuProfiles),
	} {
		require.NoError(b, flag.Set(name, value))
	}
	return e
}

func goCommand(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// profile is upstream's default profile (the workload files as they are), or Tephra's: the
// scheduler configuration that replaces the default scheduler, shipped in manifests/, with Tephra's
// plugins registered and its CRDs and controllers started before each workload.
func (e *env) profile(name string) (*profileRun, error) {
	switch name {
	case bench.UpstreamProfileVanilla:
		return &profileRun{name: name}, nil
	case bench.UpstreamProfileTephra:
		return &profileRun{
			name:            name,
			schedulerConfig: filepath.Join(e.root, "manifests", "overlays", "replace-default", "config-replace-default.yaml"),
			// As cmd/tephra-scheduler registers them.
			registry: registry.Plugins(),
			options:  []perf.SchedulerPerfOption{perf.WithPrepareFn(startTephra(e.root, true))},
		}, nil
	case tephraSchedulerOnly:
		p, _ := e.profile(bench.UpstreamProfileTephra)
		p.name, p.options = name, []perf.SchedulerPerfOption{perf.WithPrepareFn(startTephra(e.root, false))}
		return p, nil
	}
	return nil, fmt.Errorf("-upstream-profiles: unknown profile %q (upstream, tephra, tephra-scheduler)", name)
}

// run runs one suite's selected workloads under a profile and returns their throughput.
func (e *env) run(b *testing.B, p *profileRun, suite string, selected []workload) []bench.UpstreamRow {
	var rows []bench.UpstreamRow
	var runs []workload
	for _, w := range selected {
		if w.suite != suite {
			continue
		}
		if why := unsupportedReason(p.name, w); why != "" {
			b.Logf("%s: not run under %s: %s", w, p.name, why)
			rows = append(rows, bench.UpstreamRow{Suite: suite, TestCase: w.testCase, Workload: w.name, Profile: p.name, NotRun: why})
			continue
		}
		runs = append(runs, w)
	}
	if len(runs) == 0 {
		return rows
	}
	file, thresholds, err := deriveWorkloadFile(e.tree, suite, p.name, p.schedulerConfig, runs)
	require.NoError(b, err)
	// Templates are named relative to the working directory, as upstream's tests run in the
	// workload file's package.
	previous, err := os.Getwd()
	require.NoError(b, err)
	require.NoError(b, os.Chdir(filepath.Join(e.tree, suite)))
	defer func() { _ = os.Chdir(previous) }()
	prefix := strings.ReplaceAll(b.Name(), "/", "_") + "_benchmark_"
	items, err := readDataItems(e.results, prefix)
	require.NoError(b, err)
	if !e.reuse || len(items) == 0 {
		perf.RunBenchmarkPerfScheduling(b, file, suiteName(suite), p.registry, p.options...)
		if items, err = readDataItems(e.results, prefix); err != nil {
			b.Error(err)
		}
	} else {
		b.Logf("reusing the results of %s*.json", prefix)
	}
	for _, w := range runs {
		row := bench.UpstreamRow{Suite: suite, TestCase: w.testCase, Workload: w.name, Profile: p.name, Threshold: thresholds[w]}
		row.RawCPUProfile = e.cpuProfileOf(b, w, p.name)
		for _, item := range items {
			if !strings.Contains(item.Labels["Name"], w.testCase+"/"+w.name+"/") {
				continue
			}
			switch item.Labels["Metric"] {
			case "SchedulingThroughput":
				row.Data = item.Data
			case "SchedulingDuration":
				row.Duration = item.Data["Duration"]
			}
		}
		if row.Data == nil && row.Duration == 0 {
			row.Failed = "no SchedulingThroughput or SchedulingDuration (see the benchmark's log)"
		}
		if b.Failed() {
			row.Failed = "the workload failed (see the benchmark's log)"
		}
		rows = append(rows, row)
	}
	return rows
}

// cpuProfileOf finds the CPU profile scheduler_perf took of a workload's measured phase and names
// it after the profile: the harness names it after the workload only, and the next profile's run
// of the same workload would overwrite it. "" when there is none (no -upstream-cpuprofile).
func (e *env) cpuProfileOf(b *testing.B, w workload, profile string) string {
	prefix := filepath.Join(e.results, strings.ReplaceAll(fmt.Sprintf("%s_%s_%s", w.testCase, w.name, suiteName(w.suite)), "/", "_"))
	ours := "-" + profile + "-cpu.prof"
	if found, _ := filepath.Glob(prefix + "*" + ours); len(found) > 0 {
		return found[len(found)-1] // reused
	}
	found, _ := filepath.Glob(prefix + "*-cpu.prof")
	for _, f := range found {
		if strings.HasSuffix(f, "-"+bench.UpstreamProfileVanilla+"-cpu.prof") || strings.HasSuffix(f, "-"+bench.UpstreamProfileTephra+"-cpu.prof") || strings.HasSuffix(f, "-"+tephraSchedulerOnly+"-cpu.prof") {
			continue
		}
		named := strings.TrimSuffix(f, "-cpu.prof") + ours
		if err := os.Rename(f, named); err != nil {
			b.Error(err)
			return ""
		}
		return named
	}
	return ""
}

// publishCPUProfiles writes, beside docs/benchmarks.md, the top of both profiles' CPU profiles of
// each workload where Tephra is below upstream (or either failed), and names them in the rows: the
// profile that says why a goal is missed. The tops of the previous run are removed.
func (e *env) publishCPUProfiles(rows []bench.UpstreamRow) error {
	dir := filepath.Join(e.root, "docs", "benchmarks", "profiles")
	old, _ := filepath.Glob(filepath.Join(dir, "upstream-*.txt"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	type key struct{ suite, testCase, name string }
	byProfile := map[key]map[string]bench.UpstreamRow{}
	for _, r := range rows {
		k := key{r.Suite, r.TestCase, r.Workload}
		if byProfile[k] == nil {
			byProfile[k] = map[string]bench.UpstreamRow{}
		}
		byProfile[k][r.Profile] = r
	}
	for i, r := range rows {
		p := byProfile[key{r.Suite, r.TestCase, r.Workload}]
		ratio, _, ok := bench.UpstreamRatio(p[bench.UpstreamProfileVanilla], p[bench.UpstreamProfileTephra])
		if r.RawCPUProfile == "" || ok && ratio >= 1 {
			continue
		}
		name := fmt.Sprintf("upstream-%s-%s-%s-top.txt", r.TestCase, r.Workload, r.Profile)
		top, err := cpuProfileTop(e.root, r.RawCPUProfile)
		if err != nil {
			return err
		}
		header := fmt.Sprintf("CPU profile of make bench-upstream's %s/%s/%s under %s's profile, the measured phase only (scheduler_perf's -perf-cpuprofile): the whole process, which runs the apiserver, the harness and, under Tephra's profile, tephra-controllers beside the scheduler.\n\n", r.Suite, r.TestCase, r.Workload, r.Profile)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(header+top), 0o644); err != nil {
			return err
		}
		rows[i].CPUProfile = "benchmarks/profiles/" + name
	}
	return nil
}

// cpuProfileTop is go tool pprof's flat top of a profile, then the cumulative top of the
// scheduler's own code (kube-scheduler's and Tephra's plugins).
func cpuProfileTop(root, profile string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flat, err := goCommand(ctx, root, "tool", "pprof", "-top", "-nodecount=40", profile)
	if err != nil {
		return "", err
	}
	cum, err := goCommand(ctx, root, "tool", "pprof", "-top", "-cum", "-nodecount=60", `-focus=k8s.io/kubernetes/pkg/scheduler|tephra-dev/tephra/plugins`, profile)
	if err != nil {
		return "", err
	}
	return "go tool pprof -top -nodecount=40\n\n" + flat + "\n\ngo tool pprof -top -cum -nodecount=60 -focus='k8s.io/kubernetes/pkg/scheduler|tephra-dev/tephra/plugins'\n\n" + cum + "\n", nil
}

// firstResult is when the oldest result in the results folder was written, or since if it is
// older: a run that reuses results started when they were made.
func (e *env) firstResult(since time.Time) time.Time {
	files, _ := filepath.Glob(filepath.Join(e.results, "*.json"))
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && info.ModTime().Before(since) {
			since = info.ModTime()
		}
	}
	return since
}

// readDataItems reads the harness's JSON results whose file names start with prefix.
func readDataItems(dir, prefix string) ([]perf.DataItem, error) {
	files, err := filepath.Glob(filepath.Join(dir, prefix+"*.json"))
	if err != nil {
		return nil, err
	}
	var items []perf.DataItem
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d perf.DataItems
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		items = append(items, d.DataItems...)
	}
	return items, nil
}

// report prints the results (on stdout: a benchmark's own log shows only when it fails) and,
// with -upstream-publish, writes them into docs/.
func (e *env) report(b *testing.B, results *bench.UpstreamResults, publish bool) {
	results.Finished = time.Now()
	slices.SortStableFunc(results.Rows, func(x, y bench.UpstreamRow) int {
		return strings.Compare(x.Suite+x.TestCase+x.Workload, y.Suite+y.TestCase+y.Workload)
	})
	printRows(results.Rows)
	if !publish {
		return
	}
	require.NoError(b, e.publishCPUProfiles(results.Rows))
	require.NoError(b, bench.PublishUpstream(filepath.Join(e.root, "docs"), results))
	klog.Background().Info("published", "file", filepath.Join(e.root, "docs", "benchmarks.md"))
}

// printRows prints each row's throughput, or why it has none.
func printRows(rows []bench.UpstreamRow) {
	for _, r := range rows {
		if r.Failed != "" || r.NotRun != "" {
			fmt.Printf("%-8s %s/%s/%s: %s%s\n", r.Profile, r.Suite, r.TestCase, r.Workload, r.Failed, r.NotRun)
			continue
		}
		fmt.Printf("%-8s %s/%s/%s: SchedulingThroughput average %.1f pods/s (p50 %.0f, p90 %.0f)\n", r.Profile, r.Suite, r.TestCase, r.Workload,
			r.Data["Average"], r.Data["Perc50"], r.Data["Perc90"])
	}
}

// pollUntil polls cond every 200 ms until it holds or the timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}
