package topology

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Volcano's network-topology modes.
const (
	VolcanoHard = "hard"
	VolcanoSoft = "soft"
)

// FromVolcano maps a Volcano PodGroup's networkTopology {mode, highestTierAllowed} onto the
// levels of the default Topology: tier 1 is its narrowest level above the node
// (kubernetes.io/hostname), tier 2 the next wider, and so on. Hard: the minimum in one domain of
// the highest tier allowed, trying tier 1 first; soft: tier 1 preferred, else anywhere. problem
// says why it cannot be mapped.
func FromVolcano(mode string, highestTierAllowed *int, lookup Lookup) (*v1alpha1.PodGroupTopology, string) {
	topo, found := lookup(v1alpha1.DefaultTopology)
	if !found {
		return nil, fmt.Sprintf("networkTopology needs the Topology %q to map tiers to node labels, and it does not exist", v1alpha1.DefaultTopology)
	}
	var tiers []string // narrowest first, the node level left out
	for i := len(topo.Spec.Levels) - 1; i >= 0; i-- {
		if label := topo.Spec.Levels[i].NodeLabel; label != corev1.LabelHostname {
			tiers = append(tiers, label)
		}
	}
	if len(tiers) == 0 {
		return nil, fmt.Sprintf("networkTopology: the Topology %q has no level above the node", v1alpha1.DefaultTopology)
	}
	switch mode {
	case VolcanoSoft:
		return &v1alpha1.PodGroupTopology{Preferred: tiers[0]}, ""
	case VolcanoHard, "":
		highest := 1
		if highestTierAllowed != nil {
			highest = *highestTierAllowed
		}
		if highest < 1 || highest > len(tiers) {
			return nil, fmt.Sprintf("networkTopology.highestTierAllowed is %d; the Topology %q has tiers 1 to %d (%v)", highest, v1alpha1.DefaultTopology, len(tiers), tiers)
		}
		t := &v1alpha1.PodGroupTopology{Required: tiers[highest-1]}
		if highest > 1 {
			t.Preferred = tiers[0]
		}
		return t, ""
	}
	return nil, fmt.Sprintf("networkTopology.mode is %q; it must be hard or soft", mode)
}
