package queue

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// DefaultUsageHalfLife is the default half-life of usage history: a week, as Slurm's
// PriorityDecayHalfLife.
const DefaultUsageHalfLife = 168 * time.Hour

// Args configure the queue plugin, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraQueue
//	  args:
//	    usageHalfLife: 168h
type Args struct {
	// UsageHalfLife is the half-life of the usage the Queue controller accrues in Queue
	// status.usage: deserved shares weigh each queue's weight against its share of its siblings'
	// usage (fair share over time, docs/queues.md). It must be tephra-controllers'
	// --usage-half-life, so that the scheduler and Queue status agree. Default 168h; 0 turns
	// history off (shares by weight alone).
	UsageHalfLife *metav1.Duration `json:"usageHalfLife,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.UsageHalfLife == nil {
		a.UsageHalfLife = &metav1.Duration{Duration: DefaultUsageHalfLife}
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	if a.UsageHalfLife.Duration < 0 {
		return fmt.Errorf("usageHalfLife: %s must not be negative", a.UsageHalfLife.Duration)
	}
	return nil
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
