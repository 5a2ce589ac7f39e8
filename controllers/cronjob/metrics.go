package cronjob

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tephra-dev/tephra/internal/countmetric"
)

// runs counts the CronJob runs started, by outcome: created (the run's Job was created) or
// failed (its creation was refused; the run is tried again).
var runs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tephra_cronjob_runs_total",
	Help: "Runs of CronJobs started, by outcome: created, or failed to create the Job.",
}, []string{"outcome"})

func registerMetrics() error { return countmetric.Register(runs) }
