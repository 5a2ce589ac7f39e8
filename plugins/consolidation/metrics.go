package consolidation

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Why a pod may move, the label of tephra_consolidation_moves_total.
const (
	// MovableDeclared: the pod, its PodGroup or its Job says so (scheduling.tephra.dev/movable).
	MovableDeclared = "declared"
	// MovableElastic: the pod runs above its group's minimum.
	MovableElastic = "elastic"
)

// Metrics of consolidation, served on the scheduler's /metrics.
var (
	moves = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "consolidation",
		Name:           "moves_total",
		Help:           "Pods evicted to be placed again elsewhere, making whole nodes for a waiting gang, by why they could move (declared, elastic).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"movable"})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(moves)
		// Served at 0 from the start, so that alerts and dashboards see a rate of 0, not nothing.
		moves.WithLabelValues(MovableDeclared)
		moves.WithLabelValues(MovableElastic)
	})
}
