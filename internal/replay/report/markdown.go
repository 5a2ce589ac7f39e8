package report

import (
	"fmt"
	"io"
	"math"
	"path"
	"strings"
	"time"
)

// Meta is what the report says besides the outcomes: how it was made and what was replayed.
type Meta struct {
	Title string
	// Command is the command line that made the report, shown so that it can be made again.
	Command string
	// Trace describes the trace, a line each (jobs, span, load…).
	Trace []string
	// Cluster describes the cluster (nodes, GPUs per node…).
	Cluster string
	// Speedup is how many trace seconds a wall-clock second replayed; 0 leaves it out.
	Speedup float64
	// Durations are the replays' wall-clock durations by configuration (Outcomes.Config).
	Durations map[string]time.Duration
	// CPU is the CPU seconds each process used over a replay, by configuration and process;
	// CPUProcesses are the processes shown a row each, in order (the rest count in the total).
	CPU          map[string]map[string]float64
	CPUProcesses []string
	// Plots are the plot files to embed, relative to the report (as WritePlots returns them).
	Plots []string
	// JobsCSV is the per-job CSV file, relative to the report; "" leaves it out.
	JobsCSV string
}

// WriteMarkdown writes the comparison of the configurations' outcomes (a column each, in their
// order) as Markdown: how it was made, the trace and cluster, the main table, the goals, a table
// of each queue in each configuration against BaselineConfig, a table per configuration of its
// queues, and the plots. Durations are trace time, written as 45s, 12m 05s,
// 3h 02m or 2d 04h. The output depends only on its input.
func WriteMarkdown(w io.Writer, outs []Outcomes, meta Meta) error {
	var b strings.Builder
	title := meta.Title
	if title == "" {
		title = "Trace replay"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	if meta.Command != "" {
		fmt.Fprintf(&b, "Made by:\n\n```sh\n%s\n```\n\n", meta.Command)
	}

	b.WriteString("## Trace and cluster\n\n")
	for _, line := range meta.Trace {
		fmt.Fprintf(&b, "- %s\n", line)
	}
	if meta.Cluster != "" {
		fmt.Fprintf(&b, "- Cluster: %s\n", meta.Cluster)
	}
	if meta.Speedup > 0 {
		fmt.Fprintf(&b, "- Speedup: %g× (a wall-clock second replayed %g trace seconds). Every time below is trace time.\n", meta.Speedup, meta.Speedup)
	}
	b.WriteString("\n")

	b.WriteString("## Outcomes\n\n")
	if len(outs) == 0 {
		b.WriteString("No configuration ran.\n\n")
	} else {
		writeMainTable(&b, outs, meta)
		writeDefinitions(&b, outs[0].Options)
		writeGoals(&b, outs)
		b.WriteString("## Queues\n\n")
		writeQueuesAcross(&b, outs)
		for i := range outs {
			writeQueueTable(&b, &outs[i])
		}
	}

	if len(meta.Plots) > 0 {
		b.WriteString("## Plots\n\n")
		for _, file := range meta.Plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", plotCaption(file), link(file))
		}
	}
	if meta.JobsCSV != "" {
		fmt.Fprintf(&b, "Per-job results (a row per configuration and job): [%s](%s).\n", meta.JobsCSV, link(meta.JobsCSV))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// row is a line of a table: its label and how an outcome fills its cell.
type row struct {
	label string
	cell  func(o *Outcomes) string
}

// writeMainTable writes the configurations' outcomes side by side, a column each, a row a
// figure: what the jobs got, where their wait went, how the GPUs were used, what preemption
// cost, and how the shares held.
func writeMainTable(b *strings.Builder, outs []Outcomes, meta Meta) {
	var rows []row
	rows = append(rows, jobRows(meta)...)
	rows = append(rows, waitRows()...)
	rows = append(rows, gpuRows(outs[0].Options.PartialTolerance)...)
	rows = append(rows, preemptionRows()...)
	rows = append(rows, shareRows()...)
	writeColumns(b, outs, rows)
}

// jobRows are what the jobs got: how many finished or never ran, their JCT and their wait, with
// the replay's wall-clock time for each configuration.
func jobRows(meta Meta) []row {
	return append(append([]row{
		{"Configuration", func(o *Outcomes) string { return cell(o.Title) }},
		{"Replay wall-clock", func(o *Outcomes) string {
			if d, ok := meta.Durations[o.Config]; ok {
				return Duration(d.Seconds())
			}
			return "–"
		}},
	}, cpuRows(meta)...), []row{
		{"Jobs finished", func(o *Outcomes) string { return fmt.Sprintf("%d / %d", o.All.Finished, o.All.Jobs) }},
		{"Jobs that never ran", func(o *Outcomes) string { return fmt.Sprint(o.All.NeverRan) }},
		{"Jobs started, unfinished", func(o *Outcomes) string { return fmt.Sprint(o.All.Unfinished) }},
		{"JCT mean", func(o *Outcomes) string { return Duration(o.All.JCT.Mean) }},
		{"JCT p50", func(o *Outcomes) string { return Duration(o.All.JCT.P50) }},
		{"JCT p90", func(o *Outcomes) string { return Duration(o.All.JCT.P90) }},
		{"JCT p99", func(o *Outcomes) string { return Duration(o.All.JCT.P99) }},
		{"Wait mean", func(o *Outcomes) string { return Duration(o.All.Wait.Mean) }},
		{"Wait p50", func(o *Outcomes) string { return Duration(o.All.Wait.P50) }},
		{"Wait p90", func(o *Outcomes) string { return Duration(o.All.Wait.P90) }},
		{"Wait p99", func(o *Outcomes) string { return Duration(o.All.Wait.P99) }},
	}...)
}

// cpuRows are the CPU seconds the replay's processes used, a row for each of meta.CPUProcesses
// and one for all of them; none when no run measured them (runs.json of an older replay).
func cpuRows(meta Meta) []row {
	if len(meta.CPU) == 0 {
		return nil
	}
	seconds := func(v float64, ok bool) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.0f s", v)
	}
	var rows []row
	for _, name := range meta.CPUProcesses {
		rows = append(rows, row{"CPU: " + name, func(o *Outcomes) string {
			v, ok := meta.CPU[o.Config][name]
			return seconds(v, ok)
		}})
	}
	return append(rows, row{"CPU: all processes", func(o *Outcomes) string {
		total := 0.0
		for _, v := range meta.CPU[o.Config] {
			total += v
		}
		return seconds(total, len(meta.CPU[o.Config]) > 0)
	}})
}

// waitRows are where the wait went: to the first pod's creation, to the scheduler once there
// was room, to the big gangs, and to fair-share holds or scattered GPUs beside idle ones. A row
// shows "–" for a run that measured nothing it needs.
func waitRows() []row {
	return []row{
		{"Submit to first pod: mean / p90", func(o *Outcomes) string {
			if o.FirstPod.N == 0 {
				return "–"
			}
			return Duration(o.FirstPod.Mean) + " / " + Duration(o.FirstPod.P90)
		}},
		{"Jobs that pulled their data / transfer mean", func(o *Outcomes) string {
			if o.DataJobs == 0 {
				return "–"
			}
			if o.PulledData == 0 {
				return fmt.Sprintf("0 of %d", o.DataJobs)
			}
			return fmt.Sprintf("%d of %d / %s", o.PulledData, o.DataJobs, Duration(o.Transfer.Mean))
		}},
		{"Room to bind: mean / p90", func(o *Outcomes) string {
			if o.RoomToBind.N == 0 {
				return "–"
			}
			return Duration(o.RoomToBind.Mean) + " / " + Duration(o.RoomToBind.P90)
		}},
		{"Pods bound with no room first", func(o *Outcomes) string {
			measured := o.RoomToBind.N + o.BoundWithoutRoom
			if measured == 0 {
				return "–"
			}
			return fmt.Sprintf("%d of %d", o.BoundWithoutRoom, measured)
		}},
		{fmt.Sprintf("Big gangs (%d+ GPUs) finished", BigGangGPUs), func(o *Outcomes) string {
			return fmt.Sprintf("%d / %d", o.BigGangs.Finished, o.BigGangs.Jobs)
		}},
		{"Big gangs' wait mean", func(o *Outcomes) string { return Duration(o.BigGangs.Wait.Mean) }},
		{"Big gangs' wait p99", func(o *Outcomes) string { return Duration(o.BigGangs.Wait.P99) }},
		{"Wait at share beside idle GPUs", func(o *Outcomes) string {
			if o.WaitSeconds <= 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f job-hours (%s of the wait)", o.HeldBesideIdleWaitSeconds/3600, percent(ratio(o.HeldBesideIdleWaitSeconds, o.WaitSeconds)))
		}},
		{"Free GPUs while big gangs wait: whole nodes / scattered", func(o *Outcomes) string {
			if math.IsNaN(o.WholeFreeWhileBigWait) {
				return "–"
			}
			return fmt.Sprintf("%.0f / %.0f", o.WholeFreeWhileBigWait, o.ScatteredFreeWhileBigWait)
		}},
	}
}

// gpuRows are how the GPUs were used: the makespan, the GPUs allocated and busy, and the GPUs
// partial gangs held idle, the jobs among them counted when their partial gang outlasted the
// tolerance.
func gpuRows(tolerance float64) []row {
	return []row{
		{"Makespan", func(o *Outcomes) string {
			s := Duration(o.Makespan)
			if left := o.All.Jobs - o.All.Finished; left > 0 && o.All.Finished > 0 {
				s += fmt.Sprintf(" (%d unfinished)", left)
			}
			return s
		}},
		{"GPU allocated", func(o *Outcomes) string { return percent(o.AllocatedFraction()) }},
		{"GPU busy", func(o *Outcomes) string { return percent(o.BusyFraction()) }},
		{fmt.Sprintf("Partial-gang jobs (> %s)", Duration(tolerance)), func(o *Outcomes) string { return fmt.Sprint(o.PartialJobs) }},
		{"Partial-gang GPU-hours", func(o *Outcomes) string { return gpuHours(o.PartialGPUSeconds) }},
		{"Pods partial at end", func(o *Outcomes) string {
			return fmt.Sprintf("%d (%d GPUs)", o.PartialPodsAtEnd, o.PartialGPUsAtEnd)
		}},
	}
}

// preemptionRows are what preemption cost: the pods evicted, the work they lost, the jobs
// restarted, and the JCT against B1's split between the restarted jobs and the others.
func preemptionRows() []row {
	return []row{
		{"Preempted pods", func(o *Outcomes) string { return fmt.Sprint(o.PreemptedPods) }},
		{"Discarded GPU-hours", func(o *Outcomes) string {
			return fmt.Sprintf("%s (%s of the work)", gpuHours(o.DiscardedGPUSeconds), percent(ratio(o.DiscardedGPUSeconds, o.WorkGPUSeconds)))
		}},
		{"Jobs restarted (most restarts of one)", func(o *Outcomes) string {
			return fmt.Sprintf("%d (%d)", o.RestartedJobs, o.MostRestarts)
		}},
		{"JCT against B1's, job by job: restarted jobs / the others", func(o *Outcomes) string {
			a := o.AgainstB1
			if a == nil {
				return "–"
			}
			return fmt.Sprintf("%s job-hours (%d jobs) / %s (%d)", signedHours(a.Restarted), a.RestartedJobs, signedHours(a.Others), a.OtherJobs)
		}},
	}
}

// shareRows are how far the queues' shares were from their deserved ones, with how many samples
// were contended, since only those count.
func shareRows() []row {
	return []row{
		{"Queue share MAD", func(o *Outcomes) string {
			return fmt.Sprintf("%s (%d/%d samples contended)", points(o.All.ShareMAD), o.ContendedSamples, len(o.Series.Times))
		}},
	}
}

// writeColumns writes a table with a column per configuration, headed by its name, and a line
// per row; the figures are right-aligned so that a row's columns compare at a glance.
func writeColumns(b *strings.Builder, outs []Outcomes, rows []row) {
	b.WriteString("|  |")
	for i := range outs {
		fmt.Fprintf(b, " %s |", cell(outs[i].Config))
	}
	b.WriteString("\n|---|")
	for range outs {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |", r.label)
		for i := range outs {
			fmt.Fprintf(b, " %s |", r.cell(&outs[i]))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// writeDefinitions says what the main table's less obvious rows measure, so that the report
// reads without this package's documentation.
func writeDefinitions(b *strings.Builder, o Options) {
	fmt.Fprintf(b, `- JCT is submit to end over the finished jobs; wait is submit to the job's minimum first running,
  over the jobs that started. Percentiles are nearest-rank. Makespan is the last finished job's end.
- Submit to first pod is how long a job's first pod took to appear: in C a Tephra Job's controller
  creates it, in B0 and B1 the replay itself. It is part of the wait, and the speedup multiplies
  it: 0.1 s of wall clock is 14 s of trace time at 144×.
- Room to bind is, per pod asking GPUs that was bound (its creation recorded), the time from the
  first instant at which the nodes' free GPUs fitted it and the rest of its gang's minimum, a pod
  on one node, and its queue's share allowed them (its queue's GPUs and theirs at most the queue's
  deserved GPUs, or the queues asking less than the cluster) to its bind: the wait a scheduler
  answers for. Pods bound with no such instant first (room seen free only as they
  bound, or bound over their share while the cluster was contended, as B0 and B1 do) are counted
  apart, not in it.
- GPU allocated is GPU-time held by bound pods over capacity × run length; busy counts only the pods
  of jobs whose minimum was running.
- A partial gang is a job holding some, but fewer than its minimum, pods: its GPUs are held and
  idle. Jobs count when it lasted more than %s at a stretch; pods partial at end are the deadlock
  a gang scheduler prevents.
- Wait at share beside idle GPUs is the jobs' wait while their queue held at least its deserved
  share and the cluster had GPUs free for the job's minimum in total: what a fair-share hold may
  cost beside idle GPUs (or placement, when the free GPUs are scattered).
- Free GPUs while big gangs wait are means over the times a big gang waited: on nodes where no
  GPU was held (whole), and on partly held nodes (scattered), which a gang of whole nodes cannot use.
- Discarded GPU-hours are the work preemptions threw away, and their part of the trace's work
  (Σ replicas × GPUs × duration): when a preempted pod's end left a job fewer pods running than
  its minimum, the GPU-hours all its running pods had worked since its minimum last came to run.
  An elastic pod evicted while its job's minimum runs on throws no work away. A job restarted is
  one whose minimum came to run again after a preemption.
- JCT against B1's, job by job, sums each job's JCT less its JCT in B1, in job-hours, over the
  jobs that finished in both: for the jobs restarted by a preemption, then for the others. A mean
  JCT above B1's comes from the work reclaim threw away, and the wait to start again, when the
  first carries it; from order and placement when the second does.
- Queue share MAD is the mean |share held − deserved share| over %d time samples, counting only
  those when the queues asked for at least the cluster (contended), in percentage points of the
  cluster. Deserved shares are Tephra's (weights and guarantees), for every configuration. It is
  reported, not a goal: what a team feels is its jobs' times and the GPU-hours it gets over the
  contended period (the queues' tables below).

`, Duration(o.PartialTolerance), o.Samples)
}

func writeQueueTable(b *strings.Builder, o *Outcomes) {
	fmt.Fprintf(b, "### %s", cell(o.Config))
	if o.Title != "" {
		fmt.Fprintf(b, " — %s", cell(o.Title))
	}
	b.WriteString("\n\n")
	if len(o.Queues) == 0 {
		b.WriteString("No queue had jobs.\n\n")
		return
	}
	b.WriteString("| Queue | Weight | Guarantee | Jobs | Finished | Never ran | JCT mean | JCT p99 | Wait mean | Wait p99 | Share | Deserved | MAD | To share mean | To share max |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i := range o.Queues {
		q := &o.Queues[i]
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(q.Queue), q.Weight, q.Guarantee, q.Jobs, q.Finished, q.NeverRan,
			Duration(q.JCT.Mean), Duration(q.JCT.P99), Duration(q.Wait.Mean), Duration(q.Wait.P99),
			percent(q.MeanShare), percent(q.MeanDeserved), points(q.ShareMAD), toShareCells(q.ToShare))
	}
	fmt.Fprintf(b, "\nShares are means over the %d contended samples of %d. To share: from a contended sample at which the queue held at least a GPU less than its deserved share to the first at which it held it (or asked no more than it held), over %d episodes of all queues; an episode open at the end counts until the end (%d such; a max with + has one).\n\n",
		o.ContendedSamples, len(o.Series.Times), o.All.ToShare.Episodes, o.All.ToShare.Unreached)
}

// Duration formats trace seconds for people, at a precision that suits their size: 2.5s, 45s,
// 12m 05s, 3h 02m (up to 99h 59m, so that a column of hours compares at a glance), 4d 04h; "–" for NaN.
func Duration(seconds float64) string {
	switch {
	case math.IsNaN(seconds) || math.IsInf(seconds, 0):
		return "–"
	case seconds < 0:
		return "-" + Duration(-seconds)
	case seconds < 9.95:
		return fmt.Sprintf("%.1fs", seconds)
	}
	if s := int64(math.Round(seconds)); s < 60 {
		return fmt.Sprintf("%ds", s)
	} else if s < 3600 {
		return fmt.Sprintf("%dm %02ds", s/60, s%60)
	}
	if m := int64(math.Round(seconds / 60)); m < 100*60 {
		return fmt.Sprintf("%dh %02dm", m/60, m%60)
	}
	h := int64(math.Round(seconds / 3600))
	return fmt.Sprintf("%dd %02dh", h/24, h%24)
}

// percent formats a fraction; "–" for NaN.
func percent(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", f*100)
}

// points formats a difference of fractions in percentage points; "–" for NaN.
func points(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	return fmt.Sprintf("%.1f pp", f*100)
}

// gpuHours formats GPU-seconds as GPU-hours, keeping small non-zero amounts visible.
// signedHours is seconds as hours with their sign, to a tenth, or a hundredth below an hour.
func signedHours(s float64) string {
	if s == 0 {
		return "0"
	}
	if h := s / 3600; math.Abs(h) < 1 {
		return fmt.Sprintf("%+.2f", h)
	}
	return fmt.Sprintf("%+.1f", s/3600)
}

func gpuHours(s float64) string {
	h := s / 3600
	switch {
	case h == 0:
		return "0"
	case math.Abs(h) < 0.1:
		return fmt.Sprintf("%.3f", h)
	}
	return fmt.Sprintf("%.1f", h)
}

// cell makes text safe in a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// link makes a relative file name a Markdown link destination, spaces included.
func link(file string) string {
	if strings.ContainsAny(file, " ()<>") {
		return "<" + file + ">"
	}
	return file
}

// plotCaption is the alt text of a plot WritePlots made, or the file's name for another.
func plotCaption(file string) string {
	name := path.Base(file)
	for suffix, caption := range map[string]string{
		jctFile:         "Job completion time CDF",
		utilisationFile: "GPU allocated (solid) and busy (dashed) over time",
		sharesFile:      "Queue shares (solid) against deserved (dashed)",
	} {
		if strings.HasSuffix(name, suffix) {
			return caption
		}
	}
	return strings.TrimSuffix(name, path.Ext(name))
}

// toShareCells are a queue's time to reach its share, mean and max, as two cells, the max marked
// "+" when an episode was still open at the run's end.
func toShareCells(t ToShare) string {
	maxCell := Duration(t.Max)
	if t.Unreached > 0 {
		maxCell += "+"
	}
	return Duration(t.Mean) + " | " + maxCell
}
