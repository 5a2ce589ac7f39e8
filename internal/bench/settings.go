package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Settings say what a benchmark run does. FromEnv reads them from BENCH_* variables.
type Settings struct {
	// Nodes is the number of simulated nodes (BENCH_NODES, default 1000).
	Nodes int
	// Pods is the number of pods of each scenario (BENCH_PODS, default 3000: the issue asks for
	// 10 000, which takes about an hour on 2 cores, and the default run must fit in 30
	// minutes); see scenarios.go for how each scenario uses it. Q sizes itself from the GPU
	// nodes instead.
	Pods int
	// Reps is the number of repetitions of every configuration (BENCH_REPS, default 3 for the
	// matrix and 1 for the sweep).
	Reps int
	// Sweep, if set, switches to the sweep: scenarios P and G8 with L, B0, B1 and C (unless
	// BENCH_CONFIGS names others), once per node count, for the cost curve of throughput against
	// cluster size (BENCH_SWEEP=1 for 1000,2000,5000,10000, or a list of node counts).
	Sweep []int
	// Configs and Scenarios restrict the run to some configurations and scenarios
	// (BENCH_CONFIGS=L,C; BENCH_SCENARIOS=P,G8); all if empty.
	Configs, Scenarios []string
	// Smoke marks the smoke run: it checks that every configuration completes, not how fast.
	Smoke bool
	// Profile captures a CPU profile of configuration C's scheduler during scenario P of the
	// first repetition (BENCH_PROFILE=0 turns it off). Set by default outside smoke runs.
	Profile *bool

	// OutDir receives raw results, plots, the rendered report and the clusters' logs
	// (BENCH_OUT, default bench-out under the repository).
	OutDir string
	// DocsDir, if set, also receives the results and the report for the documentation: the
	// report as DocsDir/benchmarks.md, the rest under DocsDir/benchmarks/. Empty in smoke runs.
	DocsDir string
	// Keep keeps each cluster's etcd data and certificates (BENCH_KEEP=1); logs are always kept.
	Keep bool

	// Log receives progress messages and Progress the progress bars; nothing is printed if nil.
	Log, Progress io.Writer
}

// Default sizes of a full run and of the smoke run.
const (
	DefaultNodes = 1000
	DefaultPods  = 3000
	DefaultReps  = 3

	SmokeNodes = 100
	SmokePods  = 300
)

// DefaultSweep are the node counts of BENCH_SWEEP=1, up to the 10 000 nodes that systems of this
// kind are compared at (issue #40).
var DefaultSweep = []int{1000, 2000, 5000, 10000}

// sweepScenarios are the scenarios a sweep runs: plain pods and gangs, each against the node
// count. sweepConfigurations are the configurations it runs by default: the limit, upstream's
// profile without and with its gangs, and Tephra.
var (
	sweepScenarios      = []string{"P", "G8"}
	sweepConfigurations = []string{"L", "B0", "B1", "C"}
)

// SmokeSettings are those of `make bench-smoke`: 100 nodes, a few hundred pods per scenario, one
// repetition of every configuration, output under outDir only.
func SmokeSettings(outDir string) Settings {
	return Settings{Nodes: SmokeNodes, Pods: SmokePods, Reps: 1, Smoke: true, OutDir: outDir}
}

// FromEnv completes s from BENCH_NODES, BENCH_PODS, BENCH_REPS, BENCH_SWEEP, BENCH_CONFIGS,
// BENCH_SCENARIOS, BENCH_OUT, BENCH_KEEP and BENCH_PROFILE. Fields already set are overridden
// only by variables that are set.
func (s *Settings) FromEnv() error {
	for _, v := range []struct {
		name string
		dst  *int
	}{{"BENCH_NODES", &s.Nodes}, {"BENCH_PODS", &s.Pods}, {"BENCH_REPS", &s.Reps}} {
		if text := os.Getenv(v.name); text != "" {
			n, err := strconv.Atoi(text)
			if err != nil || n < 1 {
				return fmt.Errorf("%s=%q: want a positive number", v.name, text)
			}
			*v.dst = n
		}
	}
	switch text := os.Getenv("BENCH_SWEEP"); text {
	case "", "0":
	case "1", "true", "yes":
		s.Sweep = slices.Clone(DefaultSweep)
	default:
		s.Sweep = nil
		for _, field := range splitList(text) {
			n, err := strconv.Atoi(field)
			if err != nil || n < 1 {
				return fmt.Errorf("BENCH_SWEEP=%q: want node counts such as 1000,2000,5000,10000", text)
			}
			s.Sweep = append(s.Sweep, n)
		}
		slices.Sort(s.Sweep)
		s.Sweep = slices.Compact(s.Sweep)
	}
	if text := os.Getenv("BENCH_CONFIGS"); text != "" {
		s.Configs = splitList(text)
	}
	if text := os.Getenv("BENCH_SCENARIOS"); text != "" {
		s.Scenarios = splitList(text)
	}
	if text := os.Getenv("BENCH_OUT"); text != "" {
		s.OutDir = text
	}
	if text := os.Getenv("BENCH_KEEP"); text != "" && text != "0" {
		s.Keep = true
	}
	if text := os.Getenv("BENCH_PROFILE"); text != "" {
		on := text != "0" && text != "false"
		s.Profile = &on
	}
	return nil
}

// withDefaults fills what is unset and checks the rest.
func (s Settings) withDefaults() (Settings, error) {
	if s.Nodes == 0 {
		s.Nodes = DefaultNodes
	}
	if s.Pods == 0 {
		s.Pods = DefaultPods
	}
	if s.Reps == 0 {
		s.Reps = DefaultReps
		if len(s.Sweep) > 0 {
			s.Reps = 1
		}
	}
	if s.Profile == nil {
		on := !s.Smoke
		s.Profile = &on
	}
	if s.Log == nil {
		s.Log = io.Discard
	}
	if s.OutDir == "" {
		return s, fmt.Errorf("bench: Settings.OutDir is required")
	}
	for _, name := range s.Configs {
		if configurationByName(name) == nil {
			return s, fmt.Errorf("unknown configuration %q (have %s)", name, strings.Join(configurationNames(), ", "))
		}
	}
	for _, name := range s.Scenarios {
		if scenarioByName(name) == nil {
			return s, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames(), ", "))
		}
	}
	if s.Pods < 64 {
		return s, fmt.Errorf("%d pods per scenario: want at least 64, one gang of G64", s.Pods)
	}
	return s, nil
}

// qScale is what scenario Q's run times are scaled by.
func (s Settings) qScale() float64 {
	if s.Smoke {
		return qSmokeScale
	}
	return qDefaultScale
}

// Command is the command line that repeats a run with these settings.
func (s Settings) Command() string {
	target := "make bench"
	if s.Smoke {
		target = "make bench-smoke"
	}
	var vars []string
	if !s.Smoke {
		if s.Nodes != DefaultNodes && len(s.Sweep) == 0 {
			vars = append(vars, fmt.Sprintf("BENCH_NODES=%d", s.Nodes))
		}
		if s.Pods != DefaultPods {
			vars = append(vars, fmt.Sprintf("BENCH_PODS=%d", s.Pods))
		}
		defaultReps := DefaultReps
		if len(s.Sweep) > 0 {
			defaultReps = 1
		}
		if s.Reps != defaultReps {
			vars = append(vars, fmt.Sprintf("BENCH_REPS=%d", s.Reps))
		}
		switch {
		case slices.Equal(s.Sweep, DefaultSweep):
			vars = append(vars, "BENCH_SWEEP=1")
		case len(s.Sweep) > 0:
			counts := make([]string, len(s.Sweep))
			for i, n := range s.Sweep {
				counts[i] = strconv.Itoa(n)
			}
			vars = append(vars, "BENCH_SWEEP="+strings.Join(counts, ","))
		}
	}
	if len(s.Configs) > 0 {
		vars = append(vars, "BENCH_CONFIGS="+strings.Join(s.Configs, ","))
	}
	if len(s.Scenarios) > 0 {
		vars = append(vars, "BENCH_SCENARIOS="+strings.Join(s.Scenarios, ","))
	}
	return strings.TrimSpace(target + " " + strings.Join(vars, " "))
}

func splitList(text string) []string {
	var out []string
	for field := range strings.SplitSeq(text, ",") {
		if field = strings.TrimSpace(field); field != "" {
			out = append(out, field)
		}
	}
	return out
}
