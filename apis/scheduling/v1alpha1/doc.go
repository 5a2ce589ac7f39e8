// Package v1alpha1 holds Tephra's scheduling API, group scheduling.tephra.dev: Queues, which
// split a cluster's capacity between teams, and PodGroups, which make a set of pods schedule
// all-or-nothing.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.tephra.dev
package v1alpha1
