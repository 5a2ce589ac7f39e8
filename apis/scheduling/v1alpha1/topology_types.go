package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultTopology names the Topology a PodGroup's topology refers to when it names none.
const DefaultTopology = "default"

// PodGroupTopology says in which network domain a group's pods are placed together. Each field
// is a node label key whose values name the domains (racks, blocks, zones).
// +kubebuilder:validation:XValidation:rule="has(self.required) || has(self.preferred)",message="topology needs required, preferred, or both"
type PodGroupTopology struct {
	// Name of the Topology whose levels order the keys (what is wider than what). Defaults to
	// "default".
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
	// Required is a node label key: the whole minimum is placed in one domain of it (all its
	// nodes share the label's value), or not at all.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +optional
	Required string `json:"required,omitempty"`
	// Preferred is a node label key, at or below Required in the Topology: the minimum goes into
	// one domain of it if one has room, else into one domain of the narrowest wider level that
	// has, up to Required (or the whole cluster without Required).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +optional
	Preferred string `json:"preferred,omitempty"`
}

// TopologyLevel is one level of a cluster's network topology.
type TopologyLevel struct {
	// NodeLabel is the node label key whose values name the level's domains.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	NodeLabel string `json:"nodeLabel"`
	// Bandwidth is what each domain of the level carries, in all, of the pods' requests of IO
	// bandwidth: extended resources named io.tephra.dev/<name> (a rack's uplink, say
	// io.tephra.dev/network: 100). Nodes publish their own as allocatable of the same names.
	// TephraIO and TephraGang keep the requests of the pods on a domain's nodes within it
	// (docs/io.md). It is read from the Topology named "default", which describes the cluster's
	// network for every pod.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.startsWith('io.tephra.dev/'))",message="bandwidth is given for IO bandwidth resources, named io.tephra.dev/<name>"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))",message="a bandwidth must not be negative"
	// +optional
	Bandwidth corev1.ResourceList `json:"bandwidth,omitempty"`
}

// TopologySpec lists the levels of a cluster's network, widest first.
type TopologySpec struct {
	// Levels from the widest (e.g. a block of racks) to the narrowest (e.g. a node,
	// kubernetes.io/hostname).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(l, self.exists_one(m, m.nodeLabel == l.nodeLabel))",message="a node label may be one level only"
	Levels []TopologyLevel `json:"levels"`
}

// Topology orders the node labels of a cluster's network from the widest domain to the
// narrowest, so that a PodGroup's preferred domain can fall back to a wider one (Kueue's
// Topology shape). PodGroups use the one named "default" unless they name another.
//
// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=tephra
// +kubebuilder:printcolumn:name="Levels",type=string,JSONPath=`.spec.levels[*].nodeLabel`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Topology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TopologySpec `json:"spec"`
}

// TopologyList is a list of Topologies.
//
// +kubebuilder:object:root=true
type TopologyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topology `json:"items"`
}
