// Package topology resolves a PodGroup's network topology constraint against the cluster's
// Topology: the node label keys whose domains its minimum is placed in, narrowest first. The
// scheduler places by it and the PodGroup controller reports a constraint it cannot resolve, so
// both read it alike.
package topology

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Constraint is where a group's minimum may go: one domain of Levels[0] if one has room, else
// one of Levels[1], and so on (each level wider than the one before). When Required is false,
// the whole cluster is the last resort after the levels.
type Constraint struct {
	Levels   []string
	Required bool
}

// Lookup finds a Topology by name.
type Lookup func(name string) (*v1alpha1.Topology, bool)

// Resolve returns a group's constraint (nil when it has none) or why it cannot be met: a key
// that is not a level of its Topology, a preferred key wider than the required one, or a
// preferred key without a Topology to say what is wider. A required key alone needs no Topology.
func Resolve(spec *v1alpha1.PodGroupTopology, lookup Lookup) (*Constraint, string) {
	if spec == nil || spec.Required == "" && spec.Preferred == "" {
		return nil, ""
	}
	name := spec.Name
	if name == "" {
		name = v1alpha1.DefaultTopology
	}
	topo, found := lookup(name)
	if !found {
		switch {
		case spec.Preferred != "":
			return nil, fmt.Sprintf("topology: preferred %q needs Topology %q to say which levels are wider, and it does not exist", spec.Preferred, name)
		case spec.Name != "":
			return nil, fmt.Sprintf("topology: Topology %q does not exist", name)
		}
		return &Constraint{Levels: []string{spec.Required}, Required: true}, ""
	}
	levels := make([]string, len(topo.Spec.Levels))
	for i, l := range topo.Spec.Levels {
		levels[i] = l.NodeLabel
	}
	required, preferred := -1, -1
	for _, key := range []struct {
		field, value string
		at           *int
	}{{"required", spec.Required, &required}, {"preferred", spec.Preferred, &preferred}} {
		if key.value == "" {
			continue
		}
		if *key.at = slices.Index(levels, key.value); *key.at < 0 {
			return nil, fmt.Sprintf("topology: %s %q is not a level of Topology %q (%v)", key.field, key.value, name, levels)
		}
	}
	switch {
	case preferred < 0:
		return &Constraint{Levels: []string{spec.Required}, Required: true}, ""
	case required >= 0 && preferred < required:
		return nil, fmt.Sprintf("topology: preferred %q is wider than required %q in Topology %q", spec.Preferred, spec.Required, name)
	}
	widest := max(required, 0)
	c := &Constraint{Required: required >= 0}
	for i := preferred; i >= widest; i-- {
		c.Levels = append(c.Levels, levels[i])
	}
	return c, ""
}

// Kueue's topology annotations on the pods of a pod set, read when a group has no topology of
// its own.
const (
	KueueRequiredAnnotation  = "kueue.x-k8s.io/podset-required-topology"
	KueuePreferredAnnotation = "kueue.x-k8s.io/podset-preferred-topology"
)

// ForGroup resolves the topology of a group (nil when it has none): its PodGroup's, else the
// Kueue annotations of its member. TephraGang places by it and TephraQueue reclaims by it.
func ForGroup(pg *v1alpha1.PodGroup, member *corev1.Pod, lookup Lookup) (*Constraint, string) {
	spec := pg.Spec.Topology
	if spec == nil && member != nil {
		required, preferred := member.Annotations[KueueRequiredAnnotation], member.Annotations[KueuePreferredAnnotation]
		if required == "" && preferred == "" {
			return nil, ""
		}
		spec = &v1alpha1.PodGroupTopology{Required: required, Preferred: preferred}
	}
	return Resolve(spec, lookup)
}

// ListerLookup finds Topologies through get (a lister's Get); none when get is nil.
func ListerLookup(get func(name string) (*v1alpha1.Topology, error)) Lookup {
	return func(name string) (*v1alpha1.Topology, bool) {
		if get == nil {
			return nil, false
		}
		t, err := get(name)
		return t, err == nil
	}
}
