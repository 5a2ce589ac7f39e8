package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
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
	peakPartial                              float64
	cpuPer1000, peakRSS                      float64
	mutatingPerPod                           float64
}

func summarize(res *Results, config, scenario string, nodes int) summary {
	var s summary
	var thr, p50, p99, lat50, lat99, gang50, gang99, partial, cpu, rss, mut []float64
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
		partial = append(partial, float64(r.PeakPartialGangPods))
		if r.SchedulerCPUSecondsPer1000Pods != nil {
			cpu = append(cpu, *r.SchedulerCPUSecondsPer1000Pods)
		}
		if r.SchedulerPeakRSSMiB != nil {
			rss = append(rss, *r.SchedulerPeakRSSMiB)
		}
		mut = append(mut, r.MutatingRequestsPerPod)
	}
	s.throughput, s.sampleP50, s.sampleP99 = median(thr), median(p50), median(p99)
	s.throughputMin, s.throughputMax = percentile(thr, 0), percentile(thr, 100)
	s.latencyP50, s.latencyP99 = median(lat50), median(lat99)
	s.gangP50, s.gangP99 = median(gang50), median(gang99)
	s.peakPartial, s.cpuPer1000, s.peakRSS = median(partial), median(cpu), median(rss)
	s.mutatingPerPod = median(mut)
	return s
}

// ratio is a/b as "1.23×", or "–".
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// num formats a figure, "–" if it does not apply.
func num(format string, v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// scenarioTable is one scenario's figures per configuration, as rows of cells.
func scenarioTable(res *Results, sc *Scenario, nodes int) (header []string, rows [][]string) {
	header = []string{"config", "pods/s", "1-s p50", "1-s p99", "vs B0", "vs L",
		"create→bind p50", "p99", "gang whole p50", "p99", "peak pods in partial gangs",
		"sched CPU s/1000 pods", "sched peak RSS", "API writes/pod"}
	b0 := summarize(res, "B0", sc.Name, nodes)
	l := summarize(res, "L", sc.Name, nodes)
	for _, c := range res.Configurations {
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
			num("%.0f", s.peakPartial),
			num("%.2f", s.cpuPer1000), num("%.0f MiB", s.peakRSS), num("%.2f", s.mutatingPerPod),
		})
	}
	return header, rows
}

// sweepTable is scenario P's throughput per node count and configuration.
func sweepTable(res *Results) (header []string, rows [][]string) {
	header = []string{"nodes"}
	for _, c := range res.Configurations {
		header = append(header, c.Name+" pods/s")
	}
	for _, c := range res.Configurations {
		if c.Name != "L" {
			header = append(header, c.Name+" CPU s/1000 pods")
		}
	}
	for _, nodes := range res.Sweep {
		row := []string{fmt.Sprint(nodes)}
		for _, c := range res.Configurations {
			row = append(row, sweepCell(res, c, nodes, func(s summary) string { return num("%.0f", s.throughput) }))
		}
		for _, c := range res.Configurations {
			if c.Name != "L" {
				row = append(row, sweepCell(res, c, nodes, func(s summary) string { return num("%.2f", s.cpuPer1000) }))
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}

func sweepCell(res *Results, c ConfigurationStatus, nodes int, cell func(summary) string) string {
	if c.Unavailable != "" {
		return "unavailable"
	}
	s := summarize(res, c.Name, "P", nodes)
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
		header, rows := sweepTable(res)
		writeTabRows(tw, header, rows)
	} else {
		for _, sc := range res.Scenarios {
			if sc.Skip != "" {
				fmt.Fprintf(tw, "\n%s (%s): skipped, %s\n", sc.Name, sc.Title, sc.Skip)
				continue
			}
			fmt.Fprintf(tw, "\n%s: %s\n", sc.Name, res.scenarioCaption(sc, res.Nodes))
			header, rows := scenarioTable(res, sc, res.Nodes)
			writeTabRows(tw, header, rows)
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
		return fmt.Sprintf("scenario P (%d pods) against node counts, %s", res.Pods, reps)
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
	case sc.GangSize > 0:
		caption = fmt.Sprintf("%s: %d pods in %d gangs of %d", sc.Title, pods, pods/sc.GangSize, sc.GangSize)
	case sc.Blockers:
		caption = fmt.Sprintf("%s: %d plain pods measured, and %d gangs of %d members that ask for %s CPU each",
			sc.Title, pods, blockerGangs, blockers/blockerGangs, blockerCPU.String())
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
	b.WriteString("<!-- Generated by test/bench (cmd/tephra-bench) from the results beside it; do not edit: re-run the command below. -->\n\n")
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
			fmt.Fprintf(&b, "    %s   # %s, %s\n", res.Command, res.describe(), res.Finished.UTC().Format("2006-01-02"))
		}
	}
	b.WriteString("\n")
	writeMethod(&b, first)
	if matrix != nil {
		b.WriteString("## Results\n\n")
		fmt.Fprintf(&b, "%s. Ratios compare pods/s with B0 (vanilla) and L (the apiserver's limit).\n\n", upperFirst(matrix.describe()))
		fmt.Fprintf(&b, "![pods bound per second, per configuration and scenario](%s/throughput.svg)\n\n", assets)
		for _, sc := range matrix.Scenarios {
			fmt.Fprintf(&b, "### %s\n\n", sc.Name)
			if sc.Skip != "" {
				fmt.Fprintf(&b, "%s: not run yet, %s.\n\n", upperFirst(sc.Title), sc.Skip)
				continue
			}
			fmt.Fprintf(&b, "%s.\n\n", upperFirst(matrix.scenarioCaption(sc, matrix.Nodes)))
			header, rows := scenarioTable(matrix, sc, matrix.Nodes)
			writeMarkdownTable(&b, header, rows)
		}
		writeProblems(&b, matrix)
	}
	if sweep != nil {
		b.WriteString("## Cost curve\n\n")
		fmt.Fprintf(&b, "Scenario P (%d plain pods) on clusters of each size: pods bound per second, and the scheduler's CPU time per 1000 pods.\n\n", sweep.Pods)
		fmt.Fprintf(&b, "![pods bound per second against the number of nodes](%s/sweep.svg)\n\n", assets)
		header, rows := sweepTable(sweep)
		writeMarkdownTable(&b, header, rows)
		writeProblems(&b, sweep)
	}
	return b.String()
}

func writeMethod(b *strings.Builder, res *Results) {
	b.WriteString("## Method\n\n")
	b.WriteString("Every configuration gets fresh processes: etcd (no fsync), kube-apiserver without priority and fairness " +
		"or in-flight limits, and no kube-controller-manager. kwok makes the simulated nodes Ready (8 CPUs, 32Gi, 110 pods each) " +
		"and is then stopped, so no heartbeat, lease or pod status update competes with the scheduler; bound pods stay Pending. " +
		"The scheduler runs as its own process at --v=1, with the shipped configuration's client QPS and burst and no leader election. " +
		"Configurations are interleaved (L B0 B1 C L B0 B1 C ...).\n\n")
	b.WriteString("Configurations:\n\n")
	for _, c := range res.Configurations {
		fmt.Fprintf(b, "- **%s**, %s.", c.Name, c.Title)
		if c.FeatureGates != "" || c.RuntimeConfig != "" {
			fmt.Fprintf(b, " kube-apiserver and the scheduler run with `--feature-gates=%s`, the apiserver with `--runtime-config=%s`.", c.FeatureGates, c.RuntimeConfig)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nB1 needs GenericWorkload in the apiserver (PodGroup storage; without it spec.schedulingGroup is dropped) and in the scheduler " +
		"(the GangScheduling plugin joins the default profile, and the queue handles pod groups). kube-controller-manager uses the gate only for " +
		"the PodGroupProtection controller, a deletion finalizer that scheduling does not need; no other gate is required.\n")
	b.WriteString("L's binder makes one request per pod where a scheduler makes at least two (the binding and its event), " +
		"so where the client QPS rather than the apiserver is the limit, L binds up to twice as fast.\n")
	b.WriteString("\nIn each scenario the pods are created while nothing schedules; then the scheduler (or L's binder) starts " +
		"and drains the backlog. The scheduler is restarted for every scenario. B0 and L get the same pods without gangs.\n\n")
	b.WriteString("Figures (pods/s, create→bind, gang whole and partial gangs come from an informer of the driver: a pod is bound when the driver sees its spec.nodeName set):\n\n")
	b.WriteString("- **pods/s**: measured pods bound per second from the first bind to the last (median of repetitions, range in brackets); " +
		"**1-s p50, p99**: quantiles of the pods bound in each second.\n")
	b.WriteString("- **create→bind**: from the driver seeing a pod created to seeing it bound; in a backlog this is mostly queueing time.\n")
	b.WriteString("- **gang whole**: from a gang's first member created to its last member bound.\n")
	b.WriteString("- **peak pods in partial gangs**: the most pods bound at one time in gangs not yet whole (for B0 and L, the gangs they do not know of).\n")
	b.WriteString("- **sched CPU s/1000 pods**: user+system time of the scheduler process over its life, per 1000 pods it bound; " +
		"**sched peak RSS**: its VmHWM.\n")
	b.WriteString("- **API writes/pod**: the apiserver's apiserver_request_total for POST, PUT, PATCH, DELETE (and APPLY, DELETECOLLECTION) " +
		"while the backlog drained, per pod bound.\n\n")
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
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(header)) + "\n")
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, cell := range row {
			cells[i] = strings.ReplaceAll(cell, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
