package backpressure

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Defaults of the args.
const (
	// DefaultMaxBindsInFlight is more binds than an apiserver completes in a second on the
	// benchmarks' machines (docs/benchmarks.md): a scheduler that keeps this many in flight
	// binds as fast as the apiserver lets it.
	DefaultMaxBindsInFlight = 256
	// DefaultMaxWait bounds how long one pod's cycle waits for binds to land: the scheduler
	// never stalls longer than this on an apiserver that does not answer.
	DefaultMaxWait = time.Second
)

// Args configure the plugin, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraBackpressure
//	  args:
//	    maxBindsInFlight: 256
//	    maxWait: 1s
type Args struct {
	// MaxBindsInFlight is how many pods may be between their scheduling cycle and their bind
	// (not counting pods waiting at Permit for their gang) before the next pod's cycle waits
	// (default DefaultMaxBindsInFlight).
	MaxBindsInFlight int `json:"maxBindsInFlight,omitempty"`
	// MaxWait is the longest one pod's cycle waits for binds to land (default DefaultMaxWait).
	MaxWait *metav1.Duration `json:"maxWait,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.MaxBindsInFlight == 0 {
		a.MaxBindsInFlight = DefaultMaxBindsInFlight
	}
	if a.MaxWait == nil {
		a.MaxWait = &metav1.Duration{Duration: DefaultMaxWait}
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	if a.MaxBindsInFlight < 1 {
		return fmt.Errorf("maxBindsInFlight: %d is not a positive number", a.MaxBindsInFlight)
	}
	if a.MaxWait.Duration <= 0 {
		return fmt.Errorf("maxWait: %v is not a positive duration", a.MaxWait.Duration)
	}
	return nil
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
