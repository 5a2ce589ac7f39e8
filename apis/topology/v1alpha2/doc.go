// Package v1alpha2 holds the community NodeResourceTopology API, topology.node.k8s.io/v1alpha2,
// as Node Feature Discovery's topology-updater and other exporters publish it: each node's NUMA
// zones with their resources. Its Go module is not served by the module proxy, so the types are
// defined here, schema-compatible with it: objects published by NFD are read without change.
//
// +kubebuilder:object:generate=true
// +groupName=topology.node.k8s.io
package v1alpha2
