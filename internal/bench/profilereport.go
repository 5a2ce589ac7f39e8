package bench

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
)

// writeProfiles writes where the profiled schedulers' CPU time went. assets is the path of the
// folder that holds the pprof reports (profiles/*.txt), relative to the report.
func writeProfiles(b *strings.Builder, res *Results, assets string) {
	if len(res.Profiles) == 0 {
		return
	}
	var scenarios []string
	for _, p := range res.Profiles {
		if !slices.Contains(scenarios, p.Scenario) {
			scenarios = append(scenarios, p.Scenario)
		}
	}
	for _, sc := range scenarios {
		var profiles []ProfileSummary
		for _, p := range res.Profiles {
			if p.Scenario == sc {
				profiles = append(profiles, p)
			}
		}
		slices.SortStableFunc(profiles, func(x, y ProfileSummary) int { return strings.Compare(x.Configuration, y.Configuration) })
		writeScenarioProfiles(b, res, profiles, assets)
	}
}

// writeScenarioProfiles writes the profiles of one scenario, B0's beside C's.
func writeScenarioProfiles(b *strings.Builder, res *Results, profiles []ProfileSummary, assets string) {
	first := profiles[0]
	fmt.Fprintf(b, "### Where the schedulers spend their CPU in %s (repetition %d)\n\n", first.Scenario, first.Rep)
	fmt.Fprintf(b, "CPU profiles of the scheduler process, taken from its /debug/pprof/profile in %v chunks while it drained the backlog "+
		"(that run's own figures include the profiling's small cost). Shares are of the CPU time sampled, cumulative: "+
		"a part includes what it calls, and parts overlap (the filters and scores run beside the serial part of the cycle).\n\n", profileChunk)
	header, rows := profileTable(res, profiles)
	writeMarkdownTable(b, header, rows)
	writeProfileSummary(b, res, profiles)
	for _, p := range profiles {
		writeProfileReports(b, p, assets)
	}
}

// profileTable is the table of a scenario's profiles, a column each: CPU sampled, the profiled
// run's scheduler CPU, and the share of each part of the scheduler that some profile has.
func profileTable(res *Results, profiles []ProfileSummary) (header []string, rows [][]string) {
	header = []string{""}
	for _, p := range profiles {
		header = append(header, p.Configuration)
	}
	rows = [][]string{}
	row := []string{"CPU sampled / wall time"}
	for _, p := range profiles {
		row = append(row, fmt.Sprintf("%.1f s / %.1f s", p.SampledSeconds, p.WallSeconds))
	}
	rows = append(rows, row)
	row = []string{"sched CPU s/1000 pods in that run"}
	for _, p := range profiles {
		row = append(row, num("%.2f", profiledRunCPU(res, p)))
	}
	rows = append(rows, row)
	// The parts in profilePhases' order, whichever profile has them.
	names := []string{tephraPhase}
	for _, phase := range profilePhases {
		names = append(names, phase.name)
	}
	names = slices.DeleteFunc(names, func(name string) bool {
		return !slices.ContainsFunc(profiles, func(p ProfileSummary) bool {
			return slices.ContainsFunc(p.Phases, func(e ProfileEntry) bool { return e.Name == name })
		})
	})
	for _, name := range names {
		row := []string{name}
		for _, p := range profiles {
			row = append(row, num("%.1f %%", profileShare(p, name)))
		}
		rows = append(rows, row)
	}
	return header, rows
}

// profiledRunCPU is the scheduler's CPU-seconds per 1000 pods in the run a profile was taken in,
// NaN if that run has none.
func profiledRunCPU(res *Results, p ProfileSummary) float64 {
	cpu := math.NaN()
	for _, r := range res.Runs {
		if r.Configuration == p.Configuration && r.Scenario == p.Scenario && r.Rep == p.Rep && r.Profiled && r.SchedulerCPUSecondsPer1000Pods != nil {
			cpu = *r.SchedulerCPUSecondsPer1000Pods
		}
	}
	return cpu
}

// profileShare is a part's cumulative share of a profile's samples, NaN if the profile does not
// have that part.
func profileShare(p ProfileSummary, name string) float64 {
	for _, e := range p.Phases {
		if e.Name == name {
			return e.Cum
		}
	}
	return math.NaN()
}

// writeProfileSummary writes C's figures in a sentence, beside B0's where B0's profile was
// analyzed; nothing if C's was not.
func writeProfileSummary(b *strings.Builder, res *Results, profiles []ProfileSummary) {
	var c, b0 *ProfileSummary
	for i := range profiles {
		switch profiles[i].Configuration {
		case "C":
			c = &profiles[i]
		case "B0":
			b0 = &profiles[i]
		}
	}
	if c == nil || c.Error != "" {
		return
	}
	cpuC := profiledRunCPU(res, *c)
	fmt.Fprintf(b, "In short: C's scheduler used %s CPU-seconds per 1000 pods", num("%.2f", cpuC))
	if b0 != nil && b0.Error == "" {
		cpuB0 := profiledRunCPU(res, *b0)
		fmt.Fprintf(b, " against B0's %s (%s)", num("%.2f", cpuB0), ratio(cpuC, cpuB0))
	}
	fmt.Fprintf(b, "; Tephra's own code is on the stack in %s of its samples; garbage collection takes %s", num("%.1f %%", profileShare(*c, tephraPhase)), num("%.1f %%", profileShare(*c, gcPhase)))
	if b0 != nil && b0.Error == "" {
		fmt.Fprintf(b, " (B0: %s)", num("%.1f %%", profileShare(*b0, gcPhase)))
	}
	fmt.Fprintf(b, ", and checking nodes (filters and scores) %s", num("%.1f %%", profileShare(*c, nodesPhase)))
	if b0 != nil && b0.Error == "" {
		fmt.Fprintf(b, " (B0: %s)", num("%.1f %%", profileShare(*b0, nodesPhase)))
	}
	b.WriteString(".\n\n")
}

// writeProfileReports writes one profile's links to its pprof reports and its tables of the
// functions with the most CPU, or why it has no analysis.
func writeProfileReports(b *strings.Builder, p ProfileSummary, assets string) {
	var reports []string
	for _, f := range p.Files {
		if publishedProfileReport(f) {
			reports = append(reports, fmt.Sprintf("[%s](%s/%s)", filepath.Base(f), assets, f))
		}
	}
	fmt.Fprintf(b, "**%s**", p.Configuration)
	if len(reports) > 0 {
		fmt.Fprintf(b, " (`go tool pprof -top` of the merged CPU profiles, and of the heap held at the end of the drain: %s; `-top -cum`, the allocations and the raw profiles are in the run's folder under bench-out)", strings.Join(reports, ", "))
	}
	b.WriteString(".")
	if p.Error != "" {
		fmt.Fprintf(b, " No analysis: %s.\n\n", p.Error)
		return
	}
	b.WriteString("\n\n")
	if len(p.Tephra) > 0 {
		b.WriteString("| Tephra's functions with the most CPU below them | cumulative | flat |\n| --- | --- | --- |\n")
		for _, e := range p.Tephra {
			fmt.Fprintf(b, "| `%s` | %.1f %% | %.1f %% |\n", strings.ReplaceAll(e.Name, "|", `\|`), e.Cum, e.Flat)
		}
		b.WriteString("\n")
	}
	if len(p.TopFlat) > 0 {
		b.WriteString("| functions that spent the most CPU themselves | flat | cumulative |\n| --- | --- | --- |\n")
		for _, e := range p.TopFlat {
			fmt.Fprintf(b, "| `%s` | %.1f %% | %.1f %% |\n", strings.ReplaceAll(e.Name, "|", `\|`), e.Flat, e.Cum)
		}
		b.WriteString("\n")
	}
}
