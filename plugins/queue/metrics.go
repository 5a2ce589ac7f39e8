package queue

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the queue plugin, served on the scheduler's /metrics. Queue usage and shares are
// exported by tephra-controllers, which owns Queue status.
var (
	evictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "queue",
		Name:           "evictions_total",
		Help:           "Pods evicted by the queue plugin, by kind (reclaim from another queue, or preempt within the queue), victim queue and beneficiary queue.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "victim_queue", "queue"})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(evictions) })
}
