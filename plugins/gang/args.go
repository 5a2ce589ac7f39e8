package gang

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/plugins/consolidation"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Args configure the gang plugin, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraGang
//	  args:
//	    defaultScheduleTimeoutSeconds: 60
//	    consolidation:
//	      enabled: true
//	      maxMovesPerGang: 8
type Args struct {
	// DefaultScheduleTimeoutSeconds bounds how long the placed members of a group that sets no
	// scheduleTimeoutSeconds wait at Permit for the rest of its minimum. Default 60.
	DefaultScheduleTimeoutSeconds *int64 `json:"defaultScheduleTimeoutSeconds,omitempty"`
	// GroupBackoffSeconds is how long a group whose attempt just failed is held back before it is
	// tried again; it doubles with each consecutive failure, up to MaxGroupBackoffSeconds.
	// Default 1.
	GroupBackoffSeconds *int64 `json:"groupBackoffSeconds,omitempty"`
	// MaxGroupBackoffSeconds caps GroupBackoffSeconds. Default 10, as the scheduler's own
	// podMaxBackoffSeconds.
	MaxGroupBackoffSeconds *int64 `json:"maxGroupBackoffSeconds,omitempty"`
	// DefaultSLAWaitingTimeSeconds is the SLA waiting time of groups without the
	// scheduling.tephra.dev/sla-waiting-time annotation: a group whose minimum is still not placed
	// after it gets nodes reserved. Default 0: no SLA.
	DefaultSLAWaitingTimeSeconds *int64 `json:"defaultSLAWaitingTimeSeconds,omitempty"`
	// QueueHeadReservations reserves nodes for the group at the head of its queue whose minimum
	// cannot fit, without waiting for an SLA: smaller workloads behind it no longer take every
	// node that frees up first, and those with a runtime estimate that ends before it could start
	// backfill its nodes meanwhile (docs/elastic.md). Default false: the nodes a reservation holds
	// stay idle for workloads without an estimate.
	QueueHeadReservations *bool `json:"queueHeadReservations,omitempty"`
	// Consolidation moves pods that may move (they declared it, or run above their group's
	// minimum) to make whole nodes for a gang whose minimum fits the cluster's free capacity but
	// no set of nodes (consolidate.go, docs/consolidation.md). On by default, at most 8 moves per
	// gang.
	Consolidation consolidation.Args `json:"consolidation,omitempty"`
	// AttainedServiceFirstLevelSeconds is the accelerator-time, in accelerator-seconds, at which a
	// workload of a queue ordered by LeastAttainedService moves its first level down; the next
	// levels are at ten and a hundred times it (attained.go). Default 3600: an accelerator-hour.
	AttainedServiceFirstLevelSeconds *int64 `json:"attainedServiceFirstLevelSeconds,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	set := func(p **int64, v int64) {
		if *p == nil {
			*p = &v
		}
	}
	set(&a.DefaultScheduleTimeoutSeconds, 60)
	set(&a.GroupBackoffSeconds, 1)
	set(&a.MaxGroupBackoffSeconds, 10)
	set(&a.DefaultSLAWaitingTimeSeconds, 0)
	set(&a.AttainedServiceFirstLevelSeconds, 3600)
	if a.QueueHeadReservations == nil {
		a.QueueHeadReservations = new(bool)
	}
	a.Consolidation.SetDefaults()
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	var errs []error
	if v := *a.DefaultScheduleTimeoutSeconds; v < 1 || v > 86400 {
		errs = append(errs, fmt.Errorf("defaultScheduleTimeoutSeconds: %d is not between 1 and 86400", v))
	}
	if v := *a.GroupBackoffSeconds; v < 0 {
		errs = append(errs, fmt.Errorf("groupBackoffSeconds: %d must not be negative", v))
	}
	if v := *a.MaxGroupBackoffSeconds; v < *a.GroupBackoffSeconds {
		errs = append(errs, fmt.Errorf("maxGroupBackoffSeconds: %d must be at least groupBackoffSeconds (%d)", v, *a.GroupBackoffSeconds))
	}
	if v := *a.DefaultSLAWaitingTimeSeconds; v < 0 {
		errs = append(errs, fmt.Errorf("defaultSLAWaitingTimeSeconds: %d must not be negative", v))
	}
	if v := *a.AttainedServiceFirstLevelSeconds; v < 1 {
		errs = append(errs, fmt.Errorf("attainedServiceFirstLevelSeconds: %d must be at least 1", v))
	}
	if err := a.Consolidation.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
