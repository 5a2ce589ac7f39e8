package job

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

var jobsDesc = prometheus.NewDesc("tephra_jobs",
	"Number of Jobs by queue and phase.", []string{"queue", "phase"}, nil)

// restarts counts the restarts the controller decided, by the job's queue and the action
// (RestartJob, RestartTask, RestartPod). It is counted when the decision is written, once.
var restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tephra_job_restarts_total",
	Help: "Restarts of Jobs, their tasks and pods decided by lifecycle policies, by queue and action.",
}, []string{"queue", "action"})

// phaseCollector computes tephra_jobs from the cache at every scrape, so that the count cannot
// miss a deleted job or drift after a restart.
type phaseCollector struct {
	jobs client.Reader
	// elected is closed once this replica leads; only the leader reports.
	elected <-chan struct{}
}

// registerMetrics registers the collectors in controller-runtime's registry. A process that sets
// up a second manager keeps the first one's.
func registerMetrics(jobs client.Reader, elected <-chan struct{}) error {
	for _, c := range []prometheus.Collector{phaseCollector{jobs: jobs, elected: elected}, restarts} {
		err := metrics.Registry.Register(c)
		if _, already := errors.AsType[prometheus.AlreadyRegisteredError](err); err != nil && !already {
			return err
		}
	}
	return nil
}

func (c phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c phaseCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var jobs batchv1alpha1.JobList
	if err := c.jobs.List(ctx, &jobs); err != nil {
		// An invalid metric would fail the whole scrape.
		ctrl.Log.WithName(ControllerName).Error(err, "cannot list jobs for the tephra_jobs metric")
		return
	}
	type key struct{ queue, phase string }
	counts := map[key]float64{}
	for i := range jobs.Items {
		phase := jobs.Items[i].Status.State.Phase
		if phase == "" {
			phase = batchv1alpha1.JobPending
		}
		counts[key{queueOf(&jobs.Items[i]), string(phase)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, n, k.queue, k.phase)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
