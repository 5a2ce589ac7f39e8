// Package countmetric reports gauges that count a kind of object by some of its fields (Jobs by
// queue and phase, say), computed from the controllers' cache at every scrape rather than kept up
// to date on each reconcile: a count taken from the objects that exist cannot miss a delete or
// drift after a restart.
package countmetric

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Collector is a gauge of Desc counting the objects of a list by the label values Count gives
// each of them.
type Collector[L client.ObjectList] struct {
	Desc *prometheus.Desc
	// Reader lists the objects: the manager's cache.
	Reader client.Reader
	// Elected is closed once this replica leads. Only the leader reports, so that summing the
	// metric across replicas does not count an object twice.
	Elected <-chan struct{}
	// NewList returns an empty list of the kind counted.
	NewList func() L
	// Count calls add with the label values of each object of the list, in the order of Desc's
	// labels.
	Count func(list L, add func(values ...string))
	// Log reports a list that failed.
	Log logr.Logger
}

// Describe implements prometheus.Collector.
func (c Collector[L]) Describe(ch chan<- *prometheus.Desc) { ch <- c.Desc }

// Collect implements prometheus.Collector.
func (c Collector[L]) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.Elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := c.NewList()
	if err := c.Reader.List(ctx, list); err != nil {
		// An invalid metric would fail the whole scrape (controller-runtime serves with
		// HTTPErrorOnError), losing every other metric for want of this one.
		c.Log.Error(err, "cannot list objects for a metric", "metric", c.Desc.String())
		return
	}
	type key = string
	counts := map[key]float64{}
	values := map[key][]string{}
	c.Count(list, func(v ...string) {
		k := keyOf(v)
		counts[k]++
		values[k] = v
	})
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.Desc, prometheus.GaugeValue, n, values[k]...)
	}
}

// keyOf joins label values with a byte no label value holds.
func keyOf(values []string) string {
	var b []byte
	for _, v := range values {
		b = append(append(b, v...), 0xff)
	}
	return string(b)
}

// Register registers collectors in controller-runtime's registry. A process that sets up a second
// manager (benchmarks, tests) keeps the first one's.
func Register(collectors ...prometheus.Collector) error {
	for _, c := range collectors {
		err := metrics.Registry.Register(c)
		if _, already := errors.AsType[prometheus.AlreadyRegisteredError](err); err != nil && !already {
			return err
		}
	}
	return nil
}
