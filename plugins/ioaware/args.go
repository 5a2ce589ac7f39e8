package ioaware

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// DefaultLocalityWait is how long a pod that prefers its data waits, at most, for a node that
// caches it when the scheduler found room only elsewhere: not at all. On the replayed data-reuse
// trace a wait of 5 minutes saved few pulls and made the waits longer (docs/io.md).
const DefaultLocalityWait time.Duration = 0

// Args configure TephraIO, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraIO
//	  args:
//	    localityWait: 2m
type Args struct {
	// LocalityWait is how long a pod that prefers its datasets (data.tephra.dev/locality unset or
	// Preferred) waits for a node that caches them, once the scheduler found room for it only on
	// nodes that do not: it holds that room meanwhile, and goes to a node that caches its data as
	// soon as a pod there ends, or to the room it holds when the wait is over (delay scheduling).
	// A gang's members are not held: TephraGang chooses their domain for their data. Default 0s
	// (DefaultLocalityWait): no wait.
	LocalityWait *metav1.Duration `json:"localityWait,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.LocalityWait == nil {
		a.LocalityWait = &metav1.Duration{Duration: DefaultLocalityWait}
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	if a.LocalityWait.Duration < 0 {
		return fmt.Errorf("localityWait: %s must not be negative (0: no wait)", a.LocalityWait.Duration)
	}
	return nil
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
