package bench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/procstat"
)

// costBaseline is what the apiserver and tephra-controllers have spent before the scheduling
// starts: the run's costs are what they spend from there.
type costBaseline struct {
	mutatingRequests float64
	apiServer        procstat.Stats
	// controllers is zero without tephra-controllers.
	controllers procstat.Stats
}

// readCostBaseline reads the apiserver's mutating requests and CPU, and tephra-controllers' CPU,
// before the scheduling starts.
func readCostBaseline(ctx context.Context, b *benchCluster) (costBaseline, error) {
	var base costBaseline
	var err error
	if base.mutatingRequests, err = b.mutatingRequests(ctx); err != nil {
		return base, err
	}
	if base.apiServer, err = procstat.Read(b.Pid(localcluster.APIServer)); err != nil {
		return base, fmt.Errorf("reading the apiserver's CPU: %w", err)
	}
	if b.config.Controllers {
		if base.controllers, err = procstat.Read(b.Pid(localcluster.Controllers)); err != nil {
			return base, fmt.Errorf("reading tephra-controllers' CPU: %w", err)
		}
	}
	return base, nil
}

// recordObservation fills run with the figures of what the recorder saw: binds, throughput,
// latencies, gangs, and in Q the queues' figures on a pool of gpus GPUs.
func recordObservation(run *RunResult, o observation, start time.Time, w *workload, gpus int) {
	run.Bound = len(o.binds)
	run.BoundAll = o.bound
	if len(o.binds) > 0 {
		run.DrainSeconds = o.binds[len(o.binds)-1].Sub(start).Seconds()
	}
	avg, samples := throughput(o.binds)
	run.Throughput = Throughput{Average: avg, Samples: samples}
	if len(samples) > 0 {
		run.Throughput.P50, run.Throughput.P99 = percentile(samples, 50), percentile(samples, 99)
	}
	run.LatencySeconds = quantiles(seconds(o.latencies))
	run.GangWholeSeconds = quantiles(seconds(o.gangLatencies))
	run.Gangs, run.GangsWhole, run.BlockersWhole = o.gangs, o.gangsWhole, o.blockersWhole
	run.PeakPartialGangPods, run.PartialGangPodsAtEnd = o.peakPartial, o.partialAtEnd
	run.GangBindSpreadSeconds = quantiles(seconds(o.gangSpreads))
	if w.queues() {
		run.Queues = queueResult(o.pods, gpus, o.evicted)
	}
}

// recordCosts fills run with what the drain cost, per pod bound: the scheduler's CPU, memory and
// scheduling attempts (without the binder), tephra-controllers' CPU, and the apiserver's mutating
// requests and CPU since base.
func recordCosts(ctx context.Context, b *benchCluster, o observation, base costBaseline, run *RunResult) error {
	if !b.config.Binder {
		stats, err := procstat.Read(b.Pid(localcluster.Scheduler))
		if err != nil {
			return fmt.Errorf("reading the scheduler's CPU and memory: %w", err)
		}
		run.SchedulerCPUSecondsPer1000Pods = ptr.To(stats.CPUSeconds / float64(max(o.bound, 1)) * 1000)
		run.SchedulerPeakRSSMiB = ptr.To(float64(stats.PeakRSSBytes) / (1 << 20))
		attempts, err := b.schedulingAttempts(ctx)
		if err != nil {
			return err
		}
		run.SchedulingAttemptsPerPod = ptr.To(attempts / float64(max(o.bound, 1)))
	}
	if b.config.Controllers {
		stats, err := procstat.Read(b.Pid(localcluster.Controllers))
		if err != nil {
			return fmt.Errorf("reading tephra-controllers' CPU: %w", err)
		}
		run.ControllersCPUSecondsPer1000Pods = ptr.To((stats.CPUSeconds - base.controllers.CPUSeconds) / float64(max(o.bound, 1)) * 1000)
	}
	after, err := b.mutatingRequests(ctx)
	if err != nil {
		return err
	}
	run.MutatingRequestsPerPod = (after - base.mutatingRequests) / float64(max(o.bound, 1))
	apiAfter, err := procstat.Read(b.Pid(localcluster.APIServer))
	if err != nil {
		return fmt.Errorf("reading the apiserver's CPU: %w", err)
	}
	run.APIServerCPUSecondsPer1000Pods = ptr.To((apiAfter.CPUSeconds - base.apiServer.CPUSeconds) / float64(max(o.bound, 1)) * 1000)
	return nil
}
