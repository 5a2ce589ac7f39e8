// Command tephra-bench runs Tephra's scheduling benchmark (internal/bench): for each configuration
// (L, the apiserver's limit; B0, vanilla; B1, upstream gangs; C, Tephra; CU, Tephra on upstream
// gangs mirrored by tephra-controllers, gang scenarios only) and each scenario, a
// fresh local control plane with simulated nodes, on which a fresh scheduler drains a backlog
// while an informer records every bind. `make bench` and `make bench-smoke` call it.
//
//	tephra-bench           full run: results under bench-out/, and docs/benchmarks.md
//	tephra-bench --smoke   100 nodes, a few hundred pods, one repetition; fails unless every
//	                       configuration completes (bench-out/ only)
//	tephra-bench --jobs    the Job burst alone (issue #61): N one-pod Jobs and N/8 Jobs of 8 pods
//	                       created at once, as Tephra Jobs and as batch/v1 Jobs, on one control
//	                       plane as `make up` starts it; --jobs-n (1000) and --jobs-reps (3) size
//	                       it. Results under bench-out/jobs-..., and docs/benchmarks.md
//	tephra-bench --publish bench-out/matrix-... (or sweep-..., jobs-...)
//	                       writes docs/benchmarks.md again from a finished run's results (after
//	                       a change to the report), without running anything
//
// `make bench` runs the matrix, then the Job burst; `make bench-jobs` the Job burst alone.
//
// Sizes come from BENCH_NODES (1000), BENCH_PODS (3000), BENCH_REPS (3); BENCH_SWEEP=1 measures
// scenarios P and G8 with L, B0, B1 and C against 1000, 2000, 5000 and 10 000 nodes instead (or
// BENCH_SWEEP=500,1000,...), one repetition unless BENCH_REPS says otherwise; BENCH_CONFIGS and BENCH_SCENARIOS pick a subset;
// BENCH_OUT moves the output; BENCH_KEEP=1 keeps each cluster's etcd data; BENCH_PROFILE=0 skips
// the CPU profile of C's scheduler. docs/ is updated by complete runs only (no BENCH_CONFIGS or
// BENCH_SCENARIOS, every burst of the Job burst completed) and not with BENCH_DOCS=0. The Job
// burst reads BENCH_OUT, BENCH_KEEP and BENCH_DOCS too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/tephra-dev/tephra/internal/bench"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

func main() {
	smoke := flag.Bool("smoke", false, "smoke run: 100 nodes, a few hundred pods, one repetition; checks completion, not speed")
	publish := flag.String("publish", "", "a finished run's folder: write docs/ again from its results, run nothing")
	jobs := flag.Bool("jobs", false, "run the Job burst alone: Tephra Jobs against batch/v1 Jobs, created at once")
	jobsN := flag.Int("jobs-n", bench.DefaultJobBurstJobs, "the Job burst's N: N one-pod Jobs, and N/8 Jobs of 8 pods")
	jobsReps := flag.Int("jobs-reps", bench.DefaultJobBurstReps, "repetitions of each burst of the Job burst")
	flag.Parse()
	var err error
	flag.Visit(func(f *flag.Flag) {
		// Without --jobs they would be ignored, and a 90-minute run started instead.
		if (f.Name == "jobs-n" || f.Name == "jobs-reps") && !*jobs {
			err = fmt.Errorf("--%s sizes the Job burst: give --jobs too", f.Name)
		}
	})
	switch {
	case err != nil:
	case *publish != "":
		err = republish(*publish)
	case *jobs:
		err = runJobBurst(*jobsN, *jobsReps)
	default:
		err = run(*smoke)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tephra-bench:", err)
		os.Exit(1)
	}
}

func run(smoke bool) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	out := filepath.Join(root, "bench-out")
	s := bench.Settings{OutDir: out, DocsDir: filepath.Join(root, "docs")}
	if smoke {
		s = bench.SmokeSettings(out)
	}
	if err := s.FromEnv(); err != nil {
		return err
	}
	if smoke {
		// The smoke run's sizes are fixed; only the output and subset variables apply.
		s.Nodes, s.Pods, s.Reps, s.Sweep = bench.SmokeNodes, bench.SmokePods, 1, nil
	}
	if len(s.Configs) > 0 || len(s.Scenarios) > 0 || os.Getenv("BENCH_DOCS") == "0" {
		s.DocsDir = ""
	}
	s.Log, s.Progress = os.Stderr, os.Stderr

	res, err := bench.Run(ctx, s)
	if res != nil {
		res.WriteText(os.Stdout)
		fmt.Printf("\nresults, plots, report and the clusters' logs: %s\n", res.Dir)
	}
	if err != nil {
		return err
	}
	if failures := res.Failures(); len(failures) > 0 {
		return fmt.Errorf("%d runs did not complete; docs/ left as it was", len(failures))
	}
	if s.DocsDir != "" {
		if err := res.Publish(s.DocsDir); err != nil {
			return err
		}
		fmt.Printf("report: %s\n", filepath.Join(s.DocsDir, "benchmarks.md"))
	}
	return nil
}

// runJobBurst runs the Job burst with N = jobs and reps repetitions, and publishes it in docs/
// if every burst completed.
func runJobBurst(jobs, reps int) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	// BENCH_OUT and BENCH_KEEP, read as the matrix reads them.
	env := bench.Settings{OutDir: filepath.Join(root, "bench-out")}
	if err := env.FromEnv(); err != nil {
		return err
	}
	s := bench.JobBurstSettings{Jobs: jobs, Reps: reps, OutDir: env.OutDir, Keep: env.Keep, Log: os.Stderr, Progress: os.Stderr}
	if os.Getenv("BENCH_DOCS") != "0" {
		s.DocsDir = filepath.Join(root, "docs")
	}
	res, err := bench.RunJobBurst(ctx, s)
	if res != nil {
		res.WriteText(os.Stdout)
		fmt.Printf("\nresults, report and the cluster's logs: %s\n", res.Dir)
	}
	if err != nil {
		return err
	}
	if failures := res.Failures(); len(failures) > 0 {
		return fmt.Errorf("%d bursts did not complete; docs/ left as it was", len(failures))
	}
	if s.DocsDir != "" {
		if err := bench.PublishJobBurst(s.DocsDir, res); err != nil {
			return err
		}
		fmt.Printf("report: %s\n", filepath.Join(s.DocsDir, "benchmarks.md"))
	}
	return nil
}

// republish writes docs/benchmarks.md and its assets again from the results of a finished run
// (results.json of a matrix run, sweep.json of a sweep, or jobs.json of a Job burst).
func republish(dir string) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	docs := filepath.Join(root, "docs")
	jobs, err := bench.ReadJobBurstResults(filepath.Join(dir, "jobs.json"))
	switch {
	case err == nil:
		if err := bench.PublishJobBurst(docs, jobs); err != nil {
			return err
		}
		fmt.Printf("report: %s\n", filepath.Join(docs, "benchmarks.md"))
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	var res *bench.Results
	for _, name := range []string{"results.json", "sweep.json"} {
		if res, err = bench.ReadResults(filepath.Join(dir, name)); err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if res == nil {
		return fmt.Errorf("%s holds no results.json, sweep.json or jobs.json", dir)
	}
	res.Dir = dir
	if err := res.Publish(docs); err != nil {
		return err
	}
	fmt.Printf("report: %s\n", filepath.Join(docs, "benchmarks.md"))
	return nil
}
