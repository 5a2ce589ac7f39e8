package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueOrder is how a queue orders its waiting workloads of one priority.
type QueueOrder string

const (
	// QueueOrderSubmission orders them as they came in.
	QueueOrderSubmission QueueOrder = "Submission"
	// QueueOrderShortestEstimateFirst orders them by submission plus runtime estimate, capped.
	QueueOrderShortestEstimateFirst QueueOrder = "ShortestEstimateFirst"
	// QueueOrderLeastAttainedService orders them by the level of the service each has received
	// in earlier runs, then by submission; the level's delay is capped by the bound too.
	QueueOrderLeastAttainedService QueueOrder = "LeastAttainedService"
	// DefaultOrderBoundSeconds is a queue's orderBoundSeconds when unset.
	DefaultOrderBoundSeconds = 3600
)

// QueueState says whether a queue takes new workloads.
// +kubebuilder:validation:Enum=Open;Closed
type QueueState string

const (
	// QueueOpen queues schedule new workloads.
	QueueOpen QueueState = "Open"
	// QueueClosed queues keep running what runs, and start nothing new.
	QueueClosed QueueState = "Closed"
)

// QueueSpec is a team's share of the cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.guarantee) || !has(self.capability) || self.guarantee.all(r, !(r in self.capability) || !quantity(string(self.capability[r])).isLessThan(quantity(string(self.guarantee[r]))))",message="capability must be at least guarantee for every resource that both name",fieldPath=".capability",reason=FieldValueInvalid
type QueueSpec struct {
	// Parent is the queue this one takes its share from. Queues form a tree under `root`.
	// +kubebuilder:default=root
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Parent string `json:"parent,omitempty"`

	// Weight decides how the parent's capacity above the children's guarantees is shared among
	// siblings: in proportion to their weights.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// Guarantee is what the queue always gets when it asks for it, even if others must be
	// reclaimed to make room. It is a floor of the deserved share, not an addition to it.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !string(self[r]).startsWith('-'))",message="guarantee quantities must not be negative"
	// +optional
	Guarantee corev1.ResourceList `json:"guarantee,omitempty"`

	// Capability is the most the queue and everything below it may use, whatever is idle.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !string(self[r]).startsWith('-'))",message="capability quantities must not be negative"
	// +optional
	Capability corev1.ResourceList `json:"capability,omitempty"`

	// Reclaimable says whether capacity this queue borrowed above its deserved share may be
	// reclaimed by other queues.
	// +kubebuilder:default=true
	// +optional
	Reclaimable *bool `json:"reclaimable,omitempty"`

	// ReclaimMinRuntimeSeconds protects the queue's jobs from reclaim until they have run this
	// long: another queue takes back what this one borrowed from its older jobs, or waits for
	// room to free. A job restarted by reclaim is protected again, so that no job is reclaimed
	// over and over. In-queue preemption by priority is not affected. Unset: the scheduler's
	// reclaimMinRuntime (TephraQueue's args, 0 by default).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ReclaimMinRuntimeSeconds *int32 `json:"reclaimMinRuntimeSeconds,omitempty"`

	// ReclaimPatienceLimitSeconds is the longest reclaim patience makes a pod of this queue wait
	// while the queue is below its deserved share: once the pod has waited this long, it reclaims
	// the room it is owed whatever its victims had run. The victims' reclaim minimum runtime and
	// limit per job still apply. 0: no limit. Unset: the scheduler's reclaimPatienceLimit
	// (TephraQueue's args, 5 minutes by default).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ReclaimPatienceLimitSeconds *int32 `json:"reclaimPatienceLimitSeconds,omitempty"`

	// Order is how the queue orders its waiting workloads of one priority: Submission (the
	// default), the order they came in; ShortestEstimateFirst, their submission plus their
	// runtime estimate (a PodGroup's or Tephra Job's runtimeEstimateSeconds, a pod's
	// activeDeadlineSeconds), capped at orderBoundSeconds, so that short jobs go first and none is
	// passed over by work submitted more than the bound after it (workloads without an estimate
	// count as the bound); or LeastAttainedService, the level of the accelerator-seconds each
	// workload has run so far (levels at 1, 10 and 100 accelerator-hours; CPU cores for
	// workloads without accelerators), then submission, so that workloads that have run little
	// go before those that have run long, within the same bound. Across queues, fair share
	// decides.
	// +kubebuilder:validation:Enum=Submission;ShortestEstimateFirst;LeastAttainedService
	// +optional
	Order QueueOrder `json:"order,omitempty"`

	// OrderBoundSeconds caps what ShortestEstimateFirst and LeastAttainedService add to a
	// workload's submission: no workload is passed over by one submitted more than this after
	// it. Default 3600.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	OrderBoundSeconds *int32 `json:"orderBoundSeconds,omitempty"`

	// State is Open or Closed. A closed queue keeps running what runs and starts nothing new.
	// +kubebuilder:default=Open
	// +optional
	State QueueState `json:"state,omitempty"`

	// NamespaceSelector says which namespaces may submit to the queue: a pod, PodGroup or Job
	// from another namespace is refused (an event names the queue and the selector) and uses
	// none of the queue's share. Absent: every namespace may, as for the default queue. An empty
	// selector ({}) also matches every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// QueueStatus is what the queue uses and deserves now. The Queue controller is its only writer.
type QueueStatus struct {
	// Allocated is the sum of the requests of the queue's bound pods (and its children's).
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// Deserved is the queue's fair share of its parent at the current demand.
	// +optional
	Deserved corev1.ResourceList `json:"deserved,omitempty"`
	// AllocatedSummary is Allocated for people, as kubectl get shows it: "cpu: 3,
	// nvidia.com/gpu: 2", or "0".
	// +optional
	AllocatedSummary string `json:"allocatedSummary,omitempty"`
	// DeservedSummary is Deserved for people, as kubectl get shows it, or "0".
	// +optional
	DeservedSummary string `json:"deservedSummary,omitempty"`
	// Pending counts pod groups waiting to enter the queue.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// Inqueue counts pod groups admitted to the queue and not yet running.
	// +optional
	Inqueue int32 `json:"inqueue,omitempty"`
	// Running counts pod groups with their minimum running.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Usage is the queue's allocation accrued over time, decayed by a half-life: the history
	// that fair share over time weighs against (docs/queues.md, "Fair share over time"). Unset
	// when history is off (tephra-controllers --usage-half-life=0).
	// +optional
	Usage *QueueUsage `json:"usage,omitempty"`
	// Conditions of the queue, such as guarantees that do not fit in the parent.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// QueueUsage is a queue's decayed usage: over an interval dt at allocation a, each resource's
// usage U becomes U*2^(-dt/h) + a*(h/ln 2)*(1 - 2^(-dt/h)). A queue allocated a for good tends
// to a*h/ln 2, so U*ln 2/h reads as the queue's average allocation over the recent half-lives.
type QueueUsage struct {
	// ResourceSeconds is the decayed usage per resource in resource-seconds: CPU in
	// core-seconds, memory in byte-seconds, devices in device-seconds.
	// +optional
	ResourceSeconds corev1.ResourceList `json:"resourceSeconds,omitempty"`
	// HalfLife is the half-life the usage was accrued with.
	HalfLife metav1.Duration `json:"halfLife"`
	// Time is when the usage was measured; readers decay it to their own time.
	Time metav1.Time `json:"time"`
}

// Queue is a node of the tree that divides the cluster between teams: a guarantee it always
// gets, a capability it never exceeds, and a weight for sharing what is idle.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tq,categories=tephra
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Guarantee",type=string,JSONPath=`.spec.guarantee`
// +kubebuilder:printcolumn:name="Capability",type=string,JSONPath=`.spec.capability`
// +kubebuilder:printcolumn:name="Allocated",type=string,JSONPath=`.status.allocatedSummary`
// +kubebuilder:printcolumn:name="Deserved",type=string,JSONPath=`.status.deservedSummary`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'root' || self.spec.parent != self.metadata.name",message="a Queue cannot be its own parent",fieldPath=".spec.parent"
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'root' || self.spec.parent == 'root'",message="the root Queue is the top of the tree and has no parent: leave spec.parent unset",fieldPath=".spec.parent"
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
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
