package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobTemplate holds the spec of a Job that JobFlows create: flow "train" of a JobFlow creates a
// Job from the JobTemplate "train" of its namespace. Field-compatible with Volcano's
// flow.volcano.sh/v1alpha1 JobTemplate.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tjt,categories=tephra
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queue`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JobTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of the Jobs created from this template.
	Spec JobSpec `json:"spec"`
}

// JobTemplateList is a list of JobTemplates.
//
// +kubebuilder:object:root=true
type JobTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobTemplate `json:"items"`
}

// FlowCondition is what the jobs a flow depends on must have done for it to start.
// +kubebuilder:validation:Enum=Completed;Running;Failed
type FlowCondition string

// Conditions of a flow's dependencies.
const (
	// FlowOnCompleted starts the flow once every target Job completed (the default).
	FlowOnCompleted FlowCondition = "Completed"
	// FlowOnRunning starts the flow once every target Job ran: it reached Running, or finished
	// after it did.
	FlowOnRunning FlowCondition = "Running"
	// FlowOnFailed starts the flow once every target Job failed (Failed or Terminated): a
	// cleanup branch.
	FlowOnFailed FlowCondition = "Failed"
)

// FlowDependsOn says which flows' Jobs a flow waits for, and for what.
// +kubebuilder:validation:XValidation:rule="!has(self.probe)",message="probe is not supported by Tephra: use condition (Completed, Running or Failed) to say what the targets must have done",fieldPath=".probe"
type FlowDependsOn struct {
	// Targets are the flows whose Jobs this one waits for.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	Targets []string `json:"targets"`
	// Condition every target's Job must reach: Completed (default), Running, or Failed for a
	// cleanup branch. A flow whose condition can no longer be met is Skipped.
	// +kubebuilder:default=Completed
	// +optional
	Condition FlowCondition `json:"condition,omitempty"`
	// Probe is Volcano's field for HTTP, TCP and task-phase probes; Tephra refuses it with a
	// clear message rather than ignore it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Probe *FlowProbe `json:"probe,omitempty"`
}

// FlowProbe stands for Volcano's probe, which Tephra does not support.
type FlowProbe struct{}

// Flow is one step of a JobFlow: a Job made from the JobTemplate of the same name.
// +kubebuilder:validation:XValidation:rule="!has(self.patch)",message="patch is not supported by Tephra: make a JobTemplate with the patched spec",fieldPath=".patch"
type Flow struct {
	// Name of the flow and of the JobTemplate its Job is made from. The Job is named
	// <jobflow>-<flow>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// DependsOn holds the flow's Job until the Jobs of its targets reached its condition.
	// +optional
	DependsOn *FlowDependsOn `json:"dependsOn,omitempty"`
	// Patch is Volcano's field to change the template's spec per flow, which Tephra refuses.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Patch *FlowPatch `json:"patch,omitempty"`
}

// FlowPatch stands for Volcano's patch, which Tephra does not support.
type FlowPatch struct{}

// RetainPolicy says what happens to a JobFlow's Jobs when the JobFlow is deleted.
// +kubebuilder:validation:Enum=retain;delete
type RetainPolicy string

// Retain policies.
const (
	// RetainJobs keeps the Jobs (without their owner reference) when the JobFlow is deleted.
	RetainJobs RetainPolicy = "retain"
	// DeleteJobs deletes the Jobs with the JobFlow.
	DeleteJobs RetainPolicy = "delete"
)

// The dependsOn cycle rule of JobFlowSpec is the one of JobSpec's tasks (see there), over flows
// and their dependsOn.targets; its message lists the flows that wait for themselves.

// JobFlowSpec is a set of Jobs run in the order of their dependencies.
// +kubebuilder:validation:XValidation:rule="self.flows.all(f, !has(f.dependsOn) || f.dependsOn.targets.all(n, self.flows.exists(g, g.name == n)))",message="dependsOn names a flow that is not in the jobflow",fieldPath=".flows"
// +kubebuilder:validation:XValidation:rule="self.flows.all(f, !has(f.dependsOn) || !(f.name in f.dependsOn.targets))",message="a flow cannot depend on itself",fieldPath=".flows"
// +kubebuilder:validation:XValidation:rule="!self.flows.exists(t, has(t.dependsOn)) || [lists.range(32).filter(i, i < size(self.flows))].all(ix, [self.flows.map(t, ix.filter(j, has(t.dependsOn) && self.flows[j].name != t.name && self.flows[j].name in t.dependsOn.targets))].all(succ, [ix.map(i, ix.map(j, i == j || j in succ[i]))].all(r1, [r1.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r1[k][j])))[0])].all(r2, [r2 == r1 ? r2 : r2.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r2[k][j])))[0])].all(r4, [r4 == r2 ? r4 : r4.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r4[k][j])))[0])].all(r8, [r8 == r4 ? r8 : r8.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r8[k][j])))[0])].all(r16, [r16 == r8 ? r16 : r16.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r16[k][j])))[0])].all(r32, !ix.exists(i, succ[i].exists(j, r32[j][i]))))))))))",messageExpression="'dependsOn must not form a cycle: flows ' + [lists.range(32).filter(i, i < size(self.flows))].map(ix, [self.flows.map(t, ix.filter(j, has(t.dependsOn) && self.flows[j].name != t.name && self.flows[j].name in t.dependsOn.targets))].map(succ, [ix.map(i, ix.map(j, i == j || j in succ[i]))].map(r1, [r1.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r1[k][j])))[0])].map(r2, [r2.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r2[k][j])))[0])].map(r4, [r4.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r4[k][j])))[0])].map(r8, [r8.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r8[k][j])))[0])].map(r16, [r16.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r16[k][j])))[0])].map(r32, ix.filter(i, succ[i].exists(j, r32[j][i])).map(i, self.flows[i].name))[0])[0])[0])[0])[0])[0])[0])[0].join(', ') + ' wait for each other, so none of them would ever start'",fieldPath=".flows"
type JobFlowSpec struct {
	// Flows of the JobFlow, each a Job made from the JobTemplate of its name.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Flows []Flow `json:"flows"`
	// JobRetainPolicy says whether deleting the JobFlow deletes its Jobs (delete) or keeps them
	// (retain, the default).
	// +kubebuilder:default=retain
	// +optional
	JobRetainPolicy RetainPolicy `json:"jobRetainPolicy,omitempty"`
}

// JobFlowPhase is where a JobFlow is in its life.
type JobFlowPhase string

// Phases of a JobFlow (Volcano's names).
const (
	// FlowPending: no Job was created yet.
	FlowPending JobFlowPhase = "Pending"
	// FlowRunning: some Job runs, or some flow may still start.
	FlowRunning JobFlowPhase = "Running"
	// FlowSucceed: nothing more will start, and no Job failed.
	FlowSucceed JobFlowPhase = "Succeed"
	// FlowFailed: nothing more will start, and some Job failed.
	FlowFailed JobFlowPhase = "Failed"
	// FlowTerminating: the JobFlow is being deleted.
	FlowTerminating JobFlowPhase = "Terminating"
)

// FlowJobState is the state of a flow's Job: a Job phase once it exists, else one of these.
const (
	// FlowJobWaiting: the flow waits for its targets.
	FlowJobWaiting = "Waiting"
	// FlowJobSkipped: the flow's condition can no longer be met; its Job will not be created.
	FlowJobSkipped = "Skipped"
	// FlowJobDeleted: the Job was created, and deleted since (by a user or its TTL); it is not
	// created again.
	FlowJobDeleted = "Deleted"
)

// FlowJobStatus is what became of one flow's Job.
type FlowJobStatus struct {
	// Flow the Job is made for.
	Flow string `json:"flow"`
	// Name of the Job: <jobflow>-<flow>.
	Name string `json:"name"`
	// State of the Job: its phase, or Waiting, Skipped or Deleted.
	State string `json:"state"`
	// Message says what the flow waits for, or why it was skipped.
	// +optional
	Message string `json:"message,omitempty"`
	// CreationTimestamp is when the JobFlow created the Job.
	// +optional
	CreationTimestamp *metav1.Time `json:"creationTimestamp,omitempty"`
	// StartTimestamp is when the JobFlow first saw the Job Running.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the JobFlow first saw the Job finished.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// RestartCount is the Job's retryCount.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`
}

// JobFlowState is the JobFlow's phase and why.
type JobFlowState struct {
	// Phase of the JobFlow.
	// +optional
	Phase JobFlowPhase `json:"phase,omitempty"`
	// Reason of the phase, one word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message of the phase, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// JobFlowStatus is what happened to a JobFlow.
type JobFlowStatus struct {
	// State of the JobFlow.
	// +optional
	State JobFlowState `json:"state,omitempty"`
	// Flows counts the JobFlow's flows.
	// +optional
	Flows int32 `json:"flows,omitempty"`
	// PendingJobs, RunningJobs, CompletedJobs, FailedJobs and TerminatedJobs name the JobFlow's
	// Jobs by phase, as Volcano's JobFlow status does.
	// +optional
	PendingJobs []string `json:"pendingJobs,omitempty"`
	// +optional
	RunningJobs []string `json:"runningJobs,omitempty"`
	// +optional
	CompletedJobs []string `json:"completedJobs,omitempty"`
	// +optional
	FailedJobs []string `json:"failedJobs,omitempty"`
	// +optional
	TerminatedJobs []string `json:"terminatedJobs,omitempty"`
	// Completed counts the completed Jobs.
	// +optional
	Completed int32 `json:"completed,omitempty"`
	// Running counts the Jobs that are neither pending nor finished.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Failed counts the failed and terminated Jobs.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// JobStatusList has one entry per flow: its Job's state.
	// +listType=map
	// +listMapKey=flow
	// +optional
	JobStatusList []FlowJobStatus `json:"jobStatusList,omitempty"`
	// Conditions of the JobFlow: TemplatesFound is False while a flow's JobTemplate is missing.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// JobFlow runs Jobs made from JobTemplates in the order of their dependencies: a → (b, c) → d,
// with cleanup branches on failure. Field-compatible with Volcano's flow.volcano.sh/v1alpha1
// JobFlow, but for the condition of a dependency (docs/job.md).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tjf,categories=tephra
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.state.phase`
// +kubebuilder:printcolumn:name="Flows",type=integer,JSONPath=`.status.flows`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Completed",type=integer,JSONPath=`.status.completed`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Retain",type=string,JSONPath=`.spec.jobRetainPolicy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JobFlow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec JobFlowSpec `json:"spec"`
	// +optional
	Status JobFlowStatus `json:"status,omitempty"`
}

// JobFlowList is a list of JobFlows.
//
// +kubebuilder:object:root=true
type JobFlowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobFlow `json:"items"`
}
