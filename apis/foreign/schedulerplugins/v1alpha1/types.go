// Package v1alpha1 is scheduler-plugins' PodGroup API (group scheduling.x-k8s.io), as Tephra
// reads it: see apis/foreign.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.x-k8s.io
package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is scheduler-plugins' scheduling API group.
const GroupName = "scheduling.x-k8s.io"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's types in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(SchemeGroupVersion, &PodGroup{}, &PodGroupList{})
		metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// PodGroupPhase is the phase of a scheduler-plugins PodGroup.
type PodGroupPhase string

// The phases scheduler-plugins' PodGroup controller writes.
const (
	PodGroupPending       PodGroupPhase = "Pending"
	PodGroupPreScheduling PodGroupPhase = "PreScheduling"
	PodGroupScheduling    PodGroupPhase = "Scheduling"
	PodGroupScheduled     PodGroupPhase = "Scheduled"
	PodGroupRunning       PodGroupPhase = "Running"
	PodGroupFinished      PodGroupPhase = "Finished"
	PodGroupFailed        PodGroupPhase = "Failed"
)

// PodGroupSpec is the gang of a scheduler-plugins PodGroup.
type PodGroupSpec struct {
	// MinMember is how many pods must be placed at once.
	// +optional
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources is what the minimum needs in all.
	// +optional
	MinResources corev1.ResourceList `json:"minResources,omitempty"`
	// ScheduleTimeoutSeconds bounds how long placed members wait for the rest; 0 or unset
	// means the scheduler's default.
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus is what happened to the group.
type PodGroupStatus struct {
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// +optional
	OccupiedBy string `json:"occupiedBy,omitempty"`
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`
	// +optional
	Running int32 `json:"running,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	ScheduleStartTime metav1.Time `json:"scheduleStartTime,omitempty"`
}

// PodGroup is scheduler-plugins' gang object; tephra-controllers mirrors it into a Tephra
// PodGroup of the same namespace and name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pg;pgs
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec PodGroupSpec `json:"spec,omitempty"`
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupList is a list of PodGroups.
//
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
