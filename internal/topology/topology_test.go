package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func lookupOf(topologies ...*v1alpha1.Topology) Lookup {
	return func(name string) (*v1alpha1.Topology, bool) {
		for _, t := range topologies {
			if t.Name == name {
				return t, true
			}
		}
		return nil, false
	}
}

func topologyOf(name string, levels ...string) *v1alpha1.Topology {
	t := &v1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, l := range levels {
		t.Spec.Levels = append(t.Spec.Levels, v1alpha1.TopologyLevel{NodeLabel: l})
	}
	return t
}

func TestResolve(t *testing.T) {
	const block, rack, host = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
	dc := lookupOf(topologyOf("default", block, rack, host), topologyOf("flat", rack))
	none := lookupOf()
	for _, tc := range []struct {
		name    string
		spec    *v1alpha1.PodGroupTopology
		lookup  Lookup
		want    *Constraint
		problem string
	}{
		{name: "no topology", spec: nil, lookup: dc},
		{name: "required", spec: &v1alpha1.PodGroupTopology{Required: rack}, lookup: dc, want: &Constraint{Levels: []string{rack}, Required: true}},
		{name: "required without a Topology", spec: &v1alpha1.PodGroupTopology{Required: rack}, lookup: none, want: &Constraint{Levels: []string{rack}, Required: true}},
		{name: "preferred falls back up to required", spec: &v1alpha1.PodGroupTopology{Required: block, Preferred: host}, lookup: dc,
			want: &Constraint{Levels: []string{host, rack, block}, Required: true}},
		{name: "preferred alone falls back to the cluster", spec: &v1alpha1.PodGroupTopology{Preferred: rack}, lookup: dc,
			want: &Constraint{Levels: []string{rack, block}}},
		{name: "preferred equal to required", spec: &v1alpha1.PodGroupTopology{Required: rack, Preferred: rack}, lookup: dc,
			want: &Constraint{Levels: []string{rack}, Required: true}},
		{name: "a named Topology", spec: &v1alpha1.PodGroupTopology{Name: "flat", Preferred: rack}, lookup: dc, want: &Constraint{Levels: []string{rack}}},
		{name: "preferred wider than required", spec: &v1alpha1.PodGroupTopology{Required: rack, Preferred: block}, lookup: dc,
			problem: `topology: preferred "example.com/block" is wider than required "example.com/rack" in Topology "default"`},
		{name: "not a level", spec: &v1alpha1.PodGroupTopology{Required: "example.com/row"}, lookup: dc,
			problem: `topology: required "example.com/row" is not a level of Topology "default" ([example.com/block example.com/rack kubernetes.io/hostname])`},
		{name: "preferred without a Topology", spec: &v1alpha1.PodGroupTopology{Preferred: rack}, lookup: none,
			problem: `topology: preferred "example.com/rack" needs Topology "default" to say which levels are wider, and it does not exist`},
		{name: "a named Topology that does not exist", spec: &v1alpha1.PodGroupTopology{Name: "gone", Required: rack}, lookup: dc,
			problem: `topology: Topology "gone" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := Resolve(tc.spec, tc.lookup)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.problem, problem)
		})
	}
}

func TestFromVolcano(t *testing.T) {
	const block, rack, host = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
	dc := lookupOf(topologyOf("default", block, rack, host))
	one, two, three := 1, 2, 3
	for _, tc := range []struct {
		name    string
		mode    string
		tier    *int
		lookup  Lookup
		want    *v1alpha1.PodGroupTopology
		problem string
	}{
		{name: "hard, tier 1", mode: "hard", tier: &one, lookup: dc, want: &v1alpha1.PodGroupTopology{Required: rack}},
		{name: "hard, tier 2", mode: "hard", tier: &two, lookup: dc, want: &v1alpha1.PodGroupTopology{Required: block, Preferred: rack}},
		{name: "hard, no tier", mode: "hard", lookup: dc, want: &v1alpha1.PodGroupTopology{Required: rack}},
		{name: "soft", mode: "soft", tier: &two, lookup: dc, want: &v1alpha1.PodGroupTopology{Preferred: rack}},
		{name: "tier too high", mode: "hard", tier: &three, lookup: dc,
			problem: `networkTopology.highestTierAllowed is 3; the Topology "default" has tiers 1 to 2 ([example.com/rack example.com/block])`},
		{name: "unknown mode", mode: "firm", lookup: dc, problem: `networkTopology.mode is "firm"; it must be hard or soft`},
		{name: "no Topology", mode: "hard", lookup: lookupOf(),
			problem: `networkTopology needs the Topology "default" to map tiers to node labels, and it does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := FromVolcano(tc.mode, tc.tier, tc.lookup)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.problem, problem)
		})
	}
}

// A group without a topology of its own takes the Kueue annotations of its pods.
func TestForGroupReadsKueueAnnotations(t *testing.T) {
	dc := lookupOf(topologyOf("default", "example.com/block", "example.com/rack"))
	pg := &v1alpha1.PodGroup{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		KueueRequiredAnnotation: "example.com/block", KueuePreferredAnnotation: "example.com/rack",
	}}}
	got, problem := ForGroup(pg, pod, dc)
	assert.Empty(t, problem)
	assert.Equal(t, &Constraint{Levels: []string{"example.com/rack", "example.com/block"}, Required: true}, got)

	pg.Spec.Topology = &v1alpha1.PodGroupTopology{Required: "example.com/rack"}
	got, _ = ForGroup(pg, pod, dc)
	assert.Equal(t, &Constraint{Levels: []string{"example.com/rack"}, Required: true}, got, "the PodGroup's own topology wins")

	got, problem = ForGroup(&v1alpha1.PodGroup{}, &corev1.Pod{}, dc)
	assert.Nil(t, got)
	assert.Empty(t, problem)
}
