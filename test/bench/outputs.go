package bench

import (
	"errors"
	"os"
	"path/filepath"
)

// writeOutputs writes the results (results.json or sweep.json), their plot (throughput.svg or
// sweep.svg) and a report of them alone (benchmarks.md) to dir.
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

func (res *Results) writePlot(dir string) error {
	if res.Kind == "sweep" {
		return writeSweepPlot(res, filepath.Join(dir, "sweep.svg"))
	}
	return writeThroughputPlot(res, filepath.Join(dir, "throughput.svg"))
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
	return os.WriteFile(filepath.Join(docsDir, "benchmarks.md"), []byte(Markdown(matrix, sweep, "benchmarks")), 0o644)
}
