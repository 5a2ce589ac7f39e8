package queue

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/tephra-dev/tephra/internal/quota"
)

// Queue metrics, served on tephra-controllers' /metrics, refreshed with every status update.
var (
	resourceLabels = []string{"queue", "resource"}
	allocatedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tephra_queue_allocated", Help: "Requests of the queue's bound pods (and its children's), and the devices of their ResourceClaims, by resource (CPU in cores, others in units; devices as <class>.deviceclass.resource.k8s.io/devices and /<capacity>).",
	}, resourceLabels)
	deservedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tephra_queue_deserved", Help: "The queue's deserved share at the current demand, by resource.",
	}, resourceLabels)
	guaranteeGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tephra_queue_guarantee", Help: "The queue's guarantee, by resource.",
	}, resourceLabels)
	capabilityGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tephra_queue_capability", Help: "The queue's capability, by resource.",
	}, resourceLabels)
	workloadsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tephra_queue_workloads", Help: "The queue's workloads (pod groups, and pods without one) by state: pending, inqueue, running.",
	}, []string{"queue", "state"})
	registerOnce sync.Once
)

func registerMetrics() (err error) {
	registerOnce.Do(func() {
		for _, c := range []prometheus.Collector{allocatedGauge, deservedGauge, guaranteeGauge, capabilityGauge, workloadsGauge} {
			if e := metrics.Registry.Register(c); e != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(e, &already) {
					err = e
				}
			}
		}
	})
	return err
}

func exportMetrics(a *Accounting) {
	for _, g := range []*prometheus.GaugeVec{allocatedGauge, deservedGauge, guaranteeGauge, capabilityGauge, workloadsGauge} {
		g.Reset()
	}
	for _, n := range a.Tree.Nodes() {
		setAmounts(allocatedGauge, n.Name, a.Allocated[n.Name])
		setAmounts(deservedGauge, n.Name, a.Deserved[n.Name])
		setAmounts(guaranteeGauge, n.Name, n.Guarantee)
		setAmounts(capabilityGauge, n.Name, n.Capability)
		c := a.Workloads[n.Name]
		if c == nil {
			c = &WorkloadCounts{}
		}
		workloadsGauge.WithLabelValues(n.Name, "pending").Set(float64(c.Pending))
		workloadsGauge.WithLabelValues(n.Name, "inqueue").Set(float64(c.Inqueue))
		workloadsGauge.WithLabelValues(n.Name, "running").Set(float64(c.Running))
	}
}

func setAmounts(g *prometheus.GaugeVec, queue string, amounts quota.Amounts) {
	for name, v := range amounts {
		value := float64(v)
		if name == "cpu" {
			value /= 1000
		}
		g.WithLabelValues(queue, string(name)).Set(value)
	}
}
