package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event is something that happens to a Job's pods or tasks, matched by a LifecyclePolicy.
// +kubebuilder:validation:Enum=PodFailed;PodEvicted;PodPending;TaskCompleted;TaskFailed;Unknown;"*"
type Event string

// Events a policy can match.
const (
	AnyEvent           Event = "*"
	PodFailedEvent     Event = "PodFailed"
	PodEvictedEvent    Event = "PodEvicted"
	PodPendingEvent    Event = "PodPending"
	TaskCompletedEvent Event = "TaskCompleted"
	TaskFailedEvent    Event = "TaskFailed"
	UnknownEvent       Event = "Unknown"
)

// Action is what the Job controller does when a policy matches.
// +kubebuilder:validation:Enum=RestartJob;RestartTask;RestartPod;AbortJob;TerminateJob;CompleteJob
type Action string

// Actions a policy can take.
const (
	RestartJobAction   Action = "RestartJob"
	RestartTaskAction  Action = "RestartTask"
	RestartPodAction   Action = "RestartPod"
	AbortJobAction     Action = "AbortJob"
	TerminateJobAction Action = "TerminateJob"
	CompleteJobAction  Action = "CompleteJob"
)

// LifecyclePolicy maps an event or a container exit code to an action.
type LifecyclePolicy struct {
	// Event the policy matches.
	// +optional
	Event Event `json:"event,omitempty"`
	// Events the policy matches, any of them.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Events []Event `json:"events,omitempty"`
	// ExitCode of a failed container that the policy matches, instead of an event.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Action to take.
	Action Action `json:"action"`
	// Timeout delays the action: it is taken only if the event still holds after it.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// Iteration says whether a task waits for any or all pods of the tasks it depends on.
// +kubebuilder:validation:Enum=any;all
type Iteration string

// Iterations of DependsOn.
const (
	IterationAny Iteration = "any"
	IterationAll Iteration = "all"
)

// DependsOn holds a task's pods until the named tasks run.
type DependsOn struct {
	// Name lists the tasks this one waits for.
	// +kubebuilder:validation:MaxItems=16
	Name []string `json:"name"`
	// Iteration is `all` (every pod of those tasks runs) or `any` (one of them does).
	// +kubebuilder:default=all
	// +optional
	Iteration Iteration `json:"iteration,omitempty"`
}

// TaskSpec is a set of identical pods in a Job, such as its parameter servers or its workers.
type TaskSpec struct {
	// Name of the task, unique in the Job; part of its pods' names.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Replicas is how many pods the task runs.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// MinAvailable is how many of the task's pods must run at once. Defaults to replicas.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// Template of the task's pods.
	Template corev1.PodTemplateSpec `json:"template"`
	// Policies of this task; they take precedence over the Job's.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Policies []LifecyclePolicy `json:"policies,omitempty"`
	// MaxRetry bounds restarts of this task.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxRetry int32 `json:"maxRetry,omitempty"`
	// DependsOn holds this task's pods until the named tasks run.
	// +optional
	DependsOn *DependsOn `json:"dependsOn,omitempty"`
}

// JobSpec is a multi-task batch workload.
type JobSpec struct {
	// SchedulerName of the Job's pods.
	// +kubebuilder:default=tephra-scheduler
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// Queue the Job runs in.
	// +kubebuilder:default=default
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Queue string `json:"queue,omitempty"`
	// PriorityClassName of the Job's pods and pod group.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// MinAvailable is how many pods must run at once for the Job to make progress. Defaults to the
	// sum of the tasks' minAvailable.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// MinSuccess is how many pods must succeed for the Job to complete.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinSuccess *int32 `json:"minSuccess,omitempty"`
	// MaxRetry is how many times the Job may be restarted before it fails.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxRetry int32 `json:"maxRetry,omitempty"`
	// TTLSecondsAfterFinished deletes the Job this long after it finishes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// Policies of the Job, for events of any task.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Policies []LifecyclePolicy `json:"policies,omitempty"`
	// Plugins to apply to the Job's pods, by name (env, svc, ssh, pytorch, tensorflow, mpi), each
	// with its arguments.
	// +optional
	Plugins map[string][]string `json:"plugins,omitempty"`
	// Suspend frees all the Job's resources while true; resuming starts it again.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// Tasks of the Job.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Tasks []TaskSpec `json:"tasks"`
}

// JobPhase is where a Job is in its life.
type JobPhase string

// Phases of a Job.
const (
	JobPending     JobPhase = "Pending"
	JobRunning     JobPhase = "Running"
	JobRestarting  JobPhase = "Restarting"
	JobCompleting  JobPhase = "Completing"
	JobCompleted   JobPhase = "Completed"
	JobAborting    JobPhase = "Aborting"
	JobAborted     JobPhase = "Aborted"
	JobTerminating JobPhase = "Terminating"
	JobTerminated  JobPhase = "Terminated"
	JobFailed      JobPhase = "Failed"
)

// JobState is a Job's phase and why it is in it.
type JobState struct {
	// Phase of the Job.
	// +optional
	Phase JobPhase `json:"phase,omitempty"`
	// Reason of the last transition, one word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message of the last transition, for people.
	// +optional
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when the phase last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// TaskState counts a task's pods by phase.
type TaskState struct {
	// Phase maps a pod phase to how many of the task's pods are in it.
	// +optional
	Phase map[corev1.PodPhase]int32 `json:"phase,omitempty"`
}

// JobStatus is what happened to a Job.
type JobStatus struct {
	// State of the Job.
	// +optional
	State JobState `json:"state,omitempty"`
	// MinAvailable in force for the Job.
	// +optional
	MinAvailable int32 `json:"minAvailable,omitempty"`
	// TaskStatusCount counts each task's pods by phase.
	// +optional
	TaskStatusCount map[string]TaskState `json:"taskStatusCount,omitempty"`
	// Pending pods.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// Running pods.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded pods.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed pods.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Terminating pods.
	// +optional
	Terminating int32 `json:"terminating,omitempty"`
	// Unknown pods.
	// +optional
	Unknown int32 `json:"unknown,omitempty"`
	// RetryCount is how many times the Job was restarted.
	// +optional
	RetryCount int32 `json:"retryCount,omitempty"`
	// Conditions of the Job.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Job is a multi-task batch workload whose pods are scheduled as one gang.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tjob,categories=tephra
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.state.phase`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queue`
// +kubebuilder:printcolumn:name="MinAvailable",type=integer,JSONPath=`.status.minAvailable`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Retries",type=integer,JSONPath=`.status.retryCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Job struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec JobSpec `json:"spec"`
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// JobList is a list of Jobs.
//
// +kubebuilder:object:root=true
type JobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Job `json:"items"`
}
