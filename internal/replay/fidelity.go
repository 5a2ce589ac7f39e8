package replay

import (
	"fmt"
	"io"
	"math"

	"github.com/tephra-dev/tephra/internal/replay/report"
)

// Fidelity compares the same configuration's runs of a trace at two speedups: how far each job's
// completion time and wait moved when the clock was compressed. At speedup 1 the replay plays
// the trace in real time, so the difference is the error the compression adds.
type Fidelity struct {
	Config             string
	Reference, Speedup float64
	// Jobs is the number of jobs that finished in both runs.
	Jobs int
	// JCTError and WaitError are the absolute differences in trace seconds, per job;
	// JCTRelative is the JCT's difference over its reference JCT.
	JCTError, WaitError, JCTRelative report.Stats
	// MeanJCT are the two runs' mean JCTs.
	MeanJCTReference, MeanJCT float64
}

// CompareFidelity compares a reference run (speedup 1) with a compressed one of the same trace.
func CompareFidelity(reference, compressed Result, referenceSpeedup, speedup float64) Fidelity {
	f := Fidelity{Config: reference.Run.Config, Reference: referenceSpeedup, Speedup: speedup}
	byName := map[string]report.Job{}
	for _, j := range compressed.Run.Jobs {
		byName[j.Name] = j
	}
	var jctErr, waitErr, rel, refJCT, jct []float64
	for _, r := range reference.Run.Jobs {
		c, ok := byName[r.Name]
		if !ok || math.IsNaN(r.Ended) || math.IsNaN(c.Ended) || len(r.Started) == 0 || len(c.Started) == 0 {
			continue
		}
		a, b := r.Ended-r.Submit, c.Ended-c.Submit
		refJCT, jct = append(refJCT, a), append(jct, b)
		jctErr = append(jctErr, math.Abs(b-a))
		rel = append(rel, math.Abs(b-a)/a)
		waitErr = append(waitErr, math.Abs((c.Started[0]-c.Submit)-(r.Started[0]-r.Submit)))
	}
	f.Jobs = len(jctErr)
	f.JCTError, f.WaitError, f.JCTRelative = report.StatsOf(jctErr), report.StatsOf(waitErr), report.StatsOf(rel)
	f.MeanJCTReference, f.MeanJCT = mean(refJCT), mean(jct)
	return f
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// WriteMarkdown writes the comparison as a table.
func (f Fidelity) WriteMarkdown(w io.Writer) error {
	_, err := fmt.Fprintf(w, `| %s: %g× against %g×, %d jobs | mean | p50 | p90 | p99 |
|---|---:|---:|---:|---:|
| JCT difference | %s | %s | %s | %s |
| JCT difference / JCT | %.1f %% | %.1f %% | %.1f %% | %.1f %% |
| wait difference | %s | %s | %s | %s |

Mean JCT: %s at %g×, %s at %g×.
`, f.Config, f.Speedup, f.Reference, f.Jobs,
		report.Duration(f.JCTError.Mean), report.Duration(f.JCTError.P50), report.Duration(f.JCTError.P90), report.Duration(f.JCTError.P99),
		100*f.JCTRelative.Mean, 100*f.JCTRelative.P50, 100*f.JCTRelative.P90, 100*f.JCTRelative.P99,
		report.Duration(f.WaitError.Mean), report.Duration(f.WaitError.P50), report.Duration(f.WaitError.P90), report.Duration(f.WaitError.P99),
		report.Duration(f.MeanJCTReference), f.Reference, report.Duration(f.MeanJCT), f.Speedup)
	return err
}
