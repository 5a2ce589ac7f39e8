package bench

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// summary is a configuration's figures in one scenario: the median over its completed
// repetitions. Figures that do not apply are NaN.
type summary struct {
	completed, failed int
	// errors of the failed repetitions.
	errors []string

	throughput, throughputMin, throughputMax float64
	sampleP50, sampleP99                     float64
	latencyP50, latencyP99                   float64
	gangP50, gangP99                         float64
	peakPartial, partialAtEnd, spreadP99     float64
	cpuPer1000, peakRSS                      float64
	schedStart                               float64
	mutatingPerPod, attemptsPerPod           float64
	apiCPUPer1000                            float64
	// controllersCPUPer1000 is CU's tephra-controllers CPU, NaN for the others.
	controllersCPUPer1000 float64
}

func summarize(res *Results, config, scenario string, nodes int) summary {
	var s summary
	var thr, p50, p99, lat50, lat99, gang50, gang99, spread99, partial, partialEnd, cpu, rss, mut, start, attempts, apiCPU, controllersCPU []float64
	for _, r := range res.runs(config, scenario, nodes) {
		if ok, why := r.complete(); !ok {
			s.failed++
			s.errors = append(s.errors, why)
			continue
		}
		s.completed++
		thr = append(thr, r.Throughput.Average)
		p50 = append(p50, r.Throughput.P50)
		p99 = append(p99, r.Throughput.P99)
		if r.LatencySeconds != nil {
			lat50 = append(lat50, r.LatencySeconds.P50)
			lat99 = append(lat99, r.LatencySeconds.P99)
		}
		if r.GangWholeSeconds != nil {
			gang50 = append(gang50, r.GangWholeSeconds.P50)
			gang99 = append(gang99, r.GangWholeSeconds.P99)
		}
		if r.GangBindSpreadSeconds != nil {
			spread99 = append(spread99, r.GangBindSpreadSeconds.P99)
		}
		partial = append(partial, float64(r.PeakPartialGangPods))
		partialEnd = append(partialEnd, float64(r.PartialGangPodsAtEnd))
		if r.SchedulerCPUSecondsPer1000Pods != nil {
			cpu = append(cpu, *r.SchedulerCPUSecondsPer1000Pods)
		}
		if r.ControllersCPUSecondsPer1000Pods != nil {
			controllersCPU = append(controllersCPU, *r.ControllersCPUSecondsPer1000Pods)
		}
		if r.SchedulerPeakRSSMiB != nil {
			rss = append(rss, *r.SchedulerPeakRSSMiB)
		}
		mut = append(mut, r.MutatingRequestsPerPod)
		if r.APIServerCPUSecondsPer1000Pods != nil {
			apiCPU = append(apiCPU, *r.APIServerCPUSecondsPer1000Pods)
		}
		if r.SchedulingAttemptsPerPod != nil {
			attempts = append(attempts, *r.SchedulingAttemptsPerPod)
		}
		if r.Timings.SchedulerStartSeconds > 0 {
			start = append(start, r.Timings.SchedulerStartSeconds)
		}
	}
	s.throughput, s.sampleP50, s.sampleP99 = median(thr), median(p50), median(p99)
	s.throughputMin, s.throughputMax = percentile(thr, 0), percentile(thr, 100)
	s.latencyP50, s.latencyP99 = median(lat50), median(lat99)
	s.gangP50, s.gangP99 = median(gang50), median(gang99)
	s.peakPartial, s.cpuPer1000, s.peakRSS = median(partial), median(cpu), median(rss)
	s.spreadP99, s.partialAtEnd = median(spread99), median(partialEnd)
	s.mutatingPerPod, s.attemptsPerPod, s.apiCPUPer1000 = median(mut), median(attempts), median(apiCPU)
	s.controllersCPUPer1000 = median(controllersCPU)
	s.schedStart = median(start)
	return s
}

// ratio is a/b as "1.23×", or "–".
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// spreadCell formats a gang bind spread, which is often milliseconds.
func spreadCell(seconds float64) string {
	if !math.IsNaN(seconds) && seconds < 1 {
		return fmt.Sprintf("%.0f ms", seconds*1000)
	}
	return num("%.2f s", seconds)
}

// num formats a figure, "–" if it does not apply.
func num(format string, v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// cpuCell is the scheduler's CPU per 1000 pods and, for CU, tephra-controllers' beside it (not
// added: the scheduler's figure stays comparable with C's and B1's).
func cpuCell(s summary) string {
	cell := num("%.2f", s.cpuPer1000)
	if !math.IsNaN(s.controllersCPUPer1000) {
		cell += fmt.Sprintf(" (+ %.2f controllers)", s.controllersCPUPer1000)
	}
	return cell
}

// scenarioTable is one scenario's figures per configuration, as rows of cells.
func scenarioTable(res *Results, sc *Scenario, nodes int) (header []string, rows [][]string) {
	header = []string{"config", "pods/s", "1-s p50", "1-s p99", "vs B0", "vs L",
		"create→bind p50", "p99", "gang whole p50", "p99", "gang bind spread p99",
		"peak pods in partial gangs", "at end", "sched start", "sched attempts/pod", "sched CPU s/1000 pods", "sched peak RSS", "API writes/pod", "API CPU s/1000 pods"}
	b0 := summarize(res, "B0", sc.Name, nodes)
	l := summarize(res, "L", sc.Name, nodes)
	for _, c := range res.Configurations {
		if !c.runs(sc) {
			continue
		}
		if c.Unavailable != "" {
			rows = append(rows, append([]string{c.Name, "unavailable: " + c.Unavailable}, make([]string, len(header)-2)...))
			continue
		}
		s := summarize(res, c.Name, sc.Name, nodes)
		if s.completed == 0 {
			why := "did not run"
			if s.failed > 0 {
				why = "failed: " + s.errors[0]
			}
			rows = append(rows, append([]string{c.Name, why}, make([]string, len(header)-2)...))
			continue
		}
		name := c.Name
		if s.failed > 0 {
			name = fmt.Sprintf("%s (%d of %d failed)", c.Name, s.failed, s.failed+s.completed)
		}
		thr := num("%.0f", s.throughput)
		if s.completed > 1 {
			thr = fmt.Sprintf("%.0f (%.0f–%.0f)", s.throughput, s.throughputMin, s.throughputMax)
		}
		rows = append(rows, []string{
			name, thr, num("%.0f", s.sampleP50), num("%.0f", s.sampleP99),
			ratio(s.throughput, b0.throughput), ratio(s.throughput, l.throughput),
			num("%.2f s", s.latencyP50), num("%.2f s", s.latencyP99),
			num("%.2f s", s.gangP50), num("%.2f s", s.gangP99),
			spreadCell(s.spreadP99), num("%.0f", s.peakPartial), num("%.0f", s.partialAtEnd),
			num("%.1f s", s.schedStart), num("%.2f", s.attemptsPerPod),
			cpuCell(s), num("%.0f MiB", s.peakRSS), num("%.2f", s.mutatingPerPod), num("%.2f", s.apiCPUPer1000),
		})
	}
	return header, rows
}

// sweepTable is one scenario's figures per node count: each configuration's throughput, C's
// against L's (the apiserver's limit), each scheduler's CPU per 1000 pods (the cost per pod
// against the node count) and C's peak RSS against B0's.
func sweepTable(res *Results, sc *Scenario) (header []string, rows [][]string) {
	header = []string{"nodes"}
	var configs []ConfigurationStatus
	for _, c := range res.Configurations {
		if c.runs(sc) {
			configs = append(configs, c)
			header = append(header, c.Name+" pods/s")
		}
	}
	header = append(header, "C / L")
	for _, c := range configs {
		if !c.Binder {
			header = append(header, c.Name+" CPU s/1000 pods")
		}
	}
	header = append(header, "C peak RSS / B0")
	for _, nodes := range res.Sweep {
		row := []string{fmt.Sprint(nodes)}
		for _, c := range configs {
			row = append(row, sweepCell(res, c, sc, nodes, func(s summary) string { return num("%.0f", s.throughput) }))
		}
		c, l, b0 := summarize(res, "C", sc.Name, nodes), summarize(res, "L", sc.Name, nodes), summarize(res, "B0", sc.Name, nodes)
		row = append(row, ratio(c.throughput, l.throughput))
		for _, c := range configs {
			if !c.Binder {
				row = append(row, sweepCell(res, c, sc, nodes, func(s summary) string { return num("%.2f", s.cpuPer1000) }))
			}
		}
		row = append(row, ratio(c.peakRSS, b0.peakRSS))
		rows = append(rows, row)
	}
	return header, rows
}

func sweepCell(res *Results, c ConfigurationStatus, sc *Scenario, nodes int, cell func(summary) string) string {
	if c.Unavailable != "" {
		return "unavailable"
	}
	s := summarize(res, c.Name, sc.Name, nodes)
	if s.completed == 0 {
		return "failed"
	}
	return cell(s)
}

// WriteText prints the results as plain tables, for a terminal.
func (res *Results) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n%s: %s\n", res.Command, res.describe())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if res.Kind == "sweep" {
		for _, sc := range res.Scenarios {
			fmt.Fprintf(tw, "\n%s: %s\n", sc.Name, sc.Title)
			header, rows := sweepTable(res, sc)
			writeTabRows(tw, header, rows)
		}
	} else {
		for _, sc := range res.Scenarios {
			if sc.Skip != "" {
				fmt.Fprintf(tw, "\n%s (%s): skipped, %s\n", sc.Name, sc.Title, sc.Skip)
				continue
			}
			fmt.Fprintf(tw, "\n%s: %s\n", sc.Name, res.scenarioCaption(sc, res.Nodes))
			if sc.Queues {
				header, rows := queueTable(res, res.Nodes)
				writeTabRows(tw, header, rows)
				fmt.Fprintln(tw)
				header, rows = queueShareTable(res, res.Nodes)
				writeTabRows(tw, header, rows)
				continue
			}
			header, rows := scenarioTable(res, sc, res.Nodes)
			writeTabRows(tw, header, rows)
			if sc.Devices {
				fmt.Fprintln(tw, devicesLine(res, sc, res.Nodes))
			}
		}
		if list := goals(res); len(list) > 0 {
			fmt.Fprintf(tw, "\nGoals\n")
			writeTabRows(tw, goalHeader, goalRows(list))
		}
	}
	_ = tw.Flush()
	for _, line := range res.Unavailable() {
		fmt.Fprintln(w, line)
	}
	for _, line := range res.Failures() {
		fmt.Fprintln(w, "FAILED:", line)
	}
}

func writeTabRows(w io.Writer, header []string, rows [][]string) {
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, row := range rows {
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
}

func (res *Results) describe() string {
	reps := fmt.Sprintf("%d repetitions, medians", res.Reps)
	if res.Reps == 1 {
		reps = "1 repetition"
	}
	if res.Kind == "sweep" {
		return fmt.Sprintf("scenario%s %s (%d pods) against node counts, %s", plural(len(res.Scenarios)), listOfScenarios(res.Scenarios), res.Pods, reps)
	}
	return fmt.Sprintf("%d nodes, %s", res.Nodes, reps)
}

// scenarioCaption says what a scenario's pods were.
func (res *Results) scenarioCaption(sc *Scenario, nodes int) string {
	pods, blockers := -1, 0
	for _, r := range res.Runs {
		if r.Scenario == sc.Name && r.Nodes == nodes {
			pods, blockers = r.Pods, r.Blockers
			break
		}
	}
	if pods < 0 {
		return sc.Title
	}
	caption := fmt.Sprintf("%s: %d pods", sc.Title, pods)
	switch {
	case sc.GangSize > 0 && sc.Devices:
		caption = fmt.Sprintf("%s: %d pods in %d gangs of %d, each pod claiming one of the %d devices of DeviceClass %s (%d per node)",
			sc.Title, pods, pods/sc.GangSize, sc.GangSize, nodes*devicesPerNode, localcluster.GPUClass, devicesPerNode)
	case sc.GangSize > 0:
		caption = fmt.Sprintf("%s: %d pods in %d gangs of %d", sc.Title, pods, pods/sc.GangSize, sc.GangSize)
	case sc.Blockers:
		caption = fmt.Sprintf("%s: %d plain pods measured, and %d gangs of %d members that ask for %s CPU each",
			sc.Title, pods, blockerGangs, blockers/blockerGangs, blockerCPU.String())
	case sc.Queues:
		gpus := estimateGPUs(nodes)
		scale := res.QScale
		if scale == 0 {
			scale = qDefaultScale
		}
		caption = fmt.Sprintf("%s: %d GPU jobs (%d per queue) asking for %d× the %d GPUs of %d GPU nodes, running %.3g–%.3g s each "+
			"(the issue's %.0f–%.0f s scaled by %.2g)", sc.Title, pods, pods/len(benchQueues), qDemand, gpus, gpus/gpusPerNode,
			qMinRun.Seconds()*scale, qMaxRun.Seconds()*scale, qMinRun.Seconds(), qMaxRun.Seconds(), scale)
	}
	return fmt.Sprintf("%s, %d nodes", caption, nodes)
}

// Markdown renders the report: matrix results, sweep results, or both (either may be nil).
// assets is the path, relative to the report, of the folder of its plots.
func Markdown(matrix, sweep *Results, assets string) string {
	var b strings.Builder
	first := matrix
	if first == nil {
		first = sweep
	}
	b.WriteString("# Scheduling benchmarks\n\n")
	b.WriteString("<!-- Generated by internal/bench (cmd/tephra-bench) from the results beside it; do not edit: re-run the command below. -->\n\n")
	b.WriteString("How fast pods are bound on a real kube-apiserver with simulated nodes: by Tephra, by the same " +
		"scheduler binary with upstream's profile, with upstream's gang scheduling, and by no scheduler at all.\n\n")
	if first == nil {
		b.WriteString("No results yet: run `make bench`.\n")
		return b.String()
	}
	m := first.Machine
	b.WriteString("## Machine\n\n")
	b.WriteString("| CPUs | CPU model | memory | kernel | Go | Kubernetes | Tephra |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n\n", m.CPUs, m.CPUModel, m.MemoryGB, m.Kernel, m.Go, first.Kubernetes, first.Tephra)
	b.WriteString("Reproduce with:\n\n")
	for _, res := range []*Results{matrix, sweep} {
		if res != nil {
			fmt.Fprintf(&b, "    %s   # %s; %s, took %.0f min\n", res.Command, res.describe(), res.Finished.UTC().Format("2006-01-02"),
				res.Finished.Sub(res.Started).Minutes())
		}
	}
	b.WriteString("\n")
	writeMethod(&b, first)
	if matrix != nil {
		b.WriteString("## Results\n\n")
		fmt.Fprintf(&b, "%s. Ratios compare pods/s with B0 (vanilla) and L (the apiserver's limit).\n\n", upperFirst(matrix.describe()))
		fmt.Fprintf(&b, "![pods bound per second, per configuration and scenario](%s/throughput.svg)\n\n", assets)
		writeGoals(&b, matrix)
		for _, sc := range matrix.Scenarios {
			fmt.Fprintf(&b, "### %s\n\n", sc.Name)
			if sc.Skip != "" {
				fmt.Fprintf(&b, "%s: not run yet, %s.\n\n", upperFirst(sc.Title), sc.Skip)
				continue
			}
			fmt.Fprintf(&b, "%s.\n\n", upperFirst(matrix.scenarioCaption(sc, matrix.Nodes)))
			if sc.Queues {
				writeQueueSection(&b, matrix, assets)
				continue
			}
			header, rows := scenarioTable(matrix, sc, matrix.Nodes)
			writeMarkdownTable(&b, header, rows)
			if sc.Devices {
				fmt.Fprintf(&b, "%s\n\n", devicesLine(matrix, sc, matrix.Nodes))
			}
		}
		writeProfiles(&b, matrix, assets)
		writeProblems(&b, matrix)
	}
	if sweep != nil {
		b.WriteString("## Cost curve\n\n")
		fmt.Fprintf(&b, "Scenario%s %s (%d pods) on clusters of each size, one run each: pods bound per second, C's against the apiserver's limit, "+
			"each scheduler's CPU time per 1000 pods, and C's peak RSS against B0's.", plural(len(sweep.Scenarios)), listOfScenarios(sweep.Scenarios), sweep.Pods)
		if matrix != nil && (sweep.Machine != matrix.Machine || sweep.Tephra != matrix.Tephra) {
			// Published separately: say where, and on what, the curve was measured.
			m := sweep.Machine
			fmt.Fprintf(&b, " Measured apart from the results above: %d CPUs (%s), %s, kernel %s, %s; Tephra %s.", m.CPUs, m.CPUModel, m.MemoryGB, m.Kernel, m.Go, sweep.Tephra)
		}
		b.WriteString("\n\n")
		fmt.Fprintf(&b, "![pods bound per second against the number of nodes](%s/sweep.svg)\n\n", assets)
		for _, sc := range sweep.Scenarios {
			fmt.Fprintf(&b, "### %s by cluster size\n\n%s.\n\n", sc.Name, upperFirst(sc.Title))
			header, rows := sweepTable(sweep, sc)
			writeMarkdownTable(&b, header, rows)
		}
		if matrix == nil {
			writeProfiles(&b, sweep, assets)
		}
		writeProblems(&b, sweep)
	}
	return b.String()
}

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

// devicesLine says, for a scenario with devices, how many pods each configuration bound with
// their claim's device allocated (the fewest over its completed repetitions).
func devicesLine(res *Results, sc *Scenario, nodes int) string {
	var parts []string
	for _, c := range res.Configurations {
		if !c.runs(sc) || c.Unavailable != "" {
			continue
		}
		fewest, pods := -1, 0
		for _, r := range res.runs(c.Name, sc.Name, nodes) {
			if r.DevicesAllocated != nil && (fewest < 0 || *r.DevicesAllocated < fewest) {
				fewest, pods = *r.DevicesAllocated, r.Pods
			}
		}
		if fewest >= 0 {
			parts = append(parts, fmt.Sprintf("%s %d of %d", c.Name, fewest, pods))
		}
	}
	if len(parts) == 0 {
		return "No claims were checked."
	}
	return "Pods bound with their claim allocated a device of their node and reserved for them, no device twice " +
		"(read from the claims after each run; a run with fewer fails), fewest over the repetitions: " + strings.Join(parts, ", ") + "."
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

func writeMethod(b *strings.Builder, res *Results) {
	b.WriteString("## Method\n\n")
	b.WriteString("Every run (one scenario on one configuration) gets a fresh control plane: etcd (no fsync), " +
		"kube-apiserver without priority and fairness or in-flight limits, and no kube-controller-manager. " +
		"The simulated nodes (8 CPUs, 32Gi, 110 pods each; every 40th also has 4 GPUs) are created Ready, and nothing keeps them so: " +
		"no kubelet, kwok, heartbeat or lease competes with the scheduler, and bound pods stay Pending (but in Q, below). " +
		"The scheduler runs as its own process at --v=1 (logs to a file), with the shipped configuration's client QPS and burst and no leader election, " +
		"started once the run's backlog exists. Runs are interleaved: for each repetition and scenario, every configuration in turn, the order rotated by one from one to the next (L B0 B1 C, then B0 B1 C L, ...) so that none always runs first, or after the same one. " +
		"(A fresh control plane with its nodes takes about 5 s to start; emptying one of a scenario's pods and events took longer.)\n\n")
	b.WriteString("Configurations:\n\n")
	for _, c := range res.Configurations {
		fmt.Fprintf(b, "- **%s**, %s.", c.Name, c.Title)
		switch {
		case (c.FeatureGates != "" || c.RuntimeConfig != "") && c.SchedulerWithoutFeatureGates:
			fmt.Fprintf(b, " kube-apiserver runs with `--feature-gates=%s` and `--runtime-config=%s`, the scheduler without feature gates, as shipped.", c.FeatureGates, c.RuntimeConfig)
		case c.FeatureGates != "" || c.RuntimeConfig != "":
			fmt.Fprintf(b, " kube-apiserver and the scheduler run with `--feature-gates=%s`, the apiserver with `--runtime-config=%s`.", c.FeatureGates, c.RuntimeConfig)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nB1 needs GenericWorkload in the apiserver (PodGroup storage; without it spec.schedulingGroup is dropped) and in the scheduler " +
		"(the GangScheduling plugin joins the default profile, and the queue handles pod groups). kube-controller-manager uses the gate only for " +
		"the PodGroupProtection controller, a deletion finalizer that scheduling does not need; no other gate is required. " +
		"Every control plane has Tephra's CRDs, the `root` and `default` queues that tephra-controllers would create, and Q's three queues " +
		"(only C's, CU's and CG's schedulers read them), and has served each Tephra CRD once before the scheduler starts, " +
		"as a running cluster's apiserver has long done (it builds a CRD's storage on the first request).\n")
	b.WriteString("CU and CG also run tephra-controllers (the manifests' Deployment, as its ServiceAccount, with leader election), " +
		"whose upstream PodGroup adapter mirrors each scheduling.k8s.io/v1beta1 PodGroup into a Tephra PodGroup of the same name; " +
		"the backlog counts as created once every mirror exists, and only then does the scheduler start. " +
		"The controllers keep running while the backlog drains (they write the groups' status, Tephra's and upstream's), " +
		"so CU's and CG's API writes/pod and API CPU include theirs. CU's scheduler runs without GenericWorkload, as Tephra ships it: " +
		"TephraGang gangs the upstream groups' pods. CG's runs with it: kube-scheduler adds its GangScheduling plugin and " +
		"schedules the upstream groups' pods in pod-group cycles of its own, and TephraGang leaves those pods to it (docs/gang.md). " +
		"CU and CG run only the scenarios with gangs (G8, G64, GI): P's and Q's pods have none, and there they would be C.\n")
	b.WriteString("L's binder makes one request per pod where a scheduler makes at least two (the binding and its event), " +
		"so where the client QPS rather than the apiserver is the limit, L binds up to twice as fast. " +
		"A gang member that waits at Permit costs B1 a third write: kube-scheduler 1.37 sets its nominatedNodeName first " +
		"(NominatedNodeNameForExpectation, on by default). Tephra's Deployment turns that gate off (docs/gang.md), and C, CU and CG run with its flags; " +
		"B0 and B1 run with upstream's defaults.\n")
	b.WriteString("\nIn each run the pods are created (32 at a time) while nothing schedules; then the scheduler (or L's binder) starts " +
		"and drains the backlog. B0 and L get the same pods without gangs.\n\n")
	b.WriteString("Figures (pods/s, create→bind, gang whole and partial gangs come from an informer of the driver: a pod is bound when the driver sees its spec.nodeName set):\n\n")
	b.WriteString("- **pods/s**: measured pods bound per second from the first bind to the last (median of repetitions, range in brackets); " +
		"**1-s p50, p99**: quantiles of the pods bound in each second.\n")
	b.WriteString("- **create→bind**: from the driver seeing a pod created to seeing it bound; in a backlog this is mostly queueing time, " +
		"and it includes the scheduler's start (which L does not have); **sched start**: from starting the scheduler process to its /readyz, " +
		"with the backlog already there; **sched attempts/pod**: the scheduler's scheduling cycles (scheduler_schedule_attempts_total) per pod bound, " +
		"1.00 when every pod is placed at its first try.\n")
	b.WriteString("- **gang whole**: from a gang's first member created to its last member bound.\n")
	b.WriteString("- **gang bind spread**: from a gang's first member bound to its last member bound, all seen by the driver: how long a gang was partly bound. " +
		"A scheduler that lets a gang's members bind only together still binds them one API request at a time, so this is never zero.\n")
	b.WriteString("- **peak pods in partial gangs**: the most pods bound at one time in gangs not yet whole (for B0 and L, the gangs they do not know of), " +
		"including gangs whose members are being bound together; **at end**: those left bound in gangs that never became whole, which hold resources for nothing.\n")
	b.WriteString("- **sched CPU s/1000 pods**: user+system time of the scheduler process over its life, per 1000 pods it bound; " +
		"**sched peak RSS**: its VmHWM. For CU, tephra-controllers' user+system time while the backlog drained, per 1000 pods bound, " +
		"follows in brackets (\"+ x controllers\"), not added to the scheduler's.\n")
	b.WriteString("- **API writes/pod**: the apiserver's apiserver_request_total for POST, PUT, PATCH, DELETE (and APPLY, DELETECOLLECTION) " +
		"while the backlog drained, per pod bound; **API CPU s/1000 pods**: kube-apiserver's user+system time while the backlog drained, per 1000 pods bound " +
		"(it shares the two CPUs with the scheduler).\n\n")
	b.WriteString("Scenario Q is GPU jobs of three queues (weights 1:2:3, equal demand, created interleaved) that run and end: a kwok plays the GPU nodes' kubelets " +
		"with the pod stages of manifests/kwok/stages.yaml (a bound pod starts at once and ends `sim.tephra.dev/duration` later), " +
		"managing only the GPU nodes, with no lease or heartbeat. Its figures, from the driver's informer, the same for every configuration " +
		"(for L, B0 and B1, which know no queues, they show what first-come, first-served does; L there binds in creation order to a GPU node with a free GPU as soon as one frees up):\n\n")
	b.WriteString("- **makespan**: first bind to the last job's end; **lower bound**: the jobs' GPU-seconds over the GPUs.\n")
	b.WriteString("- **GPU utilisation**: mean fraction of the GPUs held by bound, unfinished jobs from the first bind to the last (jobs wait all along).\n")
	b.WriteString("- **admission p50/p99** per queue: create→bind of its jobs.\n")
	b.WriteString("- **share**, **deserved**, **|deviation|** per queue: sampled every 100 ms from the first bind to the last, the queue's share of the GPUs, " +
		"its deserved share (weights water-filled over the queues' demand, held plus waiting: docs/queues.md without guarantees, capabilities or rounding) " +
		"and the mean absolute difference, in percent of the GPUs.\n")
	b.WriteString("- **API writes/pod** in Q include the simulated kubelet's two status writes per job.\n\n")
	if slices.ContainsFunc(res.Scenarios, func(sc *Scenario) bool { return sc.Devices }) {
		writeDevicesMethod(b)
	}
}

// writeDevicesMethod says how the scenarios with devices run.
func writeDevicesMethod(b *strings.Builder) {
	fmt.Fprintf(b, "Scenario G8-DRA is G8's gangs whose every member claims one device of Dynamic Resource Allocation (resource.k8s.io/v1), "+
		"run by B0 (upstream's default profile, the same pods without gangs) and C (Tephra, whose queues count the devices). "+
		"Every node publishes a ResourceSlice of %d devices of the local cluster's simulated driver (internal/localcluster/devices.go; no driver or kubelet runs: "+
		"kube-scheduler's DynamicResources plugin allocates from the slices alone), and DeviceClass `%s` selects them. "+
		"Each pod names the namespace's ResourceClaimTemplate (one request for one device of the class); kube-controller-manager, "+
		"started with its resourceclaim controller alone (`--controllers=resourceclaim-controller`) while the backlog is created, generates each pod's claim "+
		"and names it in the pod's status, as in a cluster, and is stopped once every pod names its claim, before the scheduler starts: "+
		"the backlog's creation time includes the claims', and while it drains only the scheduler and the driver talk to the apiserver, as in the other scenarios. "+
		"The scheduler allocates each claim in its binding cycle (DynamicResources' PreBind writes the claim's status), so API writes/pod include those writes. "+
		"After each run the driver reads every claim and checks that each measured pod was bound with its claim allocated a device of its own node's pool "+
		"and reserved for it, and no device allocated twice; a run with fewer such pods than pods fails. The goal compares C's scheduler CPU per pod with B0's: "+
		"DRA's own plugin costs both.\n\n", devicesPerNode, localcluster.GPUClass)
}

// queueTable is scenario Q's overall figures per configuration.
func queueTable(res *Results, nodes int) (header []string, rows [][]string) {
	header = []string{"config", "makespan", "lower bound", "makespan / bound", "GPU utilisation", "mean |deviation| from deserved",
		"evicted", "create→bind p50", "p99", "sched CPU s/1000 pods", "sched peak RSS", "API writes/pod"}
	for _, c := range res.Configurations {
		if !c.runs(scenarioByName("Q")) {
			continue
		}
		runs := res.runs(c.Name, "Q", nodes)
		if row, ok := unavailableRow(c, runs, len(header)); !ok {
			rows = append(rows, row)
			continue
		}
		q := summarizeQueues(runs)
		s := summarize(res, c.Name, "Q", nodes)
		rows = append(rows, []string{
			configLabel(c.Name, s), num("%.1f s", q.makespan), num("%.1f s", q.lowerBound), ratioPlain(q.makespan, q.lowerBound),
			percent(q.utilisation), percent(q.deviation), num("%.0f", q.evicted),
			num("%.2f s", s.latencyP50), num("%.2f s", s.latencyP99),
			cpuCell(s), num("%.0f MiB", s.peakRSS), num("%.2f", s.mutatingPerPod),
		})
	}
	return header, rows
}

// queueShareTable is scenario Q's figures per configuration and queue.
func queueShareTable(res *Results, nodes int) (header []string, rows [][]string) {
	header = []string{"config", "queue (weight)", "jobs", "admission p50", "p99", "share", "deserved", "|deviation|"}
	for _, c := range res.Configurations {
		if !c.runs(scenarioByName("Q")) {
			continue
		}
		runs := res.runs(c.Name, "Q", nodes)
		if row, ok := unavailableRow(c, runs, len(header)); !ok {
			rows = append(rows, row)
			continue
		}
		q := summarizeQueues(runs)
		for _, f := range q.queues {
			p50, p99 := math.NaN(), math.NaN()
			if f.AdmissionSeconds != nil {
				p50, p99 = f.AdmissionSeconds.P50, f.AdmissionSeconds.P99
			}
			rows = append(rows, []string{c.Name, fmt.Sprintf("%s (%d)", f.Name, f.Weight), fmt.Sprint(f.Pods),
				num("%.2f s", p50), num("%.2f s", p99), percent(f.Share), percent(f.Deserved), percent(f.Deviation)})
		}
	}
	return header, rows
}

// unavailableRow is the row of a configuration that has no figures (ok false), or ok true.
func unavailableRow(c ConfigurationStatus, runs []RunResult, width int) (row []string, ok bool) {
	if c.Unavailable != "" {
		return append([]string{c.Name, "unavailable: " + c.Unavailable}, make([]string, width-2)...), false
	}
	completed, why := 0, "did not run"
	for _, r := range runs {
		if done, reason := r.complete(); done {
			completed++
		} else {
			why = "failed: " + reason
		}
	}
	if completed == 0 {
		return append([]string{c.Name, why}, make([]string, width-2)...), false
	}
	return nil, true
}

func configLabel(name string, s summary) string {
	if s.failed > 0 {
		return fmt.Sprintf("%s (%d of %d failed)", name, s.failed, s.failed+s.completed)
	}
	return name
}

func percent(v float64) string { return num("%.1f %%", 100*v) }

// ratioPlain is a/b as "1.23", or "–".
func ratioPlain(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// writeQueueSection writes scenario Q's tables and plot.
func writeQueueSection(b *strings.Builder, res *Results, assets string) {
	header, rows := queueTable(res, res.Nodes)
	writeMarkdownTable(b, header, rows)
	header, rows = queueShareTable(res, res.Nodes)
	writeMarkdownTable(b, header, rows)
	for _, r := range res.Runs {
		if ok, _ := r.complete(); ok && r.Queues != nil && r.Queues.Series != nil {
			fmt.Fprintf(b, "![GPUs held (solid) and deserved (dashed) per queue over time, per configuration, first completed repetition](%s/queues.svg)\n\n", assets)
			break
		}
	}
}

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

func writeProblems(b *strings.Builder, res *Results) {
	problems := append(res.Unavailable(), res.Failures()...)
	if len(problems) == 0 {
		return
	}
	b.WriteString("Problems in this run:\n\n")
	for _, p := range problems {
		fmt.Fprintf(b, "- %s\n", p)
	}
	b.WriteString("\n")
}

func writeMarkdownTable(b *strings.Builder, header []string, rows [][]string) {
	escape := func(row []string) string {
		cells := make([]string, len(row))
		for i, cell := range row {
			cells[i] = strings.ReplaceAll(cell, "|", `\|`)
		}
		return "| " + strings.Join(cells, " | ") + " |\n"
	}
	b.WriteString(escape(header))
	b.WriteString("|" + strings.Repeat(" --- |", len(header)) + "\n")
	for _, row := range rows {
		b.WriteString(escape(row))
	}
	b.WriteString("\n")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// listOfScenarios names scenarios for a sentence: "P", "P and G8", "P, G8 and G64".
func listOfScenarios(scenarios []*Scenario) string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
