package backpressure

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the plugin, served on the scheduler's /metrics.
var (
	waitSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "tephra",
		Subsystem:      "backpressure",
		Name:           "wait_seconds",
		Help:           "How long a pod's scheduling cycle waited at PreFilter for binds in flight to land (only cycles that waited).",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 7),
		StabilityLevel: metrics.ALPHA,
	})
	waitsTimedOut = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "backpressure",
		Name:           "waits_timed_out_total",
		Help:           "Scheduling cycles that went on after maxWait with binds still in flight above maxBindsInFlight: the apiserver binds slower than that.",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(waitSeconds, waitsTimedOut)
	})
}
