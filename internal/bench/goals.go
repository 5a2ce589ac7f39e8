package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// goal is one of the targets Tephra is measured against (issue #8), checked against a run.
type goal struct {
	text, measured string
	// met is "yes", "no", or "–" when a configuration it needs did not run.
	met string
}

// atMost is a goal met when a is at most factor × b (a cost, where less is better).
func atMost(text string, a, b, factor float64) goal {
	g := goal{text: text, measured: ratio(a, b), met: "–"}
	if !math.IsNaN(a) && !math.IsNaN(b) && b > 0 {
		g.met = map[bool]string{true: "yes", false: "no"}[a <= factor*b]
	}
	return g
}

// goals checks the run against Tephra's targets: C/B0 ≥ 0.95 on P; on G8 and G64, C ≥ 2 × B1
// and ≥ C on P; in GI, C's scheduler CPU per pod and peak RSS ≤ 1.2 × B0's; C ≥ 0.8 × L; on T,
// C ≥ B1 and ≥ 0.8 × C on G8; in G8-DRA, C's scheduler CPU per pod ≤ 1.2 × B0's; and no pods
// bound in incomplete gangs for C.
func goals(res *Results) []goal {
	nodes := res.Nodes
	pods := func(config, scenario string) float64 { return summarize(res, config, scenario, nodes).throughput }
	atLeast := func(text string, a, b, factor float64) goal {
		g := goal{text: text, measured: ratio(a, b), met: "–"}
		if !math.IsNaN(a) && !math.IsNaN(b) && b > 0 {
			g.met = map[bool]string{true: "yes", false: "no"}[a >= factor*b]
		}
		return g
	}
	var out []goal
	has := func(scenario string) bool {
		return slices.ContainsFunc(res.Scenarios, func(sc *Scenario) bool { return sc.Name == scenario && sc.Skip == "" })
	}
	if has("P") {
		out = append(out, atLeast("P: C at least 0.95 × B0 (C/B0)", pods("C", "P"), pods("B0", "P"), 0.95))
	}
	// Gangs placed once per gang (issue #18): no slower than plain pods, and twice upstream's.
	for _, sc := range []string{"G8", "G64"} {
		if has(sc) {
			out = append(out, atLeast(sc+": C at least 2 × B1 (C/B1)", pods("C", sc), pods("B1", sc), 2))
			if has("P") {
				out = append(out, atLeast(sc+": gangs no slower than plain pods (C on "+sc+" / C on P)", pods("C", sc), pods("C", "P"), 1))
			}
		}
	}
	// Never-fitting gangs cost nothing (issue #18): the scheduler's CPU per pod and memory in GI
	// within 1.2 × B0's.
	if has("GI") {
		c, b0 := summarize(res, "C", "GI", nodes), summarize(res, "B0", "GI", nodes)
		out = append(out, atMost("GI: C's sched CPU s/1000 pods at most 1.2 × B0's (C/B0)", c.cpuPer1000, b0.cpuPer1000, 1.2))
		out = append(out, atMost("GI: C's sched peak RSS at most 1.2 × B0's (C/B0)", c.peakRSS, b0.peakRSS, 1.2))
	}
	for _, sc := range []string{"P", "G8", "G64", "GI"} {
		if has(sc) {
			out = append(out, atLeast(sc+": C at least 0.8 × L (C/L)", pods("C", sc), pods("L", sc), 0.8))
		}
	}
	if has("T") {
		out = append(out, atLeast("T: C at least B1 with upstream's topology-aware scheduling (C/B1)", pods("C", "T"), pods("B1", "T"), 1))
		if has("G8") {
			out = append(out, atLeast("T: topology costs C at most 20 % of G8's rate (C on T / C on G8)", pods("C", "T"), pods("C", "G8"), 0.8))
		}
	}
	// Counting devices in queues costs little (issue #27): with one device claim per pod, C's
	// scheduler CPU per pod within 1.2 × B0's on the same claims (DRA's own plugin in both).
	for _, sc := range res.Scenarios {
		if sc.Devices && sc.Skip == "" {
			c, b0 := summarize(res, "C", sc.Name, nodes), summarize(res, "B0", sc.Name, nodes)
			out = append(out, atMost(sc.Name+": C's sched CPU s/1000 pods at most 1.2 × B0's on the same claims (C/B0)", c.cpuPer1000, b0.cpuPer1000, 1.2))
		}
	}
	var gangScenarios []string
	peak, atEnd, spread := math.NaN(), math.NaN(), math.NaN()
	for _, sc := range []string{"G8", "G64", "GI"} {
		if !has(sc) {
			continue
		}
		s := summarize(res, "C", sc, nodes)
		if s.completed == 0 {
			continue
		}
		gangScenarios = append(gangScenarios, sc)
		peak, atEnd = nanMax(peak, s.peakPartial), nanMax(atEnd, s.partialAtEnd)
		spread = nanMax(spread, s.spreadP99)
	}
	if len(gangScenarios) > 0 {
		text := "C binds no pod of a gang that is not whole (" + strings.Join(gangScenarios, ", ") + ")"
		out = append(out, goal{text: text,
			measured: fmt.Sprintf("left at the end: %.0f; peak while binding: %.0f (gang bind spread p99 up to %s)", atEnd, peak, spreadCell(spread)),
			met:      map[bool]string{true: "yes", false: "no"}[peak == 0 && atEnd == 0]})
		if peak > 0 && atEnd == 0 {
			out[len(out)-1].met = "no: only while a whole gang's binds are in flight"
		}
	}
	return out
}

func nanMax(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return max(a, b)
}

var goalHeader = []string{"goal", "measured", "met"}

func goalRows(list []goal) [][]string {
	rows := make([][]string, 0, len(list))
	for _, g := range list {
		rows = append(rows, []string{g.text, g.measured, g.met})
	}
	return rows
}

// writeGoals writes the goals table, recomputed from the run so that it cannot go stale.
func writeGoals(b *strings.Builder, res *Results) {
	list := goals(res)
	if len(list) == 0 {
		return
	}
	b.WriteString("### Goals\n\n")
	b.WriteString("What Tephra is measured against, checked against this run's medians (reported, not asserted by any test). " +
		"Why C misses where it does: [benchmark-analysis.md](benchmark-analysis.md).\n\n")
	writeMarkdownTable(b, goalHeader, goalRows(list))
}
