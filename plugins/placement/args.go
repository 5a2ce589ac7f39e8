package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Scoring strategies: where a pod that asks for accelerators goes.
const (
	// MostAllocated packs: it prefers nodes whose accelerators are already partly used, the fullest
	// first, so that whole nodes stay free for gangs that need them.
	MostAllocated = "MostAllocated"
	// LeastAllocated spreads: it prefers the node whose accelerators are the emptiest.
	LeastAllocated = "LeastAllocated"
	// Fragmentation prefers the node where the pod fragments the accelerators least for the
	// recent mix of pod shapes (FGD), the fullest among equals (fragmentation.go).
	Fragmentation = "Fragmentation"
	// None leaves accelerator pods to the other score plugins.
	None = "None"
)

// DefaultAccelerators are the extended resources of the common accelerators' device plugins.
// Each names whole devices (or cores of one, for Neuron), so a node's count of them says how
// much of its accelerators is used.
var DefaultAccelerators = []string{
	"nvidia.com/gpu",
	"amd.com/gpu",
	"gpu.intel.com/i915",
	"gpu.intel.com/xe",
	"habana.ai/gaudi",
	"aws.amazon.com/neuron",
	"aws.amazon.com/neuroncore",
	"aws.amazon.com/neurondevice",
	"google.com/tpu",
}

// Args configure the placement plugin, in the profile's pluginConfig:
//
//	pluginConfig:
//	- name: TephraPlacement
//	  args:
//	    scoringStrategy: MostAllocated
//	    accelerators: [nvidia.com/gpu]
//	    avoidAcceleratorNodes: true
type Args struct {
	// ScoringStrategy orders nodes for pods that ask for accelerators: MostAllocated (default),
	// Fragmentation, LeastAllocated or None.
	ScoringStrategy string `json:"scoringStrategy,omitempty"`
	// Accelerators are the extended resources that count as accelerators (default
	// DefaultAccelerators). An empty list counts none: only DRA devices are then accelerators.
	Accelerators []string `json:"accelerators,omitempty"`
	// AvoidAcceleratorNodes sends pods that ask for no accelerator to nodes without any where they
	// fit (default true).
	AvoidAcceleratorNodes *bool `json:"avoidAcceleratorNodes,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.ScoringStrategy == "" {
		a.ScoringStrategy = MostAllocated
	}
	if a.Accelerators == nil {
		a.Accelerators = append([]string(nil), DefaultAccelerators...)
	}
	if a.AvoidAcceleratorNodes == nil {
		avoid := true
		a.AvoidAcceleratorNodes = &avoid
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	switch a.ScoringStrategy {
	case MostAllocated, Fragmentation, LeastAllocated, None:
	default:
		return fmt.Errorf("scoringStrategy: %q is not %s, %s, %s or %s", a.ScoringStrategy, MostAllocated, Fragmentation, LeastAllocated, None)
	}
	seen := map[string]bool{}
	for _, name := range a.Accelerators {
		// Only extended resources are counted per device in a node's allocatable: cpu, memory or
		// hugepages are not accelerators, and a name without a domain is not a device plugin's.
		if !v1helper.IsExtendedResourceName(corev1.ResourceName(name)) {
			return fmt.Errorf("accelerators: %q is not an extended resource name (domain/name, outside kubernetes.io)", name)
		}
		if seen[name] {
			return fmt.Errorf("accelerators: %q is listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

// ParseArgs reads, defaults and validates the plugin's args from a scheduler configuration
// (nil: all defaults).
func ParseArgs(obj runtime.Object) (*Args, error) {
	return setup.ParseArgs[Args](Name, obj)
}
