package report

import (
	"fmt"
	"math"
	"strings"
)

// A goal is one of the outcomes a Tephra configuration is held to against the baselines (issue
// #39's): what it asks, and how an outcome meets it, given the run of each baseline by name.
type goal struct {
	label string
	// syntheticDay marks the goals set for the synthetic day only.
	syntheticDay bool
	// measure returns the outcome's figure, formatted, and whether it meets the goal; ok false
	// when a baseline it needs did not run.
	measure func(o *Outcomes, base map[string]*Outcomes) (figure string, met, ok bool)
}

// relative is a goal on the ratio of a figure to a baseline's: at most limit times it.
func relative(label, baseline string, limit float64, syntheticDay bool, of func(o *Outcomes) float64) goal {
	return goal{label: label, syntheticDay: syntheticDay, measure: func(o *Outcomes, base map[string]*Outcomes) (string, bool, bool) {
		b, ok := base[baseline]
		if !ok {
			return "", false, false
		}
		r := of(o) / of(b)
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return "–", false, true
		}
		return fmt.Sprintf("%.2f×", r), r <= limit, true
	}}
}

// goals are the goals, in the report's order.
var goals = []goal{
	relative("Mean JCT at most 0.8× B1's", "B1", 0.8, false, func(o *Outcomes) float64 { return o.All.JCT.Mean }),
	{label: "Queue share MAD at most 2 pp", measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		return points(o.All.ShareMAD), o.All.ShareMAD <= 0.02, true
	}},
	{label: "Discarded GPU-hours at most 2 % of the work", measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		r := ratio(o.DiscardedGPUSeconds, o.WorkGPUSeconds)
		return percent(r), r <= 0.02, true
	}},
	{label: "No job restarted more than twice", measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		return fmt.Sprintf("most %d", o.MostRestarts), o.MostRestarts <= 2, true
	}},
	relative("Mean JCT at most 0.7× B1's", "B1", 0.7, true, func(o *Outcomes) float64 { return o.All.JCT.Mean }),
	relative("Mean JCT at most 0.85× B1p's", "B1p", 0.85, true, func(o *Outcomes) float64 { return o.All.JCT.Mean }),
	relative("Big gangs' mean wait at most 0.5× B1's", "B1", 0.5, true, func(o *Outcomes) float64 { return o.BigGangs.Wait.Mean }),
	{label: "Wait p90 at most a minute", syntheticDay: true, measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		return Duration(o.All.Wait.P90), o.All.Wait.P90 <= 60, true
	}},
	{label: "GPU busy at least B1's", syntheticDay: true, measure: func(o *Outcomes, base map[string]*Outcomes) (string, bool, bool) {
		b, ok := base["B1"]
		if !ok {
			return "", false, false
		}
		return fmt.Sprintf("%s vs %s", percent(o.BusyFraction()), percent(b.BusyFraction())), o.BusyFraction() >= b.BusyFraction(), true
	}},
	{label: "No job that never ran", syntheticDay: true, measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		return fmt.Sprint(o.All.NeverRan), o.All.NeverRan == 0, true
	}},
}

// writeGoals writes, for each Tephra configuration (C and its variants), whether it meets each
// goal, with its figure. Nothing when no Tephra configuration ran, or no baseline.
func writeGoals(b *strings.Builder, outs []Outcomes) {
	base := map[string]*Outcomes{}
	var tephra []*Outcomes
	for i := range outs {
		if strings.HasPrefix(outs[i].Config, "C") {
			tephra = append(tephra, &outs[i])
		} else {
			base[outs[i].Config] = &outs[i]
		}
	}
	if len(tephra) == 0 || len(base) == 0 {
		return
	}
	b.WriteString("### Goals\n\nEach Tephra configuration against the goals it is held to (the last six for the synthetic day only), with its figure:\n\n|  |")
	for _, o := range tephra {
		fmt.Fprintf(b, " %s |", cell(o.Config))
	}
	b.WriteString("\n|---|")
	for range tephra {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, g := range goals {
		label := g.label
		if g.syntheticDay {
			label += " (synthetic day)"
		}
		fmt.Fprintf(b, "| %s |", cell(label))
		for _, o := range tephra {
			figure, met, ok := g.measure(o, base)
			switch {
			case !ok || figure == "–":
				b.WriteString(" – |") // a baseline did not run, or nothing to measure
			case met:
				fmt.Fprintf(b, " met: %s |", cell(figure))
			default:
				fmt.Fprintf(b, " missed: %s |", cell(figure))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}
