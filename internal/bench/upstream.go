package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// UpstreamResults are one run of upstream's scheduler_perf workloads (test/benchupstream, make
// bench-upstream) through upstream's default profile and through Tephra's.
type UpstreamResults struct {
	Command    string        `json:"command"`
	Started    time.Time     `json:"started"`
	Finished   time.Time     `json:"finished"`
	Machine    Machine       `json:"machine"`
	Kubernetes string        `json:"kubernetes"`
	Tephra     string        `json:"tephra"`
	Rows       []UpstreamRow `json:"rows"`
}

// UpstreamRow is one workload's SchedulingThroughput under one profile, as scheduler_perf
// reports it (pods/s over the measured pods: Average and the percentiles of its samples). Failed
// says why the workload did not finish, when it did not.
type UpstreamRow struct {
	// Suite is the workload file's directory under test/integration/scheduler_perf.
	Suite    string             `json:"suite"`
	TestCase string             `json:"testCase"`
	Workload string             `json:"workload"`
	Profile  string             `json:"profile"`
	Data     map[string]float64 `json:"data,omitempty"`
	// Duration is scheduler_perf's SchedulingDuration, in seconds: from the creation of the
	// measured pods until every one is scheduled. It is recorded for every workload, also one too
	// short for a throughput sample (sampled once a second).
	Duration float64 `json:"duration,omitempty"`
	Failed   string  `json:"failed,omitempty"`
	// NotRun says why the profile cannot run the workload yet.
	NotRun string `json:"notRun,omitempty"`
	// Threshold is upstream's pass mark for the workload's average throughput on its CI
	// machines (0: none), reported, not applied.
	Threshold float64 `json:"threshold,omitempty"`
	// CPUProfile is the top of the CPU profile of the workload's measured phase, published
	// beside docs/benchmarks.md (a path relative to it) for a workload below 1.0x.
	CPUProfile string `json:"cpuProfile,omitempty"`
	// RawCPUProfile is that profile as scheduler_perf wrote it, for the run only.
	RawCPUProfile string `json:"-"`
}

// NewUpstreamResults starts the record of a run.
func NewUpstreamResults(command, kubernetes, tephra string) *UpstreamResults {
	return &UpstreamResults{Command: command, Started: time.Now(), Machine: thisMachine(), Kubernetes: kubernetes, Tephra: tephra}
}

const upstreamJSON = "upstream.json"

// PublishUpstream writes the run to docsDir/benchmarks/upstream.json and renders
// docsDir/benchmarks.md again with it beside the own benchmark's results.
func PublishUpstream(docsDir string, u *UpstreamResults) error {
	assets := filepath.Join(docsDir, "benchmarks")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(assets, upstreamJSON), append(data, '\n'), 0o644); err != nil {
		return err
	}
	matrix, sweep, err := readPublishedResults(assets)
	if err != nil {
		return err
	}
	return writeReport(docsDir, matrix, sweep, u)
}

// readUpstream reads the upstream run published beside the own benchmark's, if any.
func readUpstream(docsDir string) (*UpstreamResults, error) {
	data, err := os.ReadFile(filepath.Join(docsDir, "benchmarks", upstreamJSON))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u := &UpstreamResults{}
	if err := json.Unmarshal(data, u); err != nil {
		return nil, fmt.Errorf("%s: %w", upstreamJSON, err)
	}
	return u, nil
}

// UpstreamRatio is Tephra's speed against upstream's on a workload: the ratio of their average
// throughputs, or, where either has no throughput sample, upstream's scheduling time over
// Tephra's (byTime). ok is false when neither can be told.
func UpstreamRatio(up, te UpstreamRow) (ratio float64, byTime, ok bool) {
	if up.Data["Average"] > 0 && te.Data["Average"] > 0 {
		return te.Data["Average"] / up.Data["Average"], false, true
	}
	if up.Failed == "" && te.Failed == "" && up.Duration > 0 && te.Duration > 0 {
		return up.Duration / te.Duration, true, true
	}
	return 0, false, false
}

// upstreamSection renders the run as the report's last section ("" without one): one row per
// workload, both profiles' SchedulingThroughput side by side and their ratio.
func upstreamSection(u *UpstreamResults) string {
	if u == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Upstream's scheduler_perf\n\n")
	fmt.Fprintf(&b, "Kubernetes' own scheduler benchmark (`test/integration/scheduler_perf` of k8s.io/kubernetes %s), "+
		"its workload files unchanged, run in one process against an in-process kube-apiserver: once with upstream's default "+
		"profile, once with Tephra's (manifests/overlays/replace-default, the same PodGroups read in memory by the "+
		"scheduler and by tephra-controllers running in the same process). SchedulingThroughput is pods bound per second while the measured pods are created, "+
		"as scheduler_perf reports it (average, and the median and 90th percentile of its 1-second samples); the time "+
		"is its SchedulingDuration, from the measured pods' creation until all are scheduled. Tephra / upstream is the "+
		"ratio of the average throughputs, or, for a workload too short for a throughput sample, upstream's time over "+
		"Tephra's (marked time). "+
		"Upstream's thresholds are its pass marks for the average on its CI machines; they are shown, not applied "+
		"(a machine smaller than upstream's misses them under either profile).\n\n", u.Kubernetes)
	m := u.Machine
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, Go %s; Tephra %s; %s, took %.0f min:\n\n    %s\n\n", m.CPUs, m.CPUModel, m.MemoryGB, m.Go,
		u.Tephra, u.Finished.UTC().Format("2006-01-02"), u.Finished.Sub(u.Started).Minutes(), u.Command)
	type key struct{ suite, testCase, workload string }
	var order []key
	byProfile := map[key]map[string]UpstreamRow{}
	for _, r := range u.Rows {
		k := key{r.Suite, r.TestCase, r.Workload}
		if byProfile[k] == nil {
			byProfile[k] = map[string]UpstreamRow{}
			order = append(order, k)
		}
		byProfile[k][r.Profile] = r
	}
	header := []string{"workload", "upstream's threshold", "upstream avg (p50, p90) pods/s", "Tephra avg (p50, p90) pods/s", "time upstream, Tephra", "Tephra / upstream", "CPU profiles"}
	var rows [][]string
	cell := func(r UpstreamRow, ok bool) string {
		switch {
		case !ok:
			return "not run"
		case r.Failed != "":
			return "failed: " + r.Failed
		case r.NotRun != "":
			return "not run: " + r.NotRun
		}
		if r.Data == nil {
			return "no sample"
		}
		return fmt.Sprintf("%.1f (%.0f, %.0f)", r.Data["Average"], r.Data["Perc50"], r.Data["Perc90"])
	}
	seconds := func(r UpstreamRow) string {
		if r.Duration <= 0 || r.Failed != "" || r.NotRun != "" {
			return "–"
		}
		return fmt.Sprintf("%.1f s", r.Duration)
	}
	for _, k := range order {
		up, upOK := byProfile[k][UpstreamProfileVanilla]
		te, teOK := byProfile[k][UpstreamProfileTephra]
		ratioCell := "–"
		if ratio, byTime, ok := UpstreamRatio(up, te); upOK && teOK && ok {
			ratioCell = fmt.Sprintf("%.2f", ratio)
			if byTime {
				ratioCell += " (time)"
			}
		}
		timeCell := "–"
		if upOK || teOK {
			timeCell = seconds(up) + ", " + seconds(te)
		}
		threshold := "–"
		if t := max(up.Threshold, te.Threshold); t > 0 {
			threshold = fmt.Sprintf("%.0f", t)
		}
		var profiles []string
		for _, r := range []struct {
			row  UpstreamRow
			name string
		}{{up, "upstream"}, {te, "Tephra"}} {
			if r.row.CPUProfile != "" {
				profiles = append(profiles, fmt.Sprintf("[%s](%s)", r.name, r.row.CPUProfile))
			}
		}
		profileCell := "–"
		if len(profiles) > 0 {
			profileCell = strings.Join(profiles, ", ")
		}
		rows = append(rows, []string{fmt.Sprintf("%s/%s/%s", k.suite, k.testCase, k.workload), threshold, cell(up, upOK), cell(te, teOK), timeCell, ratioCell, profileCell})
	}
	slices.SortStableFunc(rows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	writeMarkdownTable(&b, header, rows)
	return b.String()
}

// The profiles of an upstream run.
const (
	UpstreamProfileVanilla = "upstream"
	UpstreamProfileTephra  = "tephra"
)
