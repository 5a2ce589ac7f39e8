package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// jobBurstSection renders the Job burst's section of docs/benchmarks.md: how it is measured,
// always, and the published run's figures, if there is one.
func jobBurstSection(res *JobBurstResults) string {
	var b strings.Builder
	b.WriteString("\n## Job burst: Tephra Jobs and batch/v1 Jobs\n\n")
	writeJobBurstMethod(&b, res)
	if res == nil {
		b.WriteString("Not measured yet: run `make bench-jobs` (`make bench` runs it after the scheduling benchmark).\n")
		return b.String()
	}
	m := res.Machine
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, Go %s, Kubernetes %s; Tephra %s; %s, took %.0f min:\n\n    %s   # %s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGB, m.Go, res.Kubernetes, res.Tephra, res.Finished.UTC().Format("2006-01-02"),
		res.Finished.Sub(res.Started).Minutes(), res.Command, res.describe())
	writeMarkdownTable(&b, goalHeader, goalRows(res.goals()))
	for _, sh := range res.Shapes {
		fmt.Fprintf(&b, "### %s\n\n%s.\n\n", sh.Name, upperFirst(res.caption(sh)))
		header, rows := res.shapeTable(sh)
		writeMarkdownTable(&b, header, rows)
		if header, rows := res.writesTable(sh); len(rows) > 0 {
			b.WriteString("API writes per pod by resource, the median over the repetitions:\n\n")
			writeMarkdownTable(&b, header, rows)
		}
	}
	if failures := res.Failures(); len(failures) > 0 {
		b.WriteString("Problems in this run:\n\n")
		for _, f := range failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeJobBurstMethod says how the bursts are made and measured, with the published run's sizes
// (or the defaults, before there is one).
func writeJobBurstMethod(b *strings.Builder, res *JobBurstResults) {
	jobs, nodes, workers, qps := DefaultJobBurstJobs, kwokNodesFor(DefaultJobBurstJobs), DefaultJobBurstWorkers, float64(DefaultJobBurstQPS)
	if res != nil {
		jobs, nodes, workers, qps = res.Jobs, res.Nodes, res.Workers, res.QPS
	}
	fmt.Fprintf(b, "How fast the Job path turns a burst of Jobs into pods, and pods into bound pods: Tephra's Job controller "+
		"against Kubernetes' own (issue #61). One control plane for every burst, with Tephra installed as `make up` installs it "+
		"(internal/localcluster's defaults: etcd, kube-apiserver, kube-controller-manager with its default controllers, kwok, "+
		"tephra-scheduler and tephra-controllers as their ServiceAccounts, from the shipped manifests), and %d simulated nodes "+
		"(8 CPUs, 32Gi, 110 pods) that kwok runs: a bound pod turns Running and, with no `sim.tephra.dev/duration`, runs until "+
		"deleted, so no Job completes during a burst. Each pod asks for 10m CPU and 16Mi, no GPU: every burst fits at once.\n\n", nodes)
	fmt.Fprintf(b, "A burst is N = %d pods' worth of Jobs created at once by %d client workers (client QPS and burst %.0f, "+
		"which do not limit them): **J1**, %d one-pod Jobs, or **J8**, %d Jobs of 8 pods. Once as Tephra Jobs "+
		"(batch.tephra.dev/v1alpha1, queue `default`, minAvailable = replicas): tephra-controllers' Job controller creates "+
		"each Job's pods, and for J8 each Job's PodGroup (a one-pod Job's pod carries its group, with no PodGroup object: docs/job.md). Once as batch/v1 Jobs (parallelism = completions = the Job's pods; J8's Indexed): "+
		"kube-controller-manager's Job controller creates the pods, plain pods without a gang, as batch/v1 gives. Both "+
		"templates name tephra-scheduler, so the same scheduler binds both. kube-controller-manager runs with localcluster's "+
		"client QPS 500 and burst 1000, tephra-controllers with its Deployment's flags and defaults (client QPS 1000, burst 2000, 16 Jobs decided at once). The kinds "+
		"alternate: for each repetition and shape, the order is rotated by one. Before the first burst, one of each kind "+
		"warms the cluster up; after every burst all Jobs, PodGroups, pods and events are deleted, and the next starts once "+
		"the namespace is empty.\n\n", jobs, workers, qps, jobs, jobs/8)
	b.WriteString("Figures come from an informer of the driver, in seconds from the first create call: **submitted**, until the " +
		"last create call was answered; **all pods exist**, until the informer had seen every pod; **all pods bound**, until " +
		"it had seen every pod with spec.nodeName set; **create→first pod p50, p99**, per Job, from its own create call to " +
		"its first pod seen. **controller CPU s** is the user+system time of the process whose controller creates the pods " +
		"(tephra-controllers, or kube-controller-manager, which runs other controllers too) from the first create call to " +
		"half a second after the last bind; **apiserver CPU s** the kube-apiserver's over the same span, and **control plane " +
		"CPU s** that of every process of the cluster together (apiserver, etcd, both controller processes, the scheduler, " +
		"kwok): on 2 cores a burst takes as long as the CPU it costs them all; **API writes/pod** are the apiserver's mutating requests over the same span, per " +
		"pod, the Jobs' creation included. Each repetition is shown, then the median, then Tephra's median over batch/v1's. " +
		"The goal: Tephra's time until every pod exists at most 1.0 × batch/v1's, for N = 1000.\n\n")
}

// describe sums the run up: N, nodes and repetitions.
func (res *JobBurstResults) describe() string {
	reps := fmt.Sprintf("%d repetitions, medians", res.Reps)
	if res.Reps == 1 {
		reps = "1 repetition"
	}
	return fmt.Sprintf("N = %d, %d nodes, %s", res.Jobs, res.Nodes, reps)
}

// caption says what a shape's bursts were.
func (res *JobBurstResults) caption(sh *JobShape) string {
	jobs := sh.jobs(res.Jobs)
	return fmt.Sprintf("%d %s (%d pods) created at once, %d nodes", jobs, sh.Title, jobs*sh.PodsPerJob, res.Nodes)
}

var burstHeader = []string{"Jobs", "run", "submitted", "all pods exist", "all pods bound",
	"create→first pod p50", "p99", "controller CPU s", "apiserver CPU s", "control plane CPU s", "API writes/pod"}

// shapeTable is a shape's bursts: each repetition of each kind, each kind's median, and the
// ratio of Tephra's medians to batch/v1's.
func (res *JobBurstResults) shapeTable(sh *JobShape) (header []string, rows [][]string) {
	secs := func(v float64) string { return num("%.2f s", v) }
	for _, kind := range jobKinds {
		for _, r := range res.runs(kind, sh.Name) {
			label := fmt.Sprintf("rep %d", r.Rep)
			if ok, why := r.complete(); !ok {
				row := []string{kind, label, "failed: " + why}
				for len(row) < len(burstHeader) {
					row = append(row, "–")
				}
				rows = append(rows, row)
				continue
			}
			p50, p99 := math.NaN(), math.NaN()
			if r.FirstPodSeconds != nil {
				p50, p99 = r.FirstPodSeconds.P50, r.FirstPodSeconds.P99
			}
			rows = append(rows, []string{kind, label, secs(r.SubmittedSeconds), secs(r.AllPodsExistSeconds),
				secs(r.AllPodsBoundSeconds), secs(p50), secs(p99), num("%.2f", orNaN(r.ControllerCPUSeconds)),
				num("%.2f", orNaN(r.APIServerCPUSeconds)), num("%.2f", orNaN(r.ControlPlaneCPUSeconds)),
				num("%.2f", orNaN(r.MutatingRequestsPerPod))})
		}
		s := res.summarize(kind, sh.Name)
		rows = append(rows, []string{kind, "median", secs(s.submitted), secs(s.allExist), secs(s.allBound),
			secs(s.firstPodP50), secs(s.firstPodP99), num("%.2f", s.controllerCPU), num("%.2f", s.apiserverCPU),
			num("%.2f", s.controlPlaneCPU), num("%.2f", s.mutatingRequestsPod)})
	}
	t, b := res.summarize(TephraJobKind, sh.Name), res.summarize(BatchJobKind, sh.Name)
	rows = append(rows, []string{"Tephra / batch/v1", "median", ratio(t.submitted, b.submitted), ratio(t.allExist, b.allExist),
		ratio(t.allBound, b.allBound), ratio(t.firstPodP50, b.firstPodP50), ratio(t.firstPodP99, b.firstPodP99),
		ratio(t.controllerCPU, b.controllerCPU), ratio(t.apiserverCPU, b.apiserverCPU), ratio(t.controlPlaneCPU, b.controlPlaneCPU),
		ratio(t.mutatingRequestsPod, b.mutatingRequestsPod)})
	return burstHeader, rows
}

// orNaN is *v, or NaN for a figure that was not read.
func orNaN(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

// WriteText prints the results as plain tables, for a terminal.
func (res *JobBurstResults) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n%s: Job burst, %s\n", res.Command, res.describe())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, sh := range res.Shapes {
		fmt.Fprintf(tw, "\n%s: %s\n", sh.Name, res.caption(sh))
		header, rows := res.shapeTable(sh)
		writeTabRows(tw, header, rows)
		if header, rows := res.writesTable(sh); len(rows) > 0 {
			writeTabRows(tw, header, rows)
		}
	}
	fmt.Fprintf(tw, "\nGoals\n")
	writeTabRows(tw, goalHeader, goalRows(res.goals()))
	_ = tw.Flush()
	for _, line := range res.Failures() {
		fmt.Fprintln(w, "FAILED:", line)
	}
}

// writesTable splits each kind's API writes per pod by resource (the median over repetitions),
// the resources sorted by the most writes of either kind: where one kind writes more than the
// other. No rows when no run recorded them.
func (res *JobBurstResults) writesTable(sh *JobShape) (header []string, rows [][]string) {
	byKind := map[string]map[string]float64{}
	most := map[string]float64{}
	for _, kind := range jobKinds {
		samples := map[string][]float64{}
		for _, r := range res.runs(kind, sh.Name) {
			for resource, v := range r.WritesPerPodByResource {
				samples[resource] = append(samples[resource], v)
			}
		}
		byKind[kind] = map[string]float64{}
		for resource, values := range samples {
			byKind[kind][resource] = median(values)
			most[resource] = max(most[resource], byKind[kind][resource])
		}
	}
	resources := make([]string, 0, len(most))
	for resource, v := range most {
		if v >= 0.05 {
			resources = append(resources, resource)
		}
	}
	sort.Slice(resources, func(i, j int) bool {
		if most[resources[i]] != most[resources[j]] {
			return most[resources[i]] > most[resources[j]]
		}
		return resources[i] < resources[j]
	})
	header = append([]string{"writes/pod"}, resources...)
	for _, kind := range jobKinds {
		if len(byKind[kind]) == 0 {
			continue
		}
		row := []string{kind}
		for _, resource := range resources {
			row = append(row, num("%.2f", byKind[kind][resource]))
		}
		rows = append(rows, row)
	}
	return header, rows
}
