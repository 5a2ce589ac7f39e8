package cronjob

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// runs counts the CronJob runs started, by outcome: created (the run's Job was created) or
// failed (its creation was refused; the run is tried again).
var runs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tephra_cronjob_runs_total",
	Help: "Runs of CronJobs started, by outcome: created, or failed to create the Job.",
}, []string{"outcome"})

func registerMetrics() error {
	err := metrics.Registry.Register(runs)
	if _, already := errors.AsType[prometheus.AlreadyRegisteredError](err); err != nil && !already {
		return err
	}
	return nil
}
