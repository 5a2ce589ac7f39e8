package reclaim

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of reclaim, served on the scheduler's /metrics with those of the queue plugin.
var evictions = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "tephra",
	Subsystem:      "queue",
	Name:           "evictions_total",
	Help:           "Pods evicted by the queue plugin, by kind (reclaim from another queue, or preempt within the queue), victim queue and beneficiary queue.",
	StabilityLevel: metrics.ALPHA,
}, []string{"kind", "victim_queue", "queue"})

func init() { legacyregistry.MustRegister(evictions) }
