package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Well-known values that exporters publish.
const (
	// ZoneTypeNode is the type of a zone that is a NUMA node.
	ZoneTypeNode = "Node"
	// AttributeTopologyManagerPolicy names kubelet's Topology Manager policy on the node:
	// none, best-effort, restricted or single-numa-node.
	AttributeTopologyManagerPolicy = "topologyManagerPolicy"
	// AttributeTopologyManagerScope names kubelet's Topology Manager scope: container or pod.
	AttributeTopologyManagerScope = "topologyManagerScope"
)

// NodeResourceTopology describes a node's resources and their topology. Its name is the node's.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=node-res-topo
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes/enhancements/pull/1870"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeResourceTopology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// TopologyPolicies is deprecated: older exporters publish the Topology Manager policy here
	// (e.g. SingleNUMANodeContainerLevel); newer ones use attributes.
	// +optional
	TopologyPolicies []string `json:"topologyPolicies,omitempty"`
	// Zones of the node, such as its NUMA nodes.
	Zones ZoneList `json:"zones"`
	// Attributes of the node, such as topologyManagerPolicy and topologyManagerScope.
	// +optional
	Attributes AttributeList `json:"attributes,omitempty"`
}

// Zone is a part of a node's topology: a NUMA node, a socket, a die.
type Zone struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// +optional
	Parent string `json:"parent,omitempty"`
	// +optional
	Costs CostList `json:"costs,omitempty"`
	// +optional
	Attributes AttributeList `json:"attributes,omitempty"`
	// +optional
	Resources ResourceInfoList `json:"resources,omitempty"`
}

// ZoneList is a list of zones.
type ZoneList []Zone

// ResourceInfo is one resource of a zone.
type ResourceInfo struct {
	// Name of the resource, e.g. cpu, memory, nvidia.com/gpu.
	Name string `json:"name"`
	// Capacity is the zone's total of the resource.
	Capacity resource.Quantity `json:"capacity"`
	// Allocatable is what pods may use of it.
	Allocatable resource.Quantity `json:"allocatable"`
	// Available is what is left for new pods: allocatable less what running pods hold.
	Available resource.Quantity `json:"available"`
}

// ResourceInfoList is a list of resources.
type ResourceInfoList []ResourceInfo

// CostInfo is the distance from this zone to another.
type CostInfo struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// CostList is a list of costs.
type CostList []CostInfo

// AttributeInfo is one named attribute.
type AttributeInfo struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AttributeList is a list of attributes.
type AttributeList []AttributeInfo

// NodeResourceTopologyList is a list of NodeResourceTopologies.
//
// +kubebuilder:object:root=true
type NodeResourceTopologyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []NodeResourceTopology `json:"items"`
}
