package queue

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the queue plugin (and reclaim/metrics.go), served on the scheduler's /metrics. Queue usage and shares are
// exported by tephra-controllers, which owns Queue status.
var (
	stateRefusals = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "queue",
		Name:           "refusals_total",
		Help:           "Scheduling attempts the queue plugin refused by the state of the pod's queue, by leaf queue and reason (QueueCapabilityExceeded, QueueOverDeservedShare). A refused pod is held at PreEnqueue until that state changes, so each wait costs about one attempt.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "reason"})
	heldPods = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "tephra",
		Subsystem:      "queue",
		Name:           "held_pods",
		Help:           "Pods held at PreEnqueue by the state of their queue (a capability, or the deserved share while another queue's workload could use the room).",
		StabilityLevel: metrics.ALPHA,
	})
	preemptorsWaitingForVictims = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "tephra",
		Subsystem:      "queue",
		Name:           "preemptors_waiting_for_victims",
		Help:           "Pods held at PreEnqueue until the victims of their preemption (their own, or their pod group's) are gone, to be tried at once then.",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(stateRefusals, heldPods, preemptorsWaitingForVictims) })
}
