package numa

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the NUMA plugin, served on the scheduler's /metrics.
var (
	unawareNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "tephra",
		Subsystem:      "numa",
		Name:           "unaware_nodes",
		Help:           "Nodes without a NodeResourceTopology object, on which pods are placed without regard to NUMA zones.",
		StabilityLevel: metrics.ALPHA,
	})
	rejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "numa",
		Name:           "rejections_total",
		Help:           "Nodes rejected for a pod because kubelet's Topology Manager would not admit it there, by policy (restricted, single-numa-node).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(unawareNodes, rejections)
	})
}
