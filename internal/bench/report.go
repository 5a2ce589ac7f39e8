package bench

import (
	"fmt"
	"io"
	"math"
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
