package bench

import (
	"math"
	"time"
)

// The estimate's model of a run at 1000 nodes, from runs of 3000 and 5000 pods per scenario on a
// 2-core machine shared with other tests; see Estimate. Drain times are averages over the
// configurations that run each scenario (estimateDrainPer1000).
const (
	// estimateBuild is checking (and, if needed, rebuilding) the binaries.
	estimateBuild = 20 * time.Second
	// estimateClusterStart is starting a control plane (or, in a smoke run, emptying it);
	// estimateNodeCreate creating one node.
	estimateClusterStart = 4500 * time.Millisecond
	estimateNodeCreate   = time.Millisecond
	// estimateRunOverhead is the rest of a run's fixed cost (recorder, settle); estimatePodCreate
	// creating one pod of the backlog.
	estimateRunOverhead = 1500 * time.Millisecond
	estimatePodCreate   = 1300 * time.Microsecond
	// In scenarios with devices, estimateSlicePublish is publishing one node's ResourceSlice and
	// estimateClaimCreate kube-controller-manager's generating one pod's claim (the claim, and
	// the pod's status naming it), on top of creating the pod.
	estimateSlicePublish = 1500 * time.Microsecond
	estimateClaimCreate  = 2500 * time.Microsecond
)

// estimateDrainPer1000 is the mean drain time (scheduler start included) per 1000 measured pods
// of each scenario at 1000 nodes, over the configurations that run it: the published run of
// 2026-11-26 (docs/benchmarks/results.json, 27 min, which the earlier figures had put at 34),
// rounded up. B1's scheduler alone takes seconds to start on a backlog of gangs. G8-DRA's pods
// cost DRA's Filter a look at every node's devices: about 70 pods/s, for B0 and C alike, in runs
// of 1000 pods.
var estimateDrainPer1000 = map[string]time.Duration{
	"P":      2500 * time.Millisecond,
	"G8":     3500 * time.Millisecond,
	"G64":    3000 * time.Millisecond,
	"GI":     12 * time.Second,
	"T":      6500 * time.Millisecond,
	"G8-DRA": 15 * time.Second,
}

// Estimate forecasts how long a run with these settings takes on a machine like the reference
// (2 cores), with the given configurations and scenarios. It is rough (±30 %): drains
// depend on the scheduler being measured, which is the point of the benchmark.
func Estimate(s Settings, configurations []*Configuration, scenarios []*Scenario) time.Duration {
	s, err := s.withDefaults()
	if err != nil {
		return 0
	}
	counts := []int{s.Nodes}
	if len(s.Sweep) > 0 {
		counts = s.Sweep
	}
	total := estimateBuild
	for _, nodes := range counts {
		// Scheduling a pod costs more on more nodes, less than in proportion (the scheduler
		// scores a share of the feasible nodes that shrinks as clusters grow).
		scale := math.Sqrt(float64(nodes) / 1000)
		for _, sc := range scenarios {
			if sc.Skip != "" {
				continue
			}
			size := workloadSize{pods: s.Pods, nodes: nodes, gpus: estimateGPUs(nodes), qScale: s.qScale()}
			w := newWorkload(sc, "estimate", size)
			run := estimateRunOverhead + time.Duration(len(w.pods))*estimatePodCreate
			if sc.Devices {
				run += time.Duration(len(w.pods))*estimateClaimCreate + time.Duration(nodes)*estimateSlicePublish
			}
			if s.Smoke {
				// One control plane per configuration, emptied between runs: about as long as
				// creating the pods.
				run += time.Duration(len(w.pods)) * estimatePodCreate
			} else {
				run += estimateClusterStart + time.Duration(nodes)*estimateNodeCreate
			}
			if sc.Queues {
				// The lower bound of the makespan, plus what the schedulers lose to it.
				var gpuSeconds float64
				for _, p := range w.pods {
					gpuSeconds += p.run.Seconds()
				}
				run += time.Duration(1.4*gpuSeconds/float64(max(size.gpus, 1))*float64(time.Second)) + time.Second
			} else {
				run += time.Duration(float64(estimateDrainPer1000[sc.Name]) * float64(w.measured()) / 1000 * scale)
			}
			configs := 0
			for _, c := range configurations {
				if c.runs(sc) {
					configs++
				}
			}
			total += time.Duration(configs*s.Reps) * run
		}
	}
	if s.Smoke {
		// The configurations run in parallel, on 2 cores.
		total = estimateBuild + (total-estimateBuild)*2/time.Duration(max(len(configurations), 2))
	}
	return total
}

// estimateGPUs is the GPU pool of a cluster of nodes nodes (cluster.go's GPU nodes).
func estimateGPUs(nodes int) int {
	return (nodes + gpuNodeEvery - 1) / gpuNodeEvery * gpusPerNode
}
