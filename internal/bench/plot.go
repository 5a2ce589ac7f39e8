package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writeThroughputPlot draws pods bound per second per scenario, a bar per configuration (the
// median of the repetitions), to path (.svg or .png).
func writeThroughputPlot(res *Results, path string) error {
	var scenarios []*Scenario
	var labels []string
	for _, sc := range res.Scenarios {
		// Q's binds follow its jobs' ends, not the scheduler's speed.
		if sc.Skip == "" && !sc.Queues {
			scenarios = append(scenarios, sc)
			labels = append(labels, sc.Name)
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Pods bound per second (%s)", res.describe())
	p.Y.Label.Text = "pods/s"
	p.Add(plotter.NewGrid())
	width := vg.Points(20)
	n := len(res.Configurations)
	highest := 0.0
	for i, c := range res.Configurations {
		values := make(plotter.Values, len(scenarios))
		for j, sc := range scenarios {
			if c.Unavailable == "" {
				if s := summarize(res, c.Name, sc.Name, res.Nodes); !math.IsNaN(s.throughput) {
					values[j] = s.throughput
					highest = max(highest, s.throughput)
				}
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = vg.Length(float64(i)-float64(n-1)/2) * width
		p.Add(bars)
		name := c.Name
		if c.Unavailable != "" {
			name += " (unavailable)"
		}
		p.Legend.Add(name, bars)
	}
	p.Legend.Top = true
	p.NominalX(labels...)
	// Room for the bars beside each scenario's tick, and for the legend above them.
	p.X.Min, p.X.Max = -0.6, float64(len(labels))-0.4
	p.Y.Min, p.Y.Max = 0, max(highest, 1)*1.3
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

// writeSweepPlot draws pods bound per second against the number of nodes, a panel per scenario
// of the sweep and a line per configuration, to path.
func writeSweepPlot(res *Results, path string) error {
	var panels []*plot.Plot
	for _, sc := range res.Scenarios {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s (%d pods): pods bound per second", sc.Name, res.Pods)
		p.X.Label.Text = "nodes"
		p.Y.Label.Text = "pods/s"
		p.Add(plotter.NewGrid())
		highest := 0.0
		for i, c := range res.Configurations {
			if c.Unavailable != "" || !c.runs(sc) {
				continue
			}
			var xys plotter.XYs
			for _, nodes := range res.Sweep {
				if s := summarize(res, c.Name, sc.Name, nodes); !math.IsNaN(s.throughput) {
					xys = append(xys, plotter.XY{X: float64(nodes), Y: s.throughput})
					highest = max(highest, s.throughput)
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(1.5)
			points.Color = plotutil.Color(i)
			points.Shape = plotutil.Shape(i)
			p.Add(line, points)
			p.Legend.Add(c.Name, line, points)
		}
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, max(highest, 1)*1.3
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil
	}
	return savePanels(panels, path)
}

// writeQueuePlot draws scenario Q's first completed repetition per configuration: the GPUs each
// queue held over time (solid) and deserved (dashed), a panel per configuration, to path (.svg
// or .png). It writes nothing if no Q run completed.
func writeQueuePlot(res *Results, path string) error {
	var panels []*plot.Plot
	highest := 1.0
	for _, c := range res.Configurations {
		var series *QueueSeries
		for _, r := range res.runs(c.Name, "Q", res.Nodes) {
			if ok, _ := r.complete(); ok && r.Queues != nil && r.Queues.Series != nil {
				series = r.Queues.Series
				highest = max(highest, float64(r.Queues.GPUs))
				break
			}
		}
		if series == nil {
			continue
		}
		p := plot.New()
		p.Title.Text = c.Name
		p.X.Label.Text = "seconds from the first bind"
		p.Y.Label.Text = "GPUs held"
		p.Add(plotter.NewGrid())
		for q := range series.Held {
			for _, kind := range []struct {
				values [][]float64
				dashed bool
			}{{series.Held, false}, {series.Deserved, true}} {
				xys := make(plotter.XYs, len(kind.values[q]))
				for i, v := range kind.values[q] {
					xys[i] = plotter.XY{X: float64(i) * series.StepSeconds, Y: v}
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					return err
				}
				line.Color = plotutil.Color(q)
				line.Width = vg.Points(1.2)
				if kind.dashed {
					line.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
					line.Width = vg.Points(0.8)
				} else if q < len(benchQueues) {
					p.Legend.Add(fmt.Sprintf("%s (weight %d)", benchQueues[q].Name, benchQueues[q].Weight), line)
				}
				p.Add(line)
			}
		}
		p.Legend.Top = true
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil
	}
	longest := 0.0
	for _, p := range panels {
		longest = max(longest, p.X.Max)
	}
	for _, p := range panels {
		p.Y.Min, p.Y.Max = 0, highest*1.35
		p.X.Min, p.X.Max = 0, longest
	}
	return savePanels(panels, path)
}

// savePanels draws panels in a grid of two columns to path (.svg or .png).
func savePanels(panels []*plot.Plot, path string) error {
	cols := min(2, len(panels))
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		grid[i/cols][i%cols] = p
	}
	width, height := 10*vg.Inch, vg.Length(rows)*3.5*vg.Inch
	var canvas vg.CanvasWriterTo
	if strings.HasSuffix(path, ".png") {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(width, height)}
	} else {
		canvas = vgsvg.New(width, height)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(filepath.Clean(path))
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
