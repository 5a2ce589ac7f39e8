// Package benchupstream runs Kubernetes' own scheduler benchmark, test/integration/scheduler_perf
// of the k8s.io/kubernetes module, on upstream's workload files: once with upstream's default
// profile and once with Tephra's (manifests/overlays/replace-default), whose plugins it compiles in
// through the harness's out-of-tree registry. `make bench-upstream` runs the 5000-node workloads
// and publishes them in docs/benchmarks.md; `make test` runs the short ones, which fail unless
// both profiles schedule every pod.
//
// The workload files are copied, with their templates, from the module to bin/bench-upstream/,
// keeping only the selected workloads; Tephra's copy names its scheduler configuration
// (schedulerConfigPath) and nothing else changes.
package benchupstream

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	_ "k8s.io/component-base/logs/json/register"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/tephra-dev/tephra/internal/bench"
)

var (
	workloadSet   = flag.String("upstream-set", "full", `which workloads: "full" (the 5000-node ones of make bench-upstream) or "short" (upstream's short integration ones, for make test)`)
	workloadsFlag = flag.String("upstream-workloads", "", "comma-separated suite:TestCase/Workload to run instead of the set, e.g. misc:SchedulingBasic/5000Nodes_10000Pods")
	profilesFlag  = flag.String("upstream-profiles", bench.UpstreamProfileVanilla+","+bench.UpstreamProfileTephra, "comma-separated profiles to run: upstream, tephra, or tephra-scheduler (Tephra's without its controllers, for workloads without PodGroups; not published)")
	publish       = flag.Bool("upstream-publish", false, "write the results to docs/benchmarks/upstream.json and render docs/benchmarks.md again")
	command       = flag.String("upstream-command", "make bench-upstream", "the command reported with published results")
	reuse         = flag.Bool("upstream-reuse", false, "keep bin/bench-upstream/results and reuse the results of suites and profiles found there instead of running them again (after a run that stopped part way)")
	cpuProfiles   = flag.Bool("upstream-cpuprofile", false, "take a CPU profile of each workload's measured phase under each profile (scheduler_perf's -perf-cpuprofile); with -upstream-publish, publish the top of both profiles' for each workload below 1.0x")
	podsTimeout   = flag.Duration("upstream-pods-timeout", 0, "how long the harness waits for a workload's pods to be scheduled before it fails the workload (0: its default, 10 min)")
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// BenchmarkUpstream runs each selected workload file under each profile:
// BenchmarkUpstream/<suite>/<profile>/<TestCase>/<Workload>, in one process, one workload at a
// time (the harness starts etcd, an apiserver and the scheduler for each).
func BenchmarkUpstream(b *testing.B) {
	selected, err := selection(*workloadSet, *workloadsFlag)
	require.NoError(b, err)
	env := prepare(b, *reuse, *cpuProfiles)
	results := bench.NewUpstreamResults(*command, env.kubernetesVersion, env.tephraVersion)
	if *reuse {
		results.Started = env.firstResult(results.Started)
	}
	var profiles []*profileRun
	for _, name := range strings.Split(*profilesFlag, ",") {
		p, err := env.profile(name)
		require.NoError(b, err)
		if *podsTimeout > 0 {
			p.options = append(p.options, perf.WithPodsSchedulingTimeout(*podsTimeout))
		}
		profiles = append(profiles, p)
	}
	// Profiles alternate per suite, so that a machine that slows down over the run slows both.
	for _, suite := range suitesOf(selected) {
		b.Run(suiteName(suite), func(b *testing.B) {
			for _, p := range profiles {
				b.Run(p.name, func(b *testing.B) {
					rows := env.run(b, p, suite, selected)
					if p.name != tephraSchedulerOnly {
						results.Rows = append(results.Rows, rows...)
					} else {
						printRows(rows)
					}
				})
			}
		})
	}
	env.report(b, results, *publish)
}
