package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupPhase is where a pod group is in its life.
// +kubebuilder:validation:Enum=Pending;Inqueue;Running;Completed;Failed;Unknown
type PodGroupPhase string

const (
	// PodGroupPending groups wait for their queue to admit their minimum.
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupInqueue groups are admitted by their queue and are being placed.
	PodGroupInqueue PodGroupPhase = "Inqueue"
	// PodGroupRunning groups have at least minMember pods running.
	PodGroupRunning PodGroupPhase = "Running"
	// PodGroupCompleted groups have finished: their pods succeeded.
	PodGroupCompleted PodGroupPhase = "Completed"
	// PodGroupFailed groups have too many failed pods to reach minMember again.
	PodGroupFailed PodGroupPhase = "Failed"
	// PodGroupUnknown groups have some pods running and too few to make up their minimum.
	PodGroupUnknown PodGroupPhase = "Unknown"
)

// Condition types of a PodGroup.
const (
	// PodGroupUnschedulable is true while the group's minimum cannot be placed; its reason and
	// message say why.
	PodGroupUnschedulable = "Unschedulable"
	// PodGroupScheduled is true once the group's minimum has been bound.
	PodGroupScheduled = "Scheduled"
	// PodGroupSLAExceeded is true while a group with an SLA waiting time (annotation
	// scheduling.tephra.dev/sla-waiting-time) has waited past it for its minimum: tephra-scheduler
	// then reserves nodes for it.
	PodGroupSLAExceeded = "SLAExceeded"
	// PodGroupPodsReady is true once the group's minimum is bound and Running. It turns false
	// with reason Unready when the minimum missed its ready timeout and its bound members were
	// evicted.
	PodGroupPodsReady = "PodsReady"
	// PodGroupRuntimeEstimateExceeded is true once a group with spec.runtimeEstimateSeconds has
	// run longer than its estimate since its minimum first ran; it stays true.
	PodGroupRuntimeEstimateExceeded = "RuntimeEstimateExceeded"
	// PodGroupMinMemberLowered is true while the group's minMember is below the whole minimum
	// of the Job that owns it (annotation JobMinMemberAnnotation): the Job controller lowers it
	// as the job's pods succeed, since a pod that succeeded does not run again and the gang
	// needs only the pods still to run.
	PodGroupMinMemberLowered = "MinMemberLowered"
)

// JobMinMemberAnnotation, on a PodGroup a Tephra Job owns, is the job's whole minimum as its
// Job controller resolved it (minAvailable), which the group's minMember may fall below.
const JobMinMemberAnnotation = "batch.tephra.dev/min-member"

// SubGroupLabel names the sub-group of its PodGroup that a pod belongs to (spec.subGroups).
const SubGroupLabel = "scheduling.tephra.dev/subgroup"

// SubGroup is a gang inside a PodGroup.
// +kubebuilder:validation:XValidation:rule="!has(self.exclusive) || !self.exclusive || (has(self.topology) && has(self.topology.required))",message="an exclusive sub-group has a domain of its required topology level to itself: it needs topology.required",fieldPath=".exclusive"
type SubGroup struct {
	// Name of the sub-group: the value of its pods' label scheduling.tephra.dev/subgroup.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Name string `json:"name"`

	// MinMember is how many of the sub-group's pods must be placed at once.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinMember int32 `json:"minMember,omitempty"`

	// Topology places the sub-group's minimum in one domain (a rack), inside the group's
	// domain (a block) when the group has a topology too.
	// +optional
	Topology *PodGroupTopology `json:"topology,omitempty"`

	// Exclusive gives the sub-group a domain of its topology's required level to itself: no
	// other sub-group of the group is placed in it (JobSet's exclusive placement, one child Job
	// per rack). Needs topology.required.
	// +optional
	Exclusive bool `json:"exclusive,omitempty"`
}

// MinSubGroupsOf is how many of the group's sub-groups must have their minimum placed for the
// group to run: spec.minSubGroups, else all of them (0 without sub-groups).
func MinSubGroupsOf(spec *PodGroupSpec) int {
	n := len(spec.SubGroups)
	if spec.MinSubGroups != nil && int(*spec.MinSubGroups) >= 1 && int(*spec.MinSubGroups) < n {
		return int(*spec.MinSubGroups)
	}
	return n
}

// DisruptionMode is what preemption and reclaim take of a group whose minimum runs.
type DisruptionMode string

const (
	// DisruptionAll: the group goes whole, all its sub-groups together.
	DisruptionAll DisruptionMode = "All"
	// DisruptionSingle: one sub-group goes alone; the others run on.
	DisruptionSingle DisruptionMode = "Single"
)

// PodGroupSpec says how many pods of a group must be placed together.
// +kubebuilder:validation:XValidation:rule="!has(self.minSubGroups) || (has(self.subGroups) && self.minSubGroups <= size(self.subGroups))",message="minSubGroups must not exceed the number of subGroups: the group cannot run more sub-groups than it has",fieldPath=".minSubGroups"
// +kubebuilder:validation:XValidation:rule="!has(self.disruptionMode) || self.disruptionMode != 'Single' || (has(self.subGroups) && size(self.subGroups) > 0)",message="disruptionMode Single disrupts one sub-group at a time: it needs subGroups",fieldPath=".disruptionMode"
type PodGroupSpec struct {
	// MinMember is how many of the group's pods must be placed at once; none is bound before
	// that many can be.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinMember int32 `json:"minMember,omitempty"`

	// MinTaskMember is, per task (the pods' scheduling.tephra.dev/task label), how many pods of
	// that task must be among those placed at once.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(t, self[t] >= 1)",message="every minTaskMember count must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self.all(t, t.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$'))",message="minTaskMember keys must be task names that are valid label values (63 characters at most, alphanumerics, '-', '_' or '.')"
	// +optional
	MinTaskMember map[string]int32 `json:"minTaskMember,omitempty"`

	// MinResources is what the group's minimum needs in all; the scheduler admits the group only
	// when that fits. Defaults to the sum of the requests of minMember of its pods.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !string(self[r]).startsWith('-'))",message="minResources quantities must not be negative"
	// +optional
	MinResources corev1.ResourceList `json:"minResources,omitempty"`

	// Queue is the leaf Queue the group runs in.
	// +kubebuilder:default=default
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Queue string `json:"queue,omitempty"`

	// PriorityClassName gives the group's priority, used to order groups and choose victims.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ScheduleTimeoutSeconds bounds how long placed members wait for the rest of the minimum
	// before they are all released. Defaults to the scheduler's setting.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`

	// ReadyTimeoutSeconds bounds how long the group's minimum has, from its first member bound,
	// to be all bound and Running. Past it, tephra-controllers evicts the group's bound members
	// (their controllers create them again), the PodsReady condition says why, and the scheduler
	// holds the group back for a backoff before placing it again. Defaults to tephra-controllers'
	// --default-ready-timeout (off unless set: bound members then wait as long as it takes).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ReadyTimeoutSeconds *int32 `json:"readyTimeoutSeconds,omitempty"`

	// Topology places the group's minimum inside one network domain (a rack, a block): see
	// docs/topology.md.
	// +optional
	Topology *PodGroupTopology `json:"topology,omitempty"`

	// SubGroups divide the group into gangs of its own pods (docs/gang.md, "Gangs of gangs"): a
	// pod belongs to the sub-group its label scheduling.tephra.dev/subgroup names. Each sub-group
	// is placed all or nothing, at least its minMember at once and in one domain of its own
	// topology; the group's topology bounds them all. The group runs when minSubGroups of them
	// (all by default) have their minimum placed, and its own minMember and minTaskMember are met.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	SubGroups []SubGroup `json:"subGroups,omitempty"`

	// MinSubGroups is how many of the sub-groups must have their minimum placed for the group to
	// run (upstream's CompositePodGroup gang.minGroupCount). Omitted: all of them. The others are
	// placed later, each whole as a gang of its own in the group's domain, when room comes; none
	// is ever placed in part. At least 1, at most the number of subGroups; minMember should not
	// ask more pods than that many sub-groups hold.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +optional
	MinSubGroups *int32 `json:"minSubGroups,omitempty"`

	// DisruptionMode says what preemption and reclaim take of the group once its minimum runs:
	// All (the default) the whole group, Single one sub-group, whose pods their controller
	// replaces while the other sub-groups run on (upstream's CompositePodGroup disruptionMode).
	// Single needs subGroups.
	// +kubebuilder:validation:Enum=All;Single
	// +optional
	DisruptionMode DisruptionMode `json:"disruptionMode,omitempty"`

	// RuntimeEstimateSeconds is how long the group is expected to run once its minimum runs. A
	// group that runs longer is not stopped for it: its RuntimeEstimateExceeded condition turns
	// True, with an event and the tephra_podgroup_runtime_estimate_exceeded_total metric
	// (docs/gang.md).
	// +kubebuilder:validation:Minimum=1
	// +optional
	RuntimeEstimateSeconds *int32 `json:"runtimeEstimateSeconds,omitempty"`
}

// PodGroupStatus is what happened to the group. The PodGroup controller is its only writer.
type PodGroupStatus struct {
	// Phase of the group.
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// Running counts the group's running pods.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded counts the group's pods that ended successfully.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed counts the group's pods that ended in failure.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// UnreadyEvictions counts the times the group's bound members were evicted because its
	// minimum was not bound and Running within its ready timeout; the scheduler's backoff before
	// the next attempt doubles with each. Reset when the minimum runs.
	// +optional
	UnreadyEvictions int32 `json:"unreadyEvictions,omitempty"`
	// LastUnreadyEvictionTime is when the group's bound members were last evicted for it.
	// +optional
	LastUnreadyEvictionTime *metav1.Time `json:"lastUnreadyEvictionTime,omitempty"`
	// Conditions such as Unschedulable with the reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// WholeSubGroups counts the sub-groups whose minimum runs (or has succeeded), against
	// spec.minSubGroups (all sub-groups when unset).
	// +optional
	WholeSubGroups int32 `json:"wholeSubGroups,omitempty"`
	// SubGroups counts the members of each of spec.subGroups, in their order.
	// +listType=map
	// +listMapKey=name
	// +optional
	SubGroups []SubGroupStatus `json:"subGroups,omitempty"`
}

// SubGroupStatus counts the members of one sub-group.
type SubGroupStatus struct {
	// Name of the sub-group.
	Name string `json:"name"`
	// Pending counts its members that exist and neither run nor have ended.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// Running counts its running members.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded counts its members that ended successfully.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed counts its members that ended in failure.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Whole is true while at least its minMember of members run or have succeeded.
	// +optional
	Whole bool `json:"whole,omitempty"`
}

// PodGroup is a set of pods that must be placed together: none of them is bound before minMember
// of them can be.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pg;tpg,categories=tephra
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="MinMember",type=integer,JSONPath=`.spec.minMember`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queue`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
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
