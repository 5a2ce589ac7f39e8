// Package v1beta1 is Volcano's PodGroup and Queue API (group scheduling.volcano.sh), as Tephra
// reads it: see apis/foreign.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.volcano.sh
package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is Volcano's scheduling API group.
const GroupName = "scheduling.volcano.sh"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

var (
	// SchemeBuilder registers this package's types in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(SchemeGroupVersion, &PodGroup{}, &PodGroupList{}, &Queue{}, &QueueList{})
		metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Labels and annotations Volcano puts on PodGroups and pods.
const (
	// QueueNameAnnotation names a PodGroup's queue (also used as a label by some operators).
	QueueNameAnnotation = "scheduling.volcano.sh/queue-name"
	// QueueNameLabel names a PodGroup's queue (KubeRay).
	QueueNameLabel = "volcano.sh/queue-name"
	// GroupNameAnnotation is Volcano's own pod-group annotation.
	GroupNameAnnotation = "scheduling.volcano.sh/group-name"
	// TaskSpecKey names a pod's task (annotation or label).
	TaskSpecKey = "volcano.sh/task-spec"
)

// PodGroupPhase is the phase of a Volcano PodGroup.
type PodGroupPhase string

// The phases Volcano writes.
const (
	PodGroupPending   PodGroupPhase = "Pending"
	PodGroupInqueue   PodGroupPhase = "Inqueue"
	PodGroupRunning   PodGroupPhase = "Running"
	PodGroupUnknown   PodGroupPhase = "Unknown"
	PodGroupCompleted PodGroupPhase = "Completed"
	PodGroupFailed    PodGroupPhase = "Failed"
)

// NetworkTopologySpec is Volcano's network-topology constraint: Tephra maps its tiers onto the
// levels of the default Topology (internal/topology.FromVolcano).
type NetworkTopologySpec struct {
	// +optional
	Mode string `json:"mode,omitempty"`
	// +optional
	HighestTierAllowed *int `json:"highestTierAllowed,omitempty"`
}

// PodGroupSpec is the gang of a Volcano PodGroup.
type PodGroupSpec struct {
	// +optional
	MinMember int32 `json:"minMember,omitempty"`
	// +optional
	MinTaskMember map[string]int32 `json:"minTaskMember,omitempty"`
	// +optional
	Queue string `json:"queue,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	MinResources *corev1.ResourceList `json:"minResources,omitempty"`
	// NetworkTopology places the gang in one network domain (docs/topology.md).
	// +optional
	NetworkTopology *NetworkTopologySpec `json:"networkTopology,omitempty"`
	// SubGroupPolicy is accepted and ignored by Tephra.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	SubGroupPolicy *runtime.RawExtension `json:"subGroupPolicy,omitempty"`
}

// PodGroupCondition is a condition of a Volcano PodGroup.
type PodGroupCondition struct {
	Type   string                 `json:"type,omitempty"`
	Status corev1.ConditionStatus `json:"status,omitempty"`
	// +optional
	TransitionID string `json:"transitionID,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// PodGroupStatus is what happened to the group.
type PodGroupStatus struct {
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// +optional
	Conditions []PodGroupCondition `json:"conditions,omitempty"`
	// +optional
	Running int32 `json:"running,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// PodGroup is Volcano's gang object; tephra-controllers mirrors it into a Tephra PodGroup of
// the same namespace and name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pg;podgroup-v1beta1
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

// QueueState is the state of a Volcano Queue.
type QueueState string

// Volcano's queue states.
const (
	QueueOpen    QueueState = "Open"
	QueueClosed  QueueState = "Closed"
	QueueClosing QueueState = "Closing"
	QueueUnknown QueueState = "Unknown"
)

// Guarantee is the resources reserved for a queue.
type Guarantee struct {
	// +optional
	Resource corev1.ResourceList `json:"resource,omitempty"`
}

// QueueSpec is a Volcano Queue's share of the cluster.
type QueueSpec struct {
	// +optional
	Weight int32 `json:"weight,omitempty"`
	// +optional
	Capability corev1.ResourceList `json:"capability,omitempty"`
	// +optional
	Reclaimable *bool `json:"reclaimable,omitempty"`
	// +optional
	Deserved corev1.ResourceList `json:"deserved,omitempty"`
	// +optional
	Guarantee Guarantee `json:"guarantee,omitempty"`
	// +optional
	Parent string `json:"parent,omitempty"`
	// ExtendClusters, Affinity and Type are accepted and ignored by Tephra.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	ExtendClusters *runtime.RawExtension `json:"extendClusters,omitempty"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Affinity *runtime.RawExtension `json:"affinity,omitempty"`
	// +optional
	Type string `json:"type,omitempty"`
}

// QueueStatus is a Volcano Queue's state and usage.
type QueueStatus struct {
	// +optional
	State QueueState `json:"state,omitempty"`
	// +optional
	Unknown int32 `json:"unknown,omitempty"`
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// +optional
	Running int32 `json:"running,omitempty"`
	// +optional
	Inqueue int32 `json:"inqueue,omitempty"`
	// +optional
	Completed int32 `json:"completed,omitempty"`
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
}

// Queue is Volcano's queue; tephra-controllers mirrors it into a Tephra Queue of the same name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=q;queue-v1beta1
// +kubebuilder:subresource:status
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec QueueSpec `json:"spec,omitempty"`
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// QueueList is a list of Queues.
//
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
