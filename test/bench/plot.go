package bench

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeThroughputPlot draws pods bound per second per scenario, a bar per configuration (the
// median of the repetitions), to path (.svg or .png).
func writeThroughputPlot(res *Results, path string) error {
	var scenarios []*Scenario
	var labels []string
	for _, sc := range res.Scenarios {
		if sc.Skip == "" {
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

// writeSweepPlot draws scenario P's pods per second against the number of nodes, a line per
// configuration, to path.
func writeSweepPlot(res *Results, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Pods bound per second against cluster size (%d pods)", res.Pods)
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = "pods/s"
	p.Add(plotter.NewGrid())
	highest := 0.0
	for i, c := range res.Configurations {
		if c.Unavailable != "" {
			continue
		}
		var xys plotter.XYs
		for _, nodes := range res.Sweep {
			if s := summarize(res, c.Name, "P", nodes); !math.IsNaN(s.throughput) {
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
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
