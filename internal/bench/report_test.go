package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

// syntheticResults are results of a run with every figure set, for the report's tests.
func syntheticResults() *Results {
	res := &Results{Kind: "matrix", Command: "make bench", Nodes: 100, Pods: 300, Reps: 2, Machine: thisMachine(), Kubernetes: "v1.37.1", Tephra: "dev"}
	for _, c := range Configurations {
		status := ConfigurationStatus{Configuration: *c}
		if c.Name == "B1" {
			status.Unavailable = "no upstream gangs here"
		}
		res.Configurations = append(res.Configurations, status)
	}
	res.Scenarios = Scenarios
	speed := map[string]float64{"L": 400, "B0": 200, "C": 100, "CU": 90, "CG": 95}
	for rep := 1; rep <= 2; rep++ {
		for _, c := range []string{"L", "B0", "C", "CU", "CG"} {
			for _, sc := range []string{"P", "G8", "G64", "GI", "Q"} {
				if !configurationByName(c).runs(scenarioByName(sc)) {
					continue
				}
				r := RunResult{Configuration: c, Scenario: sc, Rep: rep, Nodes: 100, Pods: 300, Bound: 300, BoundAll: 300,
					Throughput:     Throughput{Average: speed[c] * float64(rep), P50: speed[c], P99: 2 * speed[c]},
					LatencySeconds: &Quantiles{P50: 1, P99: 2}, MutatingRequestsPerPod: 2}
				if c != "L" {
					r.SchedulerCPUSecondsPer1000Pods, r.SchedulerPeakRSSMiB = ptr.To(1.5), ptr.To(80.0)
					r.SchedulingAttemptsPerPod = ptr.To(1.25)
				}
				if c == "CU" || c == "CG" {
					r.ControllersCPUSecondsPer1000Pods = ptr.To(0.4)
				}
				if sc == "G8" {
					r.Gangs, r.GangsWhole, r.GangWholeSeconds = 37, 37, &Quantiles{P50: 0.5, P99: 0.9}
				}
				if sc == "Q" {
					r.Queues = &QueueResult{GPUs: 12, MakespanSeconds: 12, LowerBoundSeconds: 10, Utilisation: 0.9,
						Series: &QueueSeries{StepSeconds: 0.25, Held: [][]float64{{1, 2}, {3, 4}, {5, 6}}, Deserved: [][]float64{{2, 2}, {4, 4}, {6, 6}}}}
					for _, q := range benchQueues {
						r.Queues.Queues = append(r.Queues.Queues, QueueFigures{Name: q.Name, Weight: q.Weight, Pods: 20,
							AdmissionSeconds: &Quantiles{P50: 3, P99: 6}, Share: 0.3, Deserved: float64(q.Weight) / 6, Deviation: 0.05})
					}
				}
				res.Runs = append(res.Runs, r)
			}
		}
	}
	return res
}

func TestReport(t *testing.T) {
	res := syntheticResults()
	assert.Empty(t, res.Failures())
	assert.Equal(t, []string{"B1 unavailable: no upstream gangs here"}, res.Unavailable())

	header, rows := scenarioTable(res, scenarioByName("P"), 100)
	require.Len(t, rows, 4)
	assert.Len(t, rows[0], len(header))
	c := rows[3]
	assert.Equal(t, "C", c[0])
	assert.Equal(t, "150 (100–200)", c[1], "median of the repetitions and their range")
	assert.Equal(t, "0.50×", c[4], "against B0")
	assert.Equal(t, "0.25×", c[5], "against L")
	assert.Equal(t, "1.25", c[14], "scheduling attempts per pod")
	assert.Equal(t, "1.50", c[15])
	assert.Equal(t, "–", rows[0][14], "L has no scheduler")
	assert.Equal(t, "–", rows[0][15], "L has no scheduler")
	assert.Contains(t, rows[2][1], "unavailable")
	for _, row := range rows {
		assert.NotEqual(t, "CU", row[0], "CU does not run P, whose pods have no gangs")
	}
	_, rows = scenarioTable(res, scenarioByName("G8"), 100)
	require.Len(t, rows, 6)
	assert.Equal(t, "CG", rows[5][0])
	cu := rows[4]
	assert.Equal(t, "CU", cu[0])
	assert.Equal(t, "135 (90–180)", cu[1])
	assert.Equal(t, "1.50 (+ 0.40 controllers)", cu[15], "tephra-controllers' CPU beside the scheduler's, not added")

	byText := map[string]goal{}
	for _, g := range goals(res) {
		byText[g.text] = g
	}
	assert.Equal(t, goal{text: "P: C at least 0.95 × B0 (C/B0)", measured: "0.50×", met: "no"}, byText["P: C at least 0.95 × B0 (C/B0)"])
	assert.Equal(t, "–", byText["G8: C at least 2 × B1 (C/B1)"].met, "B1 did not run")
	assert.Contains(t, byText, "G8: gangs no slower than plain pods (C on G8 / C on P)")
	for _, text := range []string{"GI: C's sched CPU s/1000 pods at most 1.2 × B0's (C/B0)", "GI: C's sched peak RSS at most 1.2 × B0's (C/B0)"} {
		require.Contains(t, byText, text)
		assert.Contains(t, []string{"yes", "no"}, byText[text].met, text)
	}
	assert.Equal(t, "no", byText["GI: C at least 0.8 × L (C/L)"].met)
	assert.Equal(t, "yes", byText["C binds no pod of a gang that is not whole (G8, G64, GI)"].met)
	partly := syntheticResults()
	for i := range partly.Runs {
		if r := &partly.Runs[i]; r.Configuration == "C" && r.Scenario == "G8" {
			r.PeakPartialGangPods, r.GangBindSpreadSeconds = 8, &Quantiles{P50: 0.01, P99: 0.02}
		}
	}
	partlyGoals := goals(partly)
	last := partlyGoals[len(partlyGoals)-1]
	assert.Equal(t, "no: only while a whole gang's binds are in flight", last.met)
	assert.Equal(t, "left at the end: 0; peak while binding: 8 (gang bind spread p99 up to 20 ms)", last.measured)

	md := Markdown(res, nil, "benchmarks")
	for _, want := range []string{"## Machine", "make bench", "### G64", "### Q", "bench-q3 (3)", "makespan / bound", "1.20", "90.0 %",
		"benchmarks/throughput.svg", "benchmarks/queues.svg", "B1 unavailable", "### Goals", "| P: C at least 0.95 × B0 (C/B0) | 0.50× | no |"} {
		assert.Contains(t, md, want)
	}

	header, rows = queueShareTable(res, 100)
	require.Len(t, rows, 3*3+1, "three queues per configuration; one row for B1")
	assert.Len(t, rows[0], len(header))
	assert.Equal(t, []string{"C", "bench-q3 (3)", "20", "3.00 s", "6.00 s", "30.0 %", "50.0 %", "5.0 %"}, rows[len(rows)-1])

	// A failed run shows in the table and in Failures.
	res.Runs[0].Error = "scheduler exited"
	assert.Len(t, res.Failures(), 1)

	dir := t.TempDir()
	require.NoError(t, res.writeOutputs(dir, "."))
	for _, name := range []string{"results.json", "throughput.svg", "throughput.png", "queues.svg", "queues.png", "benchmarks.md"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	back, err := ReadResults(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	assert.Equal(t, len(res.Runs), len(back.Runs))
}

func TestPublishKeepsTheOtherKind(t *testing.T) {
	docs := t.TempDir()
	matrix := syntheticResults()
	require.NoError(t, matrix.Publish(docs))

	sweep := syntheticResults()
	sweep.Kind, sweep.Nodes, sweep.Sweep = "sweep", 0, []int{100}
	require.NoError(t, sweep.Publish(docs))

	md, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "### GI", "the matrix results stay")
	assert.Contains(t, string(md), "## Cost curve")
	for _, name := range []string{"results.json", "sweep.json", "throughput.svg", "sweep.svg"} {
		assert.FileExists(t, filepath.Join(docs, "benchmarks", name))
	}
}

// A sweep's profile reports have the names of the matrix's, which the report shows: published
// after a matrix, the sweep keeps its own in its run folder.
func TestPublishedSweepKeepsTheMatrixProfiles(t *testing.T) {
	docs := t.TempDir()
	withProfile := func(kind, text string) *Results {
		res := syntheticResults()
		if kind == "sweep" {
			res.Kind, res.Nodes, res.Sweep = "sweep", 0, []int{100}
		}
		res.Dir = t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(res.Dir, "profiles"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(res.Dir, "profiles", "C-P-rep1-top.txt"), []byte(text), 0o644))
		res.Profiles = []ProfileSummary{{Configuration: "C", Scenario: "P", Rep: 1, Files: []string{"profiles/C-P-rep1-top.txt"}}}
		return res
	}
	require.NoError(t, withProfile("matrix", "matrix profile").Publish(docs))
	require.NoError(t, withProfile("sweep", "sweep profile").Publish(docs))
	data, err := os.ReadFile(filepath.Join(docs, "benchmarks", "profiles", "C-P-rep1-top.txt"))
	require.NoError(t, err)
	assert.Equal(t, "matrix profile", string(data))
}

func TestReportProfiles(t *testing.T) {
	res := syntheticResults()
	res.Dir = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(res.Dir, "profiles"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(res.Dir, "profiles", "C-P-rep1-top.txt"), []byte("top"), 0o644))
	res.Profiles = []ProfileSummary{{Configuration: "C", Scenario: "P", Rep: 1, SampledSeconds: 12, WallSeconds: 15,
		Files:   []string{"profiles/C-P-rep1-0.pb.gz", "profiles/C-P-rep1-top.txt"},
		Phases:  []ProfileEntry{{Name: "scheduling cycles, serial part (ScheduleOne)", Cum: 66.5}},
		TopFlat: []ProfileEntry{{Name: "runtime.scanobject", Flat: 9.7, Cum: 12.2}},
		Tephra:  []ProfileEntry{{Name: "github.com/tephra-dev/tephra/plugins/queue.(*Queue).PreFilter", Flat: 4, Cum: 25.1}}}}
	res.Profiles = append(res.Profiles, ProfileSummary{Configuration: "B0", Scenario: "P", Rep: 1, SampledSeconds: 6, WallSeconds: 10,
		Phases: []ProfileEntry{{Name: "scheduling cycles, serial part (ScheduleOne)", Cum: 50}, {Name: "garbage collection (background marking)", Cum: 10}}})
	for i := range res.Runs {
		if res.Runs[i].Scenario == "P" && res.Runs[i].Rep == 1 {
			res.Runs[i].Profiled = true
		}
	}
	md := Markdown(res, nil, "benchmarks")
	for _, want := range []string{"### Where the schedulers spend their CPU in P", "|  | B0 | C |", "| scheduling cycles, serial part (ScheduleOne) | 50.0 % | 66.5 % |",
		"| garbage collection (background marking) | 10.0 % | – |", "(*Queue).PreFilter", "[C-P-rep1-top.txt](benchmarks/profiles/C-P-rep1-top.txt)",
		"12.0 s / 15.0 s", "C's scheduler used 1.50 CPU-seconds per 1000 pods against B0's 1.50 (1.00×)"} {
		assert.Contains(t, md, want)
	}
	docs := t.TempDir()
	require.NoError(t, res.Publish(docs))
	assert.FileExists(t, filepath.Join(docs, "benchmarks", "profiles", "C-P-rep1-top.txt"))
}

// make bench-upstream's table joins the own benchmark's report, and each publication keeps the
// other's: not run, failed and measured rows each say so, with the profiles' ratio.
func TestPublishUpstreamKeepsTheOwnResults(t *testing.T) {
	docs := t.TempDir()
	require.NoError(t, syntheticResults().Publish(docs))
	u := NewUpstreamResults("make bench-upstream", "v1.37.1", "test")
	u.Finished = u.Started.Add(20 * time.Minute)
	u.Rows = []UpstreamRow{
		{Suite: "misc", TestCase: "SchedulingBasic", Workload: "5000Nodes_10000Pods", Profile: UpstreamProfileVanilla, Threshold: 680, Data: map[string]float64{"Average": 200, "Perc50": 180, "Perc90": 350}, Duration: 50},
		{Suite: "misc", TestCase: "SchedulingBasic", Workload: "5000Nodes_10000Pods", Profile: UpstreamProfileTephra, Threshold: 680, Data: map[string]float64{"Average": 150, "Perc50": 140, "Perc90": 250}, Duration: 66.7, CPUProfile: "benchmarks/profiles/t.txt"},
		{Suite: "workload_preemption", TestCase: "GangPreemptionBasic", Workload: "w", Profile: UpstreamProfileVanilla, Failed: "the workload failed"},
		{Suite: "workload_preemption", TestCase: "GangPreemptionBasic", Workload: "w", Profile: UpstreamProfileTephra, NotRun: "no PodGroupPostFilter"},
		// Too short for a throughput sample: compared by time.
		{Suite: "workload_preemption", TestCase: "GangPreemptionBasic", Workload: "short", Profile: UpstreamProfileVanilla, Duration: 0.8},
		{Suite: "workload_preemption", TestCase: "GangPreemptionBasic", Workload: "short", Profile: UpstreamProfileTephra, Duration: 1.6},
	}
	require.NoError(t, PublishUpstream(docs, u))
	md, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "### GI", "the own results stay")
	assert.Contains(t, string(md), "| misc/SchedulingBasic/5000Nodes_10000Pods | 680 | 200.0 (180, 350) | 150.0 (140, 250) | 50.0 s, 66.7 s | 0.75 | [Tephra](benchmarks/profiles/t.txt) |")
	assert.Contains(t, string(md), "| workload_preemption/GangPreemptionBasic/w | – | failed: the workload failed | not run: no PodGroupPostFilter | –, – | – | – |")
	assert.Contains(t, string(md), "| workload_preemption/GangPreemptionBasic/short | – | no sample | no sample | 0.8 s, 1.6 s | 0.50 (time) | – |")

	require.NoError(t, syntheticResults().Publish(docs))
	md, err = os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "## Upstream's scheduler_perf", "a later make bench keeps the upstream table")
}
