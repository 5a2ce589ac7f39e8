package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The plots' file names, after WritePlots' prefix.
const (
	jctFile         = "jct-cdf.svg"
	utilisationFile = "gpu-utilisation.svg"
	sharesFile      = "queue-shares.svg"
)

// Sizes of the plots: a legend entry's height, what a panel spends outside its data area (title,
// axes), and the fraction of the data area a legend may cover before the plot grows.
const (
	legendEntry  = 12 * vg.Length(1)
	panelMargins = 70 * vg.Length(1)
	legendShare  = 0.4
)

// WritePlots draws the configurations' outcomes as three SVG files in dir, named prefix followed
// by jct-cdf.svg (completion time CDFs), gpu-utilisation.svg (GPUs allocated and busy over time)
// and queue-shares.svg (each queue's share against its deserved share, a panel per
// configuration). It returns the names relative to dir, in that order, to embed in the Markdown.
// Configurations where nothing ran, or no configurations, make empty plots, not errors.
func WritePlots(dir, prefix string, outs []Outcomes) (files []string, err error) {
	for _, p := range []struct {
		name string
		draw func(path string, outs []Outcomes) error
	}{{jctFile, writeJCTPlot}, {utilisationFile, writeUtilisationPlot}, {sharesFile, writeSharesPlot}} {
		name := prefix + p.name
		if err := p.draw(filepath.Join(dir, name), outs); err != nil {
			return files, fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, name)
	}
	return files, nil
}

// writeJCTPlot draws each configuration's JCT CDF, as a fraction of all its jobs: jobs that did
// not finish keep the curve below 1, so a configuration that finishes fewer jobs does not look
// faster. Hours are on a log scale when JCTs span two orders of magnitude or more, as traces'
// do, so that both the short and the long jobs are readable.
func writeJCTPlot(path string, outs []Outcomes) error {
	p := plot.New()
	p.Title.Text = "Job completion time CDF"
	p.Y.Label.Text = "fraction of all jobs"
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range outs {
		for _, v := range outs[i].JCTs {
			if h := v / 3600; h > 0 {
				lo, hi = math.Min(lo, h), math.Max(hi, h)
			}
		}
	}
	logScale := hi > 0 && hi/lo >= 100
	if logScale {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, decadeTicks{}
		lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		p.X.Label.Text = "JCT (hours, log scale)"
	} else {
		lo, hi = 0, math.Max(hi, 0)
		if hi == 0 {
			hi = 1 // nothing finished: an empty axis, not one from -1 to 1
		}
		p.X.Label.Text = "JCT (hours)"
	}
	for i := range outs {
		o := &outs[i]
		if len(o.JCTs) == 0 || o.All.Jobs == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, 2*len(o.JCTs))
		for k, v := range o.JCTs {
			x := math.Max(v/3600, lo)
			xys = append(xys, plotter.XY{X: x, Y: float64(k) / float64(o.All.Jobs)},
				plotter.XY{X: x, Y: float64(k+1) / float64(o.All.Jobs)})
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%d/%d finished)", o.Config, o.All.Finished, o.All.Jobs), line)
	}
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, 1
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

// writeUtilisationPlot draws the fraction of the GPUs allocated (solid) and busy (dashed) over
// the trace's hours, a color per configuration.
func writeUtilisationPlot(path string, outs []Outcomes) error {
	p := plot.New()
	p.Title.Text = "GPUs allocated (solid) and busy (dashed)"
	p.X.Label.Text = "trace time (hours)"
	p.Y.Label.Text = "fraction of the GPUs"
	p.Add(plotter.NewGrid())
	longest, entries := 0.0, 0
	for i := range outs {
		o := &outs[i]
		longest = math.Max(longest, o.End/3600)
		var first plot.Thumbnailer
		for _, series := range []struct {
			values []float64
			dashed bool
		}{{o.Series.Allocated, false}, {o.Series.Busy, true}} {
			line, err := timeLine(o.Series.Times, series.values)
			if err != nil {
				return err
			}
			if line == nil {
				continue
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(1.5)
			if series.dashed {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(line)
			if first == nil {
				first = line
			}
		}
		if first != nil {
			p.Legend.Add(fmt.Sprintf("%s: allocated %s, busy %s", o.Config,
				percent(o.AllocatedFraction()), percent(o.BusyFraction())), first)
			entries++
		}
	}
	height := 4.5 * vg.Inch
	p.Legend.Top = true
	p.X.Min, p.X.Max = 0, nonZero(longest)
	p.Y.Min, p.Y.Max = 0, roomForLegend(1, entries, height)
	return p.Save(8*vg.Inch, height, path)
}

// writeSharesPlot draws, a panel per configuration, each queue's share of the GPUs (solid) and
// its deserved share (dashed, same color) over the trace's hours. Every time is drawn,
// though the MAD counts only the contended ones: the lines show why a share was low.
func writeSharesPlot(path string, outs []Outcomes) error {
	var panels []*plot.Plot
	longest, highest, entries := 0.0, 0.05, 0
	for i := range outs {
		o := &outs[i]
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: queue shares (solid) against deserved (dashed)", o.Config)
		if o.Title != "" && o.Title != o.Config {
			p.Title.Text = fmt.Sprintf("%s (%s): queue shares (solid) against deserved (dashed)", o.Config, o.Title)
		}
		p.X.Label.Text = "trace time (hours)"
		p.Y.Label.Text = "fraction of the GPUs"
		p.Add(plotter.NewGrid())
		longest = math.Max(longest, o.End/3600)
		for q := range o.Queues {
			for _, kind := range []struct {
				values [][]float64
				dashed bool
			}{{o.Series.Share, false}, {o.Series.Deserved, true}} {
				if q >= len(kind.values) {
					continue
				}
				line, err := timeLine(o.Series.Times, kind.values[q])
				if err != nil {
					return err
				}
				if line == nil {
					continue
				}
				for _, v := range kind.values[q] {
					highest = math.Max(highest, v)
				}
				line.Color = plotutil.Color(q)
				line.Width = vg.Points(1.2)
				if kind.dashed {
					line.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
					line.Width = vg.Points(0.8)
				} else {
					p.Legend.Add(queueLabel(&o.Queues[q]), line)
				}
				p.Add(line)
			}
		}
		p.Legend.Top = true
		entries = max(entries, len(o.Queues))
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		p := plot.New()
		p.Title.Text = "Queue shares: no configuration ran"
		panels = append(panels, p)
	}
	// Every panel on the same axes, tall enough for its legend above the lines.
	panel := max(3.2*vg.Inch, vg.Length(entries)*legendEntry/legendShare+panelMargins)
	top := roomForLegend(highest, entries, panel)
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, nonZero(longest)
		p.Y.Min, p.Y.Max = 0, top
	}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	width, height := 10*vg.Inch, vg.Length(len(panels))*panel
	// .png as internal/bench allows, to look at the plot where no SVG viewer is at hand.
	var canvas vg.CanvasWriterTo = vgsvg.New(width, height)
	if strings.HasSuffix(path, ".png") {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(width, height)}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, draw.New(canvas))
	for i, p := range panels {
		p.Draw(canvases[i][0])
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

// timeLine is a line of values at trace times, in hours; nil when there is nothing to draw.
func timeLine(times, values []float64) (*plotter.Line, error) {
	n := min(len(times), len(values))
	if n == 0 {
		return nil, nil
	}
	xys := make(plotter.XYs, 0, n)
	for k := range n {
		if math.IsNaN(values[k]) || math.IsInf(values[k], 0) {
			continue
		}
		xys = append(xys, plotter.XY{X: times[k] / 3600, Y: values[k]})
	}
	if len(xys) == 0 {
		return nil, nil
	}
	return plotter.NewLine(xys)
}

// roomForLegend is the top of a Y axis whose data reach highest, leaving room above them for a
// legend of entries lines in a plot height tall, so that the legend does not hide the lines.
func roomForLegend(highest float64, entries int, height vg.Length) float64 {
	area := height - panelMargins
	if area <= 0 || entries == 0 {
		return highest * 1.05
	}
	covered := math.Min(float64(vg.Length(entries)*legendEntry/area), 0.6)
	return highest * 1.05 / (1 - covered)
}

// queueLabel names a queue in a legend with what its deserved share comes from.
func queueLabel(q *Summary) string {
	if q.Guarantee > 0 {
		return fmt.Sprintf("%s (weight %d, guarantee %d GPUs)", q.Queue, q.Weight, q.Guarantee)
	}
	return fmt.Sprintf("%s (weight %d)", q.Queue, q.Weight)
}

// nonZero is an axis' maximum: 1 for an empty one, which would otherwise span -1 to 1.
func nonZero(v float64) float64 {
	if v <= 0 {
		return 1
	}
	return v
}

// decadeTicks mark a log axis: labelled powers of ten and unlabelled multiples between them.
// plot.LogTicks truncates the logarithm of the axis' minimum, so a minimum of 0.1 (whose
// logarithm is a hair above -1) loses its label.
type decadeTicks struct{}

// Ticks returns the ticks between lo and hi (both > 0).
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	const slack = 1e-9
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo) + slack); e <= math.Ceil(math.Log10(hi)-slack); e++ {
		decade := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := decade * float64(m)
			if v < lo*(1-slack) || v > hi*(1+slack) {
				continue
			}
			tick := plot.Tick{Value: v}
			if m == 1 {
				tick.Label = strconv.FormatFloat(v, 'f', max(0, int(-e)), 64) // 0.01, 1000
			}
			ticks = append(ticks, tick)
		}
	}
	return ticks
}
