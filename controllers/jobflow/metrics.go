package jobflow

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

var jobFlowsDesc = prometheus.NewDesc("tephra_jobflows",
	"Number of JobFlows by phase.", []string{"phase"}, nil)

// phaseCollector computes tephra_jobflows from the cache at every scrape, so that the count
// cannot miss a deleted JobFlow or drift after a restart. Only the leader reports.
type phaseCollector struct {
	flows   client.Reader
	elected <-chan struct{}
}

func registerMetrics(flows client.Reader, elected <-chan struct{}) error {
	err := metrics.Registry.Register(phaseCollector{flows: flows, elected: elected})
	if _, already := errors.AsType[prometheus.AlreadyRegisteredError](err); err != nil && !already {
		return err
	}
	return nil
}

func (c phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobFlowsDesc }

func (c phaseCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var flows batchv1alpha1.JobFlowList
	if err := c.flows.List(ctx, &flows); err != nil {
		ctrl.Log.WithName(ControllerName).Error(err, "cannot list jobflows for the tephra_jobflows metric")
		return
	}
	counts := map[batchv1alpha1.JobFlowPhase]float64{}
	for i := range flows.Items {
		phase := flows.Items[i].Status.State.Phase
		if phase == "" {
			phase = batchv1alpha1.FlowPending
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(jobFlowsDesc, prometheus.GaugeValue, n, string(phase))
	}
}
