// Command tephra-replay replays a job trace on fresh local control planes, once per scheduler
// configuration (C, Tephra as installed; B0, the stock scheduler; B1, upstream's gang
// scheduling), and reports what happened to the jobs: completion times, waits, GPU utilisation,
// partial gangs, queue shares, preemptions (internal/replay, docs/replay.md). `make replay` calls
// it.
//
//	tephra-replay --trace jobs.csv [--cluster cluster.yaml | --nodes 64 --node-gpus 8 ...]
//	              [--queues queues.yaml] [--speedup 144] [--configs C,B1,B1p,B0] [--out replay-out]
//	tephra-replay --generate trace.csv [--span 24h] [--load 0.8] [--seed 1]
//	tephra-replay --import-philly philly.csv --to trace.csv
//	tephra-replay --import-alibaba openb_pod_list.csv --to trace.csv
//	tephra-replay --trace short.csv --fidelity --configs C
//	                                     replays at speedup 1 and at --speedup: the error the
//	                                     compression adds (fidelity.md)
//	tephra-replay --report replay-out    writes the report again from replay-out/runs.json
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/replay"
	"github.com/tephra-dev/tephra/internal/replay/report"
	"github.com/tephra-dev/tephra/internal/replay/trace"
)

// flags are the command's flags.
type flags struct {
	trace, clusterFile, queuesFile, configs, out string
	shape                                        replay.ClusterShape
	speedup                                      float64
	stall, maxWall, horizon                      time.Duration
	publish, fidelity                            bool
	publishAs                                    string

	generate   string
	span       time.Duration
	load       float64
	seed       uint64
	meanLength time.Duration
	queueNames string
	datasets   int
	datasetGB  float64
	data       replay.DataOptions

	importPhilly, importAlibaba, to, importQueue string

	reportDir string
}

func main() {
	var f flags
	flag.StringVar(&f.trace, "trace", "", "the trace to replay: a CSV in tephra-replay's format (docs/replay.md)")
	flag.StringVar(&f.clusterFile, "cluster", "", "a cluster file (nodes, cpu, memory, gpus, racks); overrides the node flags")
	flag.IntVar(&f.shape.Nodes, "nodes", replay.DefaultClusterShape.Nodes, "simulated nodes")
	flag.StringVar(&f.shape.CPU, "node-cpu", replay.DefaultClusterShape.CPU, "CPUs of a node")
	flag.StringVar(&f.shape.Memory, "node-memory", replay.DefaultClusterShape.Memory, "memory of a node")
	flag.IntVar(&f.shape.GPUs, "node-gpus", replay.DefaultClusterShape.GPUs, "GPUs of a node")
	flag.IntVar(&f.shape.Racks, "racks", 0, "racks the nodes are spread over (topology.kubernetes.io/rack); 0 for none")
	flag.StringVar(&f.queuesFile, "queues", "", "a queues file: weights and GPU guarantees of the trace's queues (default: weight 1 each)")
	flag.Float64Var(&f.speedup, "speedup", replay.DefaultSpeedup, "trace seconds played per second: 144 plays a day in 10 minutes")
	flag.StringVar(&f.configs, "configs", "C,B1,B1p,B0", "the configurations to compare, in the report's order: C (Tephra as installed), its variants (Ch, Cb, Cm, Cr, Cn, Cw, Ct, Cf, Cs, Cl, Cq, Ck, Cio, Ciw: docs/replay.md), Cp (C as a static partition), B1 (upstream's gangs), B1p (B1 packing GPUs), B1j (B1 through batch/v1 Jobs and the Job controller's gangs), B0 (the stock scheduler)")
	flag.StringVar(&f.out, "out", "replay-out", "where the report, plots, per-job CSV, runs.json and the control planes' logs go")
	flag.BoolVar(&f.publish, "publish", false, "also write the report into docs/replay.md and its plots into docs/replay/")
	flag.StringVar(&f.publishAs, "publish-as", "", "--publish: the name of the report's section of docs/replay.md (its markers <!-- replay-report:NAME:begin --> and end), its plots and CSV then in docs/replay/NAME/; \"\" for the day's report")
	flag.BoolVar(&f.fidelity, "fidelity", false, "replay the trace at speedup 1 and at --speedup, and write how far the jobs' completion times moved (fidelity.md)")
	flag.DurationVar(&f.stall, "stall-timeout", 2*time.Minute, "end a run when, all jobs submitted, no job has worked and nothing progressed for this long (wall clock)")
	flag.DurationVar(&f.maxWall, "max-wall", 0, "end each run after this long (wall clock) whatever is left; 0: no limit")
	flag.DurationVar(&f.horizon, "horizon", 0, "end each run at this trace time, jobs not ended then reported as unfinished; 0: twice the time before which no scheduler could end every job")

	flag.StringVar(&f.generate, "generate", "", "write a synthetic trace to this file and exit")
	flag.DurationVar(&f.span, "span", 24*time.Hour, "--generate: the time over which jobs are submitted")
	flag.Float64Var(&f.load, "load", 0.8, "--generate: offered GPU load, GPU-seconds asked over the cluster's GPU-seconds in --span")
	flag.Uint64Var(&f.seed, "seed", 1, "--generate: random seed")
	flag.DurationVar(&f.meanLength, "mean-duration", 30*time.Minute, "--generate: mean job duration")
	flag.StringVar(&f.queueNames, "generate-queues", "team-a,team-b,team-c", "--generate: the queues, comma-separated")
	flag.IntVar(&f.datasets, "datasets-per-queue", 0, "--generate: every job reads one of its queue's that many datasets, the first most often (0: no datasets)")
	flag.Float64Var(&f.datasetGB, "dataset-gb", trace.DefaultDatasetGB, "--generate: the largest size of a dataset, in gigabytes")
	flag.Float64Var(&f.data.BandwidthGBps, "data-bandwidth", replay.DefaultDataBandwidthGBps, "how fast a node pulls a dataset it does not cache, in gigabytes per second of trace time")
	flag.Float64Var(&f.data.NodeCacheGB, "node-cache-gb", replay.DefaultNodeCacheGB, "what a node's data cache holds, in gigabytes (least recently read evicted first)")

	flag.StringVar(&f.importPhilly, "import-philly", "", "convert a Philly trace (Pollux artifact layout) to --to and exit")
	flag.StringVar(&f.importAlibaba, "import-alibaba", "", "convert an Alibaba cluster-trace-gpu-v2023 openb_pod_list to --to and exit")
	flag.StringVar(&f.to, "to", "", "--import-*: the trace file to write")
	flag.StringVar(&f.importQueue, "import-queue", trace.DefaultImportQueue, "--import-*: the queue of jobs whose row names none")

	flag.StringVar(&f.reportDir, "report", "", "write the report again from DIR/runs.json, replay nothing")
	flag.Parse()

	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "tephra-replay:", err)
		os.Exit(1)
	}
}

func run(f flags) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	switch {
	case f.generate != "":
		return generate(f)
	case f.importPhilly != "" || f.importAlibaba != "":
		return importTrace(f)
	case f.reportDir != "":
		saved, err := replay.LoadResults(filepath.Join(f.reportDir, "runs.json"))
		if err != nil {
			return err
		}
		return writeReport(f, f.reportDir, saved)
	case f.trace == "":
		return errors.New("--trace is required (or --generate, --import-philly, --import-alibaba, --report); see docs/replay.md")
	}
	return replayTrace(f)
}

// generate writes a synthetic trace for the cluster of the node flags.
func generate(f flags) error {
	shape, err := clusterShape(f)
	if err != nil {
		return err
	}
	jobs := trace.Generate(trace.GenerateOptions{
		Seed: f.seed, Span: f.span.Seconds(), GPUs: shape.TotalGPUs(), Load: f.load,
		Queues: strings.Split(f.queueNames, ","), MeanDuration: f.meanLength.Seconds(),
		DatasetsPerQueue: f.datasets, DatasetGB: f.datasetGB,
	})
	if err := trace.WriteFile(f.generate, jobs); err != nil {
		return err
	}
	s := trace.Summarize(jobs)
	fmt.Printf("%s: %d jobs, %d pods, over %s, for %d GPUs\n", f.generate, s.Jobs, s.Pods, report.Duration(s.Span), shape.TotalGPUs())
	return nil
}

// importTrace converts a public trace to the replay's format.
func importTrace(f flags) error {
	if f.importPhilly != "" && f.importAlibaba != "" {
		return errors.New("--import-philly and --import-alibaba: one at a time")
	}
	if f.to == "" {
		return errors.New("--to is required: the trace file to write")
	}
	from, importer := f.importPhilly, trace.ImportPhilly
	if f.importAlibaba != "" {
		from, importer = f.importAlibaba, trace.ImportAlibaba
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	var ir trace.ImportReport
	jobs, problems, err := importer(in, trace.ImportOptions{Queue: f.importQueue, Report: &ir})
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	printProblems(os.Stderr, from, problems)
	if err := trace.WriteFile(f.to, jobs); err != nil {
		return err
	}
	fmt.Printf("%s: %d jobs from %s (%d rows skipped, %d jobs ask for more GPUs than the original: see docs/replay.md)\n",
		f.to, ir.Jobs, from, ir.Skipped, ir.RoundedUp)
	return nil
}

// printProblems reports the rows skipped, line by line, the first 20 of them.
func printProblems(w io.Writer, file string, problems []trace.RowError) {
	for i, p := range problems {
		if i == 20 {
			fmt.Fprintf(w, "%s: and %d more rows skipped\n", file, len(problems)-20)
			break
		}
		fmt.Fprintf(w, "%s: skipped %v\n", file, p)
	}
}

func clusterShape(f flags) (replay.ClusterShape, error) {
	if f.clusterFile != "" {
		return replay.ReadClusterShape(f.clusterFile)
	}
	return f.shape, f.shape.Validate()
}

// replayTrace replays the trace through the configurations and writes the report.
func replayTrace(f flags) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	jobs, problems, err := trace.ReadFile(f.trace)
	if err != nil {
		return err
	}
	printProblems(os.Stderr, f.trace, problems)
	if len(jobs) == 0 {
		return fmt.Errorf("%s: no job to replay", f.trace)
	}
	shape, err := clusterShape(f)
	if err != nil {
		return err
	}
	configs, err := replay.ConfigurationsByName(f.configs)
	if err != nil {
		return err
	}
	summary := trace.Summarize(jobs)
	queues, err := replay.ReadQueues(f.queuesFile, summary.Queues)
	if err != nil {
		return err
	}
	if err := fitsCluster(jobs, shape); err != nil {
		return err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	out, err := filepath.Abs(f.out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	opts := replay.Options{
		Root: root, Dir: filepath.Join(out, "clusters"), Log: os.Stderr,
		Jobs: jobs, Shape: shape, Queues: queues, Speedup: f.speedup,
		Configurations: configs, StallTimeout: f.stall, MaxWall: f.maxWall, Horizon: f.horizon.Seconds(),
		Data: f.data,
	}
	if f.fidelity {
		return measureFidelity(ctx, opts, out)
	}
	results, err := replay.Replay(ctx, opts)
	if err != nil {
		return err
	}
	saved := replay.Saved{
		Command: commandLine(), Trace: traceLines(f.trace, summary, problems, shape), Cluster: shape.String(),
		Speedup: f.speedup, Results: results,
	}
	if err := replay.SaveResults(filepath.Join(out, "runs.json"), saved); err != nil {
		return err
	}
	return writeReport(f, out, saved)
}

// measureFidelity replays the trace at speedup 1, then at the speedup asked, and writes how far
// the jobs' completion times and waits moved, configuration by configuration, to fidelity.md.
func measureFidelity(ctx context.Context, opts replay.Options, out string) error {
	speedup := opts.Speedup
	opts.Speedup = 1
	reference, err := replay.Replay(ctx, opts)
	if err != nil {
		return err
	}
	opts.Speedup = speedup
	compressed, err := replay.Replay(ctx, opts)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "Made by `%s`.\n\n", commandLine())
	for i := range reference {
		if err := replay.CompareFidelity(reference[i], compressed[i], 1, speedup).WriteMarkdown(&md); err != nil {
			return err
		}
		md.WriteString("\n")
	}
	path := filepath.Join(out, "fidelity.md")
	if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Print(md.String())
	fmt.Printf("fidelity: %s\n", path)
	return nil
}

// fitsCluster refuses a trace with a pod that no node of the cluster could hold: it would wait
// for good in every configuration, and say nothing about scheduling.
func fitsCluster(jobs []trace.Job, shape replay.ClusterShape) error {
	for _, j := range jobs {
		if j.GPUs > shape.GPUs {
			return fmt.Errorf("job %s (line %d) asks %d GPUs a pod, more than a node's %d", j.Name, j.Line, j.GPUs, shape.GPUs)
		}
	}
	return nil
}

// writeReport writes report.md, the plots and jobs.csv into dir, and with --publish the report
// into docs/replay.md and its files into docs/replay/.
func writeReport(f flags, dir string, saved replay.Saved) error {
	runs := make([]report.Run, len(saved.Results))
	durations := map[string]time.Duration{}
	cpu := map[string]map[string]float64{}
	for i, r := range saved.Results {
		runs[i] = r.Run
		durations[r.Run.Config] = r.Wall
		if len(r.CPU) > 0 {
			cpu[r.Run.Config] = r.CPU
		}
	}
	outs := report.Compare(runs)
	targets := []string{dir}
	var docs string
	if f.publish {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return err
		}
		if problem := publishedNameProblem(f.publishAs); problem != "" {
			return fmt.Errorf("--publish-as %q: %s", f.publishAs, problem)
		}
		docs = filepath.Join(root, "docs")
		targets = append(targets, filepath.Join(docs, "replay", f.publishAs))
	}
	for i, target := range targets {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		plots, err := report.WritePlots(target, "", outs)
		if err != nil {
			return err
		}
		csvFile, err := os.Create(filepath.Join(target, "jobs.csv"))
		if err != nil {
			return err
		}
		err = report.WriteJobsCSV(csvFile, runs)
		if cerr := csvFile.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		meta := report.Meta{
			Title: "Replay of " + filepath.Base(firstNonEmpty(f.trace, traceOf(saved.Command), "the trace")), Command: saved.Command, Trace: saved.Trace,
			Cluster: saved.Cluster, Speedup: saved.Speedup, Durations: durations, Plots: plots, JobsCSV: "jobs.csv",
			CPU: cpu, CPUProcesses: append(slices.Clone(replay.CPUProcesses), replay.DriverProcess),
		}
		for _, r := range saved.Results {
			if r.Stopped != "" {
				meta.Trace = append(meta.Trace, fmt.Sprintf("%s stopped before every job ended: %s.", r.Run.Config, r.Stopped))
			}
			for _, p := range r.Problems {
				meta.Trace = append(meta.Trace, fmt.Sprintf("%s: %s.", r.Run.Config, p))
			}
		}
		if i > 0 {
			// Published: into docs/replay.md, whose links are relative to docs/.
			prefix := path.Join("replay", f.publishAs) + "/"
			for k, p := range meta.Plots {
				meta.Plots[k] = prefix + p
			}
			meta.JobsCSV = prefix + "jobs.csv"
			var md bytes.Buffer
			if err := report.WriteMarkdown(&md, outs, meta); err != nil {
				return err
			}
			page := filepath.Join(docs, "replay.md")
			if err := publishSection(page, f.publishAs, md.String()); err != nil {
				return err
			}
			fmt.Printf("published: %s\n", page)
			continue
		}
		mdFile, err := os.Create(filepath.Join(target, "report.md"))
		if err != nil {
			return err
		}
		err = report.WriteMarkdown(mdFile, outs, meta)
		if cerr := mdFile.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Printf("report: %s\n", filepath.Join(target, "report.md"))
	}
	return nil
}

// markers are the published report's place in docs/replay.md: the day's report, or the section
// named by --publish-as.
func markers(name string) (begin, end string) {
	if name == "" {
		return "<!-- replay-report:begin -->", "<!-- replay-report:end -->"
	}
	return "<!-- replay-report:" + name + ":begin -->", "<!-- replay-report:" + name + ":end -->"
}

// publishedNameProblem says why a --publish-as name cannot name a section and a directory.
func publishedNameProblem(name string) string {
	if name == "" {
		return ""
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return ""
}

// publishSection writes a report between the markers of the named section of docs/replay.md,
// its headings one level down, so that it sits under the page's own.
func publishSection(path, name, md string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	page := string(data)
	reportBegin, reportEnd := markers(name)
	begin, end := strings.Index(page, reportBegin), strings.Index(page, reportEnd)
	if begin < 0 || end < begin {
		return fmt.Errorf("%s has no %s ... %s section to publish into", path, reportBegin, reportEnd)
	}
	lines := strings.Split(strings.TrimSpace(md), "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "#") {
			lines[i] = "#" + line
		}
	}
	page = page[:begin+len(reportBegin)] + "\n" + strings.Join(lines, "\n") + "\n" + page[end:]
	return os.WriteFile(path, []byte(page), 0o644)
}

func traceLines(path string, s trace.Summary, problems []trace.RowError, shape replay.ClusterShape) []string {
	lines := []string{
		fmt.Sprintf("%s: %d jobs, %d pods, submitted over %s, in queues %s.", filepath.Base(path), s.Jobs, s.Pods, report.Duration(s.Span), strings.Join(s.Queues, ", ")),
	}
	if s.Span > 0 && shape.TotalGPUs() > 0 {
		lines = append(lines, fmt.Sprintf("Offered GPU load: %.2f (GPU-seconds asked over the cluster's GPU-seconds while jobs are submitted).",
			s.GPUSeconds/(s.Span*float64(shape.TotalGPUs()))))
	}
	if len(problems) > 0 {
		lines = append(lines, fmt.Sprintf("%d malformed rows were skipped.", len(problems)))
	}
	return lines
}

// traceOf is the trace a replay's command line names, "" if none.
func traceOf(command string) string {
	fields := strings.Fields(command)
	for i, f := range fields {
		if (f == "--trace" || f == "-trace") && i+1 < len(fields) {
			return fields[i+1]
		}
		if v, ok := strings.CutPrefix(f, "--trace="); ok {
			return v
		}
	}
	return ""
}

func commandLine() string {
	args := append([]string{"tephra-replay"}, os.Args[1:]...)
	return strings.Join(args, " ")
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
