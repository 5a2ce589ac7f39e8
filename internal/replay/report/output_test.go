package report

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleOutcomes are C and B0 of the two-gang example, a configuration where nothing happened,
// and one whose JCTs span three orders of magnitude (the CDF's log scale).
func sampleOutcomes() []Outcomes {
	outs := Compare([]Run{sequenceRun(), deadlockRun(), {Config: "B1", Title: "nothing ran"}})
	return append(outs, Outcomes{Config: "L", JCTs: []float64{36, 3600, 36000},
		All: Summary{Jobs: 4, Finished: 3}})
}

func TestWritePlots(t *testing.T) {
	for _, tc := range []struct {
		name string
		outs []Outcomes
	}{{"sample", sampleOutcomes()}, {"none", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := WritePlots(dir, "replay-", tc.outs)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"replay-jct-cdf.svg", "replay-gpu-utilisation.svg", "replay-queue-shares.svg"}
			if !slices.Equal(files, want) {
				t.Fatalf("files = %v, want %v", files, want)
			}
			for _, f := range files {
				data, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if root := svgRoot(t, data); root != "svg" {
					t.Errorf("%s: root element %q, want svg", f, root)
				}
			}
		})
	}
}

// svgRoot parses an SVG document whole (so that it is well-formed) and returns its root
// element's name.
func svgRoot(t *testing.T, data []byte) string {
	t.Helper()
	if len(data) == 0 {
		t.Fatal("empty file")
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		if start, ok := tok.(xml.StartElement); ok && root == "" {
			root = start.Name.Local
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	outs := Compare([]Run{sequenceRun(), deadlockRun(), preemptionRun()})
	outs[2].Config = "B1"
	meta := Meta{
		Title:     "Replay of a toy trace",
		Command:   "tephra-replay -trace toy.csv -speedup 60",
		Trace:     []string{"2 jobs over 0s", "8 GPUs asked"},
		Cluster:   "1 node × 4 GPUs",
		Speedup:   60,
		Durations: map[string]time.Duration{"C": 62*time.Minute + 10*time.Second, "B0": 45 * time.Second},
		Plots:     []string{"replay-jct-cdf.svg", "replay-gpu-utilisation.svg", "replay-queue-shares.svg"},
		JobsCSV:   "replay-jobs.csv",
		CPU: map[string]map[string]float64{
			"C":  {"tephra-scheduler": 120.4, "kube-apiserver": 300, "tephra-replay": 10},
			"B0": {"tephra-scheduler": 80},
		},
		CPUProcesses: []string{"tephra-scheduler", "tephra-controllers"},
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, outs, meta); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"# Replay of a toy trace\n",
		"```sh\ntephra-replay -trace toy.csv -speedup 60\n```",
		"- 2 jobs over 0s\n",
		"- Cluster: 1 node × 4 GPUs\n",
		"|  | C | B0 | B1 |\n",
		"| Configuration | Tephra | kube-scheduler |  |\n",
		"| Replay wall-clock | 1h 02m | 45s | – |\n",
		"| CPU: tephra-scheduler | 120 s | 80 s | – |\n",
		"| CPU: tephra-controllers | – | – | – |\n",
		"| CPU: all processes | 430 s | 80 s | – |\n",
		"| Jobs finished | 2 / 2 | 0 / 2 | 2 / 2 |\n",
		"| Jobs that never ran | 0 | 2 | 0 |\n",
		"| JCT p50 | 1m 40s | – | 1m 50s |\n",
		"| Submit to first pod: mean / p90 | – | – | – |\n", // no Seen in these runs
		"| Room to bind: mean / p90 | – | – | – |\n",        // nor nodes
		"| Pods bound with no room first | – | – | – |\n",
		"### Each queue in each configuration\n",
		"| default | C | 2m 30s | 0.83× |",
		"| Makespan | 3m 20s | – | 4m 10s |\n",
		"| GPU busy | 100.0 % | 0.0 % | 96.0 % |\n",
		"| Partial-gang jobs (> 30s) | 0 | 2 | 0 |\n",
		"| Pods partial at end | 0 (0 GPUs) | 2 (4 GPUs) | 0 (0 GPUs) |\n",
		"| Preempted pods | 0 | 0 | 1 |\n",
		"| Discarded GPU-hours | 0 (0.0 % of the work) | 0 (0.0 % of the work) | 0.022 (20.0 % of the work) |\n",
		"| Jobs restarted (most restarts of one) | 0 (0) | 0 (0) | 1 (1) |\n",
		"| Mean JCT at most 1.0× B1's (Philly day) | met: 0.83× |\n",
		"| Mean JCT at most 0.9× B1p's (synthetic day, mixed trace) | – |\n",
		"| No job restarted more than twice | met: most 0 |\n",
		"| Mean JCT at most 0.85× B1p's (synthetic day) | – |\n",
		"| Big gangs' mean wait at most 0.5× B1's (synthetic day) | – |\n",
		"| Wait p90 at most a minute (synthetic day) | missed: 1m 40s |\n",
		"| GPU busy at least B1's (synthetic day) | met: 100.0 % vs 96.0 % |\n",
		"### C — Tephra\n",
		"| default | 1 | 0 | 2 | 2 | 0 |",
		"![Job completion time CDF](replay-jct-cdf.svg)",
		"![GPU allocated (solid) and busy (dashed) over time](replay-gpu-utilisation.svg)",
		"![Queue shares (solid) against deserved (dashed)](replay-queue-shares.svg)",
		"[replay-jobs.csv](replay-jobs.csv)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	var again strings.Builder
	if err := WriteMarkdown(&again, outs, meta); err != nil || again.String() != md {
		t.Errorf("the report is not deterministic (%v)", err)
	}
	var empty strings.Builder
	if err := WriteMarkdown(&empty, nil, Meta{}); err != nil || !strings.Contains(empty.String(), "No configuration ran") {
		t.Errorf("empty report: %v\n%s", err, empty.String())
	}
}

// The main table shows room to bind, from roomRun's figures (TestRoomToBind).
func TestWriteMarkdownRoomToBind(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b, Compare([]Run{roomRun()}), Meta{}); err != nil {
		t.Fatal(err)
	}
	// 20, 5 and 105 s: mean 43.3 s, p90 105 s; s was bound with no room first.
	for _, want := range []string{
		"| Room to bind: mean / p90 | 43s / 1m 45s |\n",
		"| Pods bound with no room first | 1 of 4 |\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestDuration(t *testing.T) {
	for seconds, want := range map[float64]string{
		0:                 "0.0s",
		2.5:               "2.5s",
		45:                "45s",
		59.6:              "1m 00s",
		725:               "12m 05s",
		3599.7:            "1h 00m",
		3*3600 + 120:      "3h 02m",
		52 * 3600:         "52h 00m",
		100 * 3600:        "4d 04h",
		-90:               "-1m 30s",
		math.NaN():        "–",
		math.Inf(1) * 0.5: "–",
	} {
		if got := Duration(seconds); got != want {
			t.Errorf("Duration(%v) = %q, want %q", seconds, got, want)
		}
	}
}

func TestWriteJobsCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJobsCSV(&b, []Run{deadlockRun(), preemptionRun()}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || !slices.Equal(rows[0], JobsColumns) {
		t.Fatalf("rows = %q, want the header and 4 jobs", rows)
	}
	get := func(row []string, column string) string { return row[slices.Index(JobsColumns, column)] }
	a := rows[1]
	for column, want := range map[string]string{
		"config": "B0", "job": "a", "queue": "default", "submit": "0", "replicas": "2",
		"min_replicas": "2", "gpus": "2", "duration": "100", "started": "", "restarts": "0",
		"ended": "", "wait": "", "jct": "", "preempted_pods": "0",
		// a-0 held 2 GPUs alone from 0 to the end (1000).
		"partial_gpu_seconds": "2000",
	} {
		if got := get(a, column); got != want {
			t.Errorf("B0 a %s = %q, want %q", column, got, want)
		}
	}
	l := rows[3]
	for column, want := range map[string]string{
		"config": "C", "job": "l", "started": "10", "restarts": "1", "ended": "250",
		"wait": "10", "jct": "250", "preempted_pods": "1", "partial_gpu_seconds": "0",
	} {
		if got := get(l, column); got != want {
			t.Errorf("C l %s = %q, want %q", column, got, want)
		}
	}
}
