package gang

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the gang plugin, served on the scheduler's /metrics.
var (
	timeToFull = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "tephra",
		Subsystem:      "gang",
		Name:           "time_to_full_seconds",
		Help:           "Time from a pod group's first member created to its minimum bound.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	groupsRejected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "gang",
		Name:           "rejected_total",
		Help:           "Pod group attempts that failed and released their placed members, by reason (post-filter, timeout, unreserve).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	groupsRolledBack = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "gang",
		Name:           "rolled_back_total",
		Help:           "Failed pod group attempts whose bound members were deleted because a sibling's bind failed after Permit.",
		StabilityLevel: metrics.ALPHA,
	})
	waitingPods = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "tephra",
		Subsystem:      "gang",
		Name:           "waiting_pods",
		Help:           "Members placed and waiting at Permit for the rest of their pod group's minimum.",
		StabilityLevel: metrics.ALPHA,
	})
	reservations = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "tephra",
		Subsystem:      "gang",
		Name:           "reservations",
		Help:           "Pod groups waiting past their SLA waiting time that have nodes reserved.",
		StabilityLevel: metrics.ALPHA,
	})
	backoffCycles = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "tephra",
		Subsystem: "gang",
		Name:      "backoff_cycles_total",
		Help: "Scheduling cycles spent on members of pod groups that were backing off (refused at PreFilter). " +
			"PreEnqueue holds such members until the backoff ends, so this counts only the members already on their way when an attempt failed.",
		StabilityLevel: metrics.ALPHA,
	})
	backfilledPods = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "tephra",
		Subsystem:      "gang",
		Name:           "backfilled_pods_total",
		Help:           "Pods bound, by backfill, on nodes reserved for a pod group (past its SLA, or at the head of its queue): their runtime estimate ended before the group's expected start.",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
	// rejectionReasons are the reasons of tephra_gang_rejected_total (groupManager.fail's callers).
	rejectionReasons = []string{"post-filter", "timeout", "unreserve"}
)

func init() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(timeToFull, groupsRejected, groupsRolledBack, waitingPods, reservations, backoffCycles, backfilledPods)
		// Served at 0 from the start, so that alerts and dashboards see a rate of 0, not nothing.
		for _, reason := range rejectionReasons {
			groupsRejected.WithLabelValues(reason)
		}
	})
}
