package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Results are everything one run of the benchmark measured, as written to results.json (the
// matrix of configurations and scenarios) or sweep.json (scenario P against node counts).
type Results struct {
	// Kind is "matrix" or "sweep".
	Kind    string `json:"kind"`
	Smoke   bool   `json:"smoke,omitempty"`
	Command string `json:"command"`
	// Nodes of every cluster of a matrix run; Sweep the node counts of a sweep.
	Nodes int   `json:"nodes,omitempty"`
	Sweep []int `json:"sweep,omitempty"`
	Pods  int   `json:"pods"`
	Reps  int   `json:"reps"`
	// QScale scales scenario Q's run times (the 10–30 s).
	QScale float64 `json:"qScale,omitempty"`
	// EstimatedMinutes is what the run was estimated to take when it started.
	EstimatedMinutes float64 `json:"estimatedMinutes,omitempty"`

	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	// Kubernetes is the apiserver's version; Tephra the version of the scheduler's build.
	Kubernetes string `json:"kubernetes"`
	Tephra     string `json:"tephra"`

	Configurations []ConfigurationStatus `json:"configurations"`
	Scenarios      []*Scenario           `json:"scenarios"`
	Runs           []RunResult           `json:"runs"`
	// Profiles summarize the CPU profiles taken of C's scheduler (profile.go).
	Profiles []ProfileSummary `json:"profiles,omitempty"`

	// Dir is the run's folder under Settings.OutDir: results, plot, report and the clusters' logs.
	Dir string `json:"-"`
}

// ConfigurationStatus is a configuration of the run and whether it could run.
type ConfigurationStatus struct {
	Configuration
	// Unavailable, if set, says why the configuration could not run at all.
	Unavailable string `json:"unavailable,omitempty"`
}

// RunResult is one scenario on one configuration's cluster.
type RunResult struct {
	Configuration string `json:"configuration"`
	Scenario      string `json:"scenario"`
	Rep           int    `json:"rep"`
	Nodes         int    `json:"nodes"`
	// Pods are the measured pods and Blockers the members of never-fitting gangs (GI).
	Pods     int `json:"pods"`
	Blockers int `json:"blockers,omitempty"`
	// Bound counts the measured pods bound, and BoundAll every pod bound, blockers included.
	Bound    int `json:"bound"`
	BoundAll int `json:"boundAll"`
	// Error says why the run did not complete.
	Error string `json:"error,omitempty"`

	// DrainSeconds is from the start of the scheduler (or binder) to the last measured bind.
	DrainSeconds float64 `json:"drainSeconds"`
	// Throughput is measured pods bound per second, from the first bind to the last.
	Throughput Throughput `json:"throughput"`
	// LatencySeconds is create→bind of the measured pods, both as the recorder saw them.
	LatencySeconds *Quantiles `json:"latencySeconds,omitempty"`
	// GangWholeSeconds is, per gang, its first member created → its last member bound.
	GangWholeSeconds *Quantiles `json:"gangWholeSeconds,omitempty"`
	Gangs            int        `json:"gangs,omitempty"`
	GangsWhole       int        `json:"gangsWhole,omitempty"`
	// BlockersWhole counts never-fitting gangs seen whole (0 unless the workload is wrong).
	BlockersWhole int `json:"blockersWhole,omitempty"`
	// PeakPartialGangPods is the most pods seen bound at once in gangs not yet whole, and
	// PartialGangPodsAtEnd those left so when the run ended (in gangs that never became whole).
	PeakPartialGangPods  int `json:"peakPartialGangPods"`
	PartialGangPodsAtEnd int `json:"partialGangPodsAtEnd"`
	// GangBindSpreadSeconds is, per gang that became whole, its first member bound → its
	// minMember-th bound: how long it was partly bound.
	GangBindSpreadSeconds *Quantiles `json:"gangBindSpreadSeconds,omitempty"`

	// SchedulerCPUSecondsPer1000Pods is the scheduler process's user+system CPU time over its
	// life (started for this scenario), per 1000 pods bound; nil for L.
	SchedulerCPUSecondsPer1000Pods *float64 `json:"schedulerCPUSecondsPer1000Pods,omitempty"`
	// ControllersCPUSecondsPer1000Pods is tephra-controllers' user+system CPU time while the
	// backlog drained, per 1000 pods bound; set for CU only, whose controllers run beside the
	// scheduler (writing the upstream PodGroups' status while it binds). Not part of the
	// scheduler's figures.
	ControllersCPUSecondsPer1000Pods *float64 `json:"controllersCPUSecondsPer1000Pods,omitempty"`
	// SchedulerPeakRSSMiB is the scheduler's VmHWM; nil for L.
	SchedulerPeakRSSMiB *float64 `json:"schedulerPeakRSSMiB,omitempty"`
	// APIServerCPUSecondsPer1000Pods is kube-apiserver's user+system CPU time while the backlog
	// drained, per 1000 pods bound: the scheduler's load on the apiserver, which shares the CPUs.
	APIServerCPUSecondsPer1000Pods *float64 `json:"apiserverCPUSecondsPer1000Pods,omitempty"`
	// SchedulingAttemptsPerPod is the scheduler's scheduling cycles (scheduler_schedule_attempts_total,
	// every result) per pod bound; 1 means every pod was placed at its first try. Nil for L.
	SchedulingAttemptsPerPod *float64 `json:"schedulingAttemptsPerPod,omitempty"`
	// MutatingRequestsPerPod is the apiserver's mutating requests (POST, PUT, PATCH, DELETE,
	// APPLY, DELETECOLLECTION) while the backlog drained, per pod bound. In Q they include the
	// simulated kubelet's two status writes per pod.
	MutatingRequestsPerPod float64 `json:"mutatingRequestsPerPod"`

	// DevicesAllocated counts, in scenarios with devices, the measured pods bound with their
	// claim allocated a device of their node and reserved for them, no device twice: a run in
	// which fewer were did not complete (devices.go).
	DevicesAllocated *int `json:"devicesAllocated,omitempty"`
	// Queues are scenario Q's figures.
	Queues *QueueResult `json:"queues,omitempty"`
	// Profiled says the scheduler was being CPU-profiled during the run (which costs it a
	// little).
	Profiled bool `json:"profiled,omitempty"`
	// Timings are where the run's wall time went, for the estimate and for tuning the harness.
	Timings Timings `json:"timings"`
}

// Timings are the phases of a run, in seconds of wall time.
type Timings struct {
	// SetupSeconds is starting the control plane and creating the nodes.
	SetupSeconds float64 `json:"setup"`
	// CreateSeconds is creating the backlog until the recorder has seen all of it.
	CreateSeconds float64 `json:"create"`
	// SchedulerStartSeconds is from starting the scheduler process to its readiness.
	SchedulerStartSeconds float64 `json:"schedulerStart,omitempty"`
	// DrainSeconds is from starting the scheduler (or binder) until the drain is complete.
	DrainSeconds float64 `json:"drain"`
}

// Throughput is pods bound per second: the average, and quantiles of the 1-second samples.
type Throughput struct {
	Average float64   `json:"average"`
	P50     float64   `json:"p50"`
	P99     float64   `json:"p99"`
	Samples []float64 `json:"samples,omitempty"`
}

// Quantiles of a distribution.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func quantiles(values []float64) *Quantiles {
	if len(values) == 0 {
		return nil
	}
	return &Quantiles{P50: percentile(values, 50), P99: percentile(values, 99)}
}

// complete says whether every measured pod was bound, every gang made whole and no
// never-fitting gang bound whole; if not, why.
func (r RunResult) complete() (bool, string) {
	switch {
	case r.Error != "":
		return false, r.Error
	case r.Bound < r.Pods:
		return false, fmt.Sprintf("%d of %d pods bound", r.Bound, r.Pods)
	case r.GangsWhole < r.Gangs:
		return false, fmt.Sprintf("%d of %d gangs whole", r.GangsWhole, r.Gangs)
	case r.BlockersWhole > 0:
		return false, fmt.Sprintf("%d never-fitting gangs were bound whole", r.BlockersWhole)
	case r.Scenario == "Q" && r.Queues == nil:
		return false, "no queue figures"
	case r.devices() && r.DevicesAllocated == nil:
		return false, "no count of the devices allocated"
	case r.devices() && *r.DevicesAllocated < r.Pods:
		return false, fmt.Sprintf("%d of %d pods bound with their claim's device allocated on their node", *r.DevicesAllocated, r.Pods)
	}
	return true, ""
}

// devices says whether the run's scenario claims devices.
func (r RunResult) devices() bool {
	sc := scenarioByName(r.Scenario)
	return sc != nil && sc.Devices
}

// Failures lists the runs that did not complete. Unavailable configurations are not failures.
func (res *Results) Failures() []string {
	var out []string
	for _, r := range res.Runs {
		if ok, why := r.complete(); !ok {
			out = append(out, fmt.Sprintf("%s %s (rep %d, %d nodes): %s", r.Configuration, r.Scenario, r.Rep, r.Nodes, why))
		}
	}
	return out
}

// Unavailable lists the configurations that could not run, with why.
func (res *Results) Unavailable() []string {
	var out []string
	for _, c := range res.Configurations {
		if c.Unavailable != "" {
			out = append(out, fmt.Sprintf("%s unavailable: %s", c.Name, c.Unavailable))
		}
	}
	return out
}

// runs returns the runs of a configuration and scenario on clusters of nodes nodes.
func (res *Results) runs(config, scenario string, nodes int) []RunResult {
	var out []RunResult
	for _, r := range res.Runs {
		if r.Configuration == config && r.Scenario == scenario && r.Nodes == nodes {
			out = append(out, r)
		}
	}
	return out
}

// WriteJSON writes the results, indented, to path.
func (res *Results) WriteJSON(path string) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadResults reads results written by WriteJSON.
func ReadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res := &Results{}
	if err := json.Unmarshal(data, res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// Machine is what the benchmark ran on.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpuModel"`
	MemoryGB string `json:"memory"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

func thisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPUModel: "unknown", MemoryGB: "unknown", Kernel: "unknown"}
	if model := procField("/proc/cpuinfo", "model name"); model != "" {
		m.CPUModel = model
	}
	if mem := procField("/proc/meminfo", "MemTotal"); mem != "" {
		if fields := strings.Fields(mem); len(fields) == 2 && fields[1] == "kB" {
			if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
				m.MemoryGB = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if ok && strings.TrimSpace(key) == name {
			return strings.TrimSpace(value)
		}
	}
	return ""
}
