package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// writeOutputs writes the results (results.json or sweep.json), their plots (throughput and
// queues, or sweep; SVG and PNG) and a report of them alone (benchmarks.md) to dir.
func (res *Results) writeOutputs(dir, assets string) error {
	if err := res.WriteJSON(filepath.Join(dir, res.jsonName())); err != nil {
		return err
	}
	if err := res.writePlot(dir); err != nil {
		return err
	}
	matrix, sweep := res, (*Results)(nil)
	if res.Kind == "sweep" {
		matrix, sweep = nil, res
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(Markdown(matrix, sweep, assets)), 0o644)
}

func (res *Results) jsonName() string {
	if res.Kind == "sweep" {
		return "sweep.json"
	}
	return "results.json"
}

// writePlot writes the plots, as SVG and PNG: throughput and queues (matrix) or sweep.
func (res *Results) writePlot(dir string) error {
	for _, ext := range []string{".svg", ".png"} {
		if res.Kind == "sweep" {
			if err := writeSweepPlot(res, filepath.Join(dir, "sweep"+ext)); err != nil {
				return err
			}
			continue
		}
		if err := writeThroughputPlot(res, filepath.Join(dir, "throughput"+ext)); err != nil {
			return err
		}
		if err := writeQueuePlot(res, filepath.Join(dir, "queues"+ext)); err != nil {
			return err
		}
	}
	return nil
}

// Publish copies the results and their plot to docsDir/benchmarks/ and renders
// docsDir/benchmarks.md from them and from the other kind's results already there (a matrix run
// keeps the last sweep's and the other way round).
func (res *Results) Publish(docsDir string) error {
	assets := filepath.Join(docsDir, "benchmarks")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return err
	}
	if err := res.WriteJSON(filepath.Join(assets, res.jsonName())); err != nil {
		return err
	}
	if err := res.writePlot(assets); err != nil {
		return err
	}
	matrix, sweep := res, (*Results)(nil)
	other := "sweep.json"
	if res.Kind == "sweep" {
		matrix, sweep, other = nil, res, "results.json"
	}
	previous, err := ReadResults(filepath.Join(assets, other))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case res.Kind == "sweep":
		matrix = previous
	default:
		sweep = previous
	}
	// The report shows a sweep's profiles only without a matrix; they have the same names as the
	// matrix's, which they must not replace.
	if res.Kind != "sweep" || matrix == nil {
		if err := res.copyProfileReports(assets); err != nil {
			return err
		}
	}
	upstream, err := readUpstream(docsDir)
	if err != nil {
		return err
	}
	return writeReport(docsDir, matrix, sweep, upstream)
}

// writeReport renders docsDir/benchmarks.md: the own benchmark's matrix and sweep, the Job
// burst published in docsDir/benchmarks/ (jobburst_report.go), then make bench-upstream's table;
// each may be nil.
func writeReport(docsDir string, matrix, sweep *Results, upstream *UpstreamResults) error {
	jobs, err := readJobBurst(docsDir)
	if err != nil {
		return err
	}
	report := Markdown(matrix, sweep, "benchmarks") + jobBurstSection(jobs) + upstreamSection(upstream)
	return os.WriteFile(filepath.Join(docsDir, "benchmarks.md"), []byte(report), 0o644)
}

// readPublishedResults reads the matrix and the sweep published in assets, each nil if there is
// none.
func readPublishedResults(assets string) (matrix, sweep *Results, err error) {
	for _, r := range []struct {
		name string
		into **Results
	}{{"results.json", &matrix}, {"sweep.json", &sweep}} {
		res, err := ReadResults(filepath.Join(assets, r.name))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, nil, err
		default:
			*r.into = res
		}
	}
	return matrix, sweep, nil
}

// publishedProfileReport says whether a file of a profile is published with the report: the
// short `go tool pprof -top` reports (CPU, and the heap held at the end of the drain); the long
// -cum one, the allocations and the raw profiles stay in the run's folder.
func publishedProfileReport(f string) bool {
	return strings.HasSuffix(f, "-top.txt") || strings.HasSuffix(f, "-top-tephra.txt") || strings.HasSuffix(f, "-heap-inuse_space.txt")
}

// copyProfileReports copies the published pprof reports from the run's folder to dir, under the
// same relative paths.
func (res *Results) copyProfileReports(dir string) error {
	for _, p := range res.Profiles {
		for _, f := range p.Files {
			if !publishedProfileReport(f) || res.Dir == "" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(res.Dir, f))
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
