package numa

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Scoring strategies: how nodes on which a pod takes the same number of NUMA zones are ordered.
const (
	// MostAllocated prefers the node whose zones used by the pod are the fullest once it is placed:
	// it packs zones, so that whole zones stay free for pods that need one.
	MostAllocated = "MostAllocated"
	// LeastAllocated prefers the node whose zones used by the pod are the emptiest: it spreads.
	LeastAllocated = "LeastAllocated"
)

// Args configure the NUMA plugin, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraNUMA
//	  args:
//	    scoringStrategy: MostAllocated
type Args struct {
	// ScoringStrategy orders nodes on which the pod takes as many NUMA zones: MostAllocated or
	// LeastAllocated. Default MostAllocated.
	ScoringStrategy string `json:"scoringStrategy,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.ScoringStrategy == "" {
		a.ScoringStrategy = MostAllocated
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	if a.ScoringStrategy != MostAllocated && a.ScoringStrategy != LeastAllocated {
		return fmt.Errorf("scoringStrategy: %q is not %s or %s", a.ScoringStrategy, MostAllocated, LeastAllocated)
	}
	return nil
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
