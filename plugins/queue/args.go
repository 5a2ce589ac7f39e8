package queue

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// DefaultReclaimLimitPerJob is how many times reclaim restarts one job by default: twice, as a
// team tolerates, and what bounded the Philly day's restarts without losing its fair share.
const DefaultReclaimLimitPerJob = 2

// DefaultReclaimPatienceLimit is the longest reclaim patience makes a pod of a queue below its
// deserved share wait by default: an hour. A team owed room then waits at most an hour, not as
// long as its victims had run (a week, beside week-long training jobs); and within the hour the
// cluster's own turnover gives it most of what it is owed, which a shorter limit would take by
// throwing away hours of other teams' work (docs/queues.md, from the replays of docs/replay.md).
const DefaultReclaimPatienceLimit = time.Hour

// Args configure the queue plugin, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraQueue
//	  args:
//	    reclaimMinRuntime: 0s
//	    reclaimPatience: true
//	    reclaimPatienceLimit: 5m
//	    reclaimLimitPerJob: 2
//	    reclaimDrain: true
//	    reclaimPatienceCounts: RunBeforeWait
type Args struct {
	// UsageHalfLife is ignored, and kept so that configurations that set it still load: the
	// half-life of usage history is set once, by tephra-controllers' --usage-half-life, and the
	// scheduler reads it from the Queue status.usage the controller writes.
	//
	// Deprecated: set tephra-controllers' --usage-half-life.
	UsageHalfLife *metav1.Duration `json:"usageHalfLife,omitempty"`
	// ReclaimMinRuntime is how long a job runs before another queue may reclaim it, for queues
	// whose spec.reclaimMinRuntimeSeconds is unset: its pods (a gang's whole minimum counts from
	// its last member's start) are then not victims of reclaim, and the reclaiming pod is tried
	// again when the first of them comes of age. Slurm's PreemptExemptTime and KAI's queue
	// minimum runtime are the same knob. Default 0: any job may be reclaimed.
	ReclaimMinRuntime *metav1.Duration `json:"reclaimMinRuntime,omitempty"`
	// ReclaimPatience weighs what a reclaim throws away against the wait it saves: a pod reclaims
	// a job only once it has waited, in proportion to their sizes, as long as the job had run when
	// the pod began to wait (reclaim/reclaimcost.go). Default true, chosen by replay
	// (docs/replay.md): without it, reclaim threw away a seventh of a day's work on the Philly
	// trace. With it, a job started by reclaim is no victim of reclaim until it has run long
	// enough to pay back the work its start threw away, and a job reclaim took before reclaims
	// only what pays for itself (reclaim/payback.go). Queues below their guarantee always reclaim at once.
	ReclaimPatience *bool `json:"reclaimPatience,omitempty"`
	// ReclaimPatienceLimit is the longest reclaim patience makes a pod of a queue below its
	// deserved share wait, for queues whose spec.reclaimPatienceLimitSeconds is unset: once the
	// pod has waited that long, patience spares none of the jobs it would reclaim, nor does a
	// drain hold keep it waiting, whatever those jobs had run. The victims' reclaim minimum
	// runtime and the limit per job still apply. Default 1h (DefaultReclaimPatienceLimit); 0: no
	// limit.
	ReclaimPatienceLimit *metav1.Duration `json:"reclaimPatienceLimit,omitempty"`
	// ReclaimLimitPerJob is how many times reclaim may restart one job; a job reclaimed that often
	// is not reclaimed again while the scheduler runs. Default 2 (DefaultReclaimLimitPerJob); 0: no
	// limit. Queues below their guarantee are not held by it.
	ReclaimLimitPerJob *int32 `json:"reclaimLimitPerJob,omitempty"`
	// ReclaimDrain holds a node for a pod that patience keeps from reclaiming: the pod is
	// nominated to the node whose victims would throw away least, without evicting, so that what
	// ends there is kept for it and fewer victims, or none, are left when patience runs out
	// (reclaim/drain.go). The room held is idle until the pod fits. Default true: on the replayed
	// Philly day it threw away a quarter less work at the same mean JCT (docs/queues.md).
	ReclaimDrain *bool `json:"reclaimDrain,omitempty"`
	// ReclaimPatienceCounts is the work patience weighs against the wait: RunBeforeWait (the
	// default), what a victim had run when the pod began to wait, so that a job started during
	// the wait costs nothing; or WholeRun, all a victim has run since it last started, which is
	// what the reclaim throws away. With WholeRun, a pod may never reclaim a job at least its size
	// that ran before its wait began, and fair share then rests on who gets what frees (with
	// reclaimDrain, the node held for it).
	ReclaimPatienceCounts PatienceCounts `json:"reclaimPatienceCounts,omitempty"`
}

// PatienceCounts is which run of a victim reclaim patience counts.
type PatienceCounts string

const (
	// PatienceCountsRunBeforeWait counts what the victim had run when the preemptor began to wait.
	PatienceCountsRunBeforeWait PatienceCounts = "RunBeforeWait"
	// PatienceCountsWholeRun counts all the victim has run since it last started.
	PatienceCountsWholeRun PatienceCounts = "WholeRun"
)

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.ReclaimMinRuntime == nil {
		a.ReclaimMinRuntime = &metav1.Duration{}
	}
	if a.ReclaimPatience == nil {
		a.ReclaimPatience = new(true)
	}
	if a.ReclaimPatienceLimit == nil {
		a.ReclaimPatienceLimit = &metav1.Duration{Duration: DefaultReclaimPatienceLimit}
	}
	if a.ReclaimDrain == nil {
		a.ReclaimDrain = new(true)
	}
	if a.ReclaimLimitPerJob == nil {
		a.ReclaimLimitPerJob = new(int32(DefaultReclaimLimitPerJob))
	}
	if a.ReclaimPatienceCounts == "" {
		a.ReclaimPatienceCounts = PatienceCountsRunBeforeWait
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	if a.ReclaimMinRuntime.Duration < 0 {
		return fmt.Errorf("reclaimMinRuntime: %s must not be negative", a.ReclaimMinRuntime.Duration)
	}
	if a.ReclaimPatienceLimit.Duration < 0 {
		return fmt.Errorf("reclaimPatienceLimit: %s must not be negative (0: no limit)", a.ReclaimPatienceLimit.Duration)
	}
	if *a.ReclaimLimitPerJob < 0 {
		return fmt.Errorf("reclaimLimitPerJob: %d must not be negative (0: no limit)", *a.ReclaimLimitPerJob)
	}
	switch a.ReclaimPatienceCounts {
	case PatienceCountsRunBeforeWait, PatienceCountsWholeRun:
	default:
		return fmt.Errorf("reclaimPatienceCounts: %q is not %s or %s", a.ReclaimPatienceCounts, PatienceCountsRunBeforeWait, PatienceCountsWholeRun)
	}
	return nil
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
