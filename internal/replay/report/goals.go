package report

import (
	"fmt"
	"math"
	"strings"
)

// A goal is one of the outcomes a Tephra configuration is held to against the baselines (issue
// #39's and #61's): what it asks, and how an outcome meets it, given every configuration's
// outcome by name (the baselines', and the static partition's).
type goal struct {
	label string
	// syntheticDay marks the goals set for the synthetic day only.
	syntheticDay bool
	// measure returns the outcome's figure, formatted, and whether it meets the goal; ok false
	// when a configuration it is measured against did not run.
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

// everyQueue is a goal on each queue's mean JCT against the same queue's in another
// configuration: at most limit times it for every queue that counts (and has a mean JCT in
// both). Its figure is the worst queue's ratio; "–" when no queue counts, and not measured in
// the other configuration itself.
func everyQueue(label, other string, limit float64, counts func(o *Outcomes, q *Summary) bool) goal {
	return goal{label: label, measure: func(o *Outcomes, base map[string]*Outcomes) (string, bool, bool) {
		b, ok := base[other]
		if !ok || o.Config == other {
			return "", false, false
		}
		worst, worstQueue := math.NaN(), ""
		for i := range o.Queues {
			q := &o.Queues[i]
			if !counts(o, q) {
				continue
			}
			r := versus(o, b, q.Queue, func(s *Summary) float64 { return s.JCT.Mean })
			if !math.IsNaN(r) && (math.IsNaN(worst) || r > worst) {
				worst, worstQueue = r, q.Queue
			}
		}
		if math.IsNaN(worst) {
			return "–", false, true
		}
		return fmt.Sprintf("worst %s %s", worstQueue, times(worst)), worst <= limit, true
	}}
}

// goals are the goals, in the report's order: those for every trace, then those for the
// synthetic day.
var goals = []goal{
	// #61's: at most upstream's gangs' on a day of a real trace, and a tenth below upstream's
	// gangs with packing on the synthetic day and the mixed trace.
	relative("Mean JCT at most 1.0× B1's (Philly day)", "B1", 1, false, func(o *Outcomes) float64 { return o.All.JCT.Mean }),
	relative("Mean JCT at most 0.9× B1p's (synthetic day, mixed trace)", "B1p", 0.9, false, func(o *Outcomes) float64 { return o.All.JCT.Mean }),
	relative("Room to bind mean at most 2× B1's", "B1", 2, false, func(o *Outcomes) float64 { return o.RoomToBind.Mean }),
	// A static partition is what a team has without sharing: sharing must not make one worse off.
	everyQueue("Every queue's mean JCT at most its mean JCT in "+StaticPartitionConfig+" (static partition)", StaticPartitionConfig, 1,
		func(*Outcomes, *Summary) bool { return true }),
	// A queue that got no more than its share while the cluster was contended must not pay for
	// the others' with longer jobs than under upstream's gangs.
	everyQueue("Every queue that received at most its deserved GPU-hours while contended: mean JCT at most 1.0× "+BaselineConfig+"'s", BaselineConfig, 1,
		func(o *Outcomes, q *Summary) bool { return o.ContendedSamples > 0 && receivedAtMostDeserved(q) }),
	{label: "Discarded GPU-hours at most 2 % of the trace's work", measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		r := ratio(o.DiscardedGPUSeconds, o.WorkGPUSeconds)
		return percent(r), r <= 0.02, true
	}},
	{label: "No job restarted more than twice", measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		return fmt.Sprintf("most %d", o.MostRestarts), o.MostRestarts <= 2, true
	}},
	{label: "Submit to first pod: mean at most 10s, p90 at most 20s", measure: func(o *Outcomes, _ map[string]*Outcomes) (string, bool, bool) {
		if o.FirstPod.N == 0 {
			return "–", false, true
		}
		return Duration(o.FirstPod.Mean) + " / " + Duration(o.FirstPod.P90), o.FirstPod.Mean <= 10 && o.FirstPod.P90 <= 20, true
	}},
	// #63's: placing jobs where their data is cached pays, on a trace whose jobs read datasets.
	{label: "Mean JCT at most 0.8× C's (a trace with data, data locality)", measure: func(o *Outcomes, base map[string]*Outcomes) (string, bool, bool) {
		c, ok := base["C"]
		if !ok || o.Config == "C" || o.DataJobs == 0 {
			return "", false, false
		}
		r := o.All.JCT.Mean / c.All.JCT.Mean
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return "–", false, true
		}
		return fmt.Sprintf("%.2f×", r), r <= 0.8, true
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
// goal, with its figure. Nothing when no Tephra configuration ran, or nothing else to measure it
// against. The queue
// share MAD is no goal: an instant's share is not what a team feels, its jobs' times and the
// GPU-hours it gets over the contended period are; the main table reports the MAD.
func writeGoals(b *strings.Builder, outs []Outcomes) {
	// Every configuration can be another's reference: the baselines, and the static partition.
	base := map[string]*Outcomes{}
	var tephra []*Outcomes
	for i := range outs {
		base[outs[i].Config] = &outs[i]
		if strings.HasPrefix(outs[i].Config, "C") {
			tephra = append(tephra, &outs[i])
		}
	}
	if len(tephra) == 0 || len(outs) < 2 {
		return
	}
	syntheticDay := 0
	for _, g := range goals {
		if g.syntheticDay {
			syntheticDay++
		}
	}
	fmt.Fprintf(b, "### Goals\n\nEach Tephra configuration against the goals it is held to (the last %d for the synthetic day only), with its figure:\n\n|  |", syntheticDay)
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
				b.WriteString(" – |") // a reference did not run, or nothing to measure
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
