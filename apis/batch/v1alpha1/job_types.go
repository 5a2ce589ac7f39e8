package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Event is something that happens to a Job's pods or tasks, matched by a LifecyclePolicy.
// +kubebuilder:validation:Enum=PodFailed;PodEvicted;PodPending;PodGroupUnready;TaskCompleted;TaskFailed;Unknown;"*"
type Event string

// Events a policy can match.
const (
	AnyEvent        Event = "*"
	PodFailedEvent  Event = "PodFailed"
	PodEvictedEvent Event = "PodEvicted"
	PodPendingEvent Event = "PodPending"
	// PodGroupUnreadyEvent: the Job's minimum was not bound and Running within its ready timeout
	// (spec.readyTimeoutSeconds), and tephra-controllers evicted its bound pods.
	PodGroupUnreadyEvent Event = "PodGroupUnready"
	TaskCompletedEvent   Event = "TaskCompleted"
	TaskFailedEvent      Event = "TaskFailed"
	UnknownEvent         Event = "Unknown"
)

// Values of a Job's spec.managedBy.
const (
	// JobControllerManager is Tephra's Job controller, which runs a Job that names no manager.
	JobControllerManager = "tephra.dev/job-controller"
	// MultiKueueManager is Kueue's MultiKueue: on a manager cluster it runs the Job on a worker
	// cluster, and Tephra's controllers leave it alone.
	MultiKueueManager = "kueue.x-k8s.io/multikueue"
)

// Action is what the Job controller does when a policy matches.
// +kubebuilder:validation:Enum=RestartJob;RestartTask;RestartSubGroup;RestartPod;AbortJob;TerminateJob;CompleteJob
type Action string

// Actions a policy can take.
const (
	RestartJobAction  Action = "RestartJob"
	RestartTaskAction Action = "RestartTask"
	RestartPodAction  Action = "RestartPod"
	// RestartSubGroupAction restarts the sub-group (spec.tasks[].subGroups) of the pod whose
	// event matched: a replica, while the job's other replicas run on. For a task without
	// sub-groups, or an event without a pod, it restarts the task.
	RestartSubGroupAction Action = "RestartSubGroup"
	AbortJobAction        Action = "AbortJob"
	TerminateJobAction    Action = "TerminateJob"
	CompleteJobAction     Action = "CompleteJob"
)

// LifecyclePolicy maps an event or a container exit code to an action.
// +kubebuilder:validation:XValidation:rule="has(self.event) || has(self.events) || has(self.exitCode)",message="a policy must match something: set one of event, events or exitCode"
// +kubebuilder:validation:XValidation:rule="[has(self.event), has(self.events), has(self.exitCode)].filter(x, x).size() <= 1",message="a policy matches one thing: set only one of event, events or exitCode"
type LifecyclePolicy struct {
	// Event the policy matches.
	// +optional
	Event Event `json:"event,omitempty"`
	// Events the policy matches, any of them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="!('*' in self) || size(self) == 1",message="the event * already matches every event: list it alone"
	// +listType=set
	// +optional
	Events []Event `json:"events,omitempty"`
	// ExitCode of a failed container that the policy matches, instead of an event.
	// +kubebuilder:validation:XValidation:rule="self != 0",message="exitCode 0 means success and cannot be matched: use a nonzero exit code or an event"
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Action to take.
	Action Action `json:"action"`
	// Timeout delays the action: it is taken only if the event still holds after it.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="timeout must be a duration such as 30s, 5m or 1h30m"
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
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	Name []string `json:"name"`
	// Iteration is `all` (every pod of those tasks runs) or `any` (one of them does).
	// +kubebuilder:default=all
	// +optional
	Iteration Iteration `json:"iteration,omitempty"`
}

// TaskSpec is a set of identical pods in a Job, such as its parameter servers or its workers.
// +kubebuilder:validation:XValidation:rule="!has(self.minAvailable) || !has(self.replicas) || self.minAvailable <= self.replicas",message="task minAvailable must not exceed its replicas",fieldPath=".minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(self.dependsOn) || !has(self.dependsOn.name) || !(self.name in self.dependsOn.name)",message="a task cannot depend on itself",fieldPath=".dependsOn.name"
// +kubebuilder:validation:XValidation:rule="!has(self.subGroups) || !has(self.replicas) || self.replicas % self.subGroups.size == 0",message="task replicas must be a multiple of subGroups.size",fieldPath=".subGroups.size"
// +kubebuilder:validation:XValidation:rule="!has(self.subGroups) || !has(self.minAvailable) || !has(self.replicas) || self.minAvailable == (has(self.subGroups.minSubGroups) ? self.subGroups.minSubGroups * self.subGroups.size : self.replicas)",message="a task with subGroups runs all of them (or subGroups.minSubGroups of them): its minAvailable, if set, must equal its replicas (or minSubGroups × size)",fieldPath=".minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(self.subGroups) || !has(self.subGroups.minSubGroups) || (has(self.replicas) && self.subGroups.minSubGroups <= self.replicas / self.subGroups.size)",message="subGroups.minSubGroups must not exceed the task's number of sub-groups (replicas / subGroups.size)",fieldPath=".subGroups.minSubGroups"
// +kubebuilder:validation:XValidation:rule="!has(self.subGroups) || size(self.name) <= 59",message="a task with subGroups has a name of at most 59 characters: its sub-groups are named <task>-<k>",fieldPath=".name"
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
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(p, has(p.event) ? [p.event] : (has(p.events) ? p.events : [])).flatten().distinct().size() == self.map(p, has(p.event) ? [p.event] : (has(p.events) ? p.events : [])).flatten().size()",message="two policies match the same event: each event may appear in one policy only"
	// +kubebuilder:validation:XValidation:rule="self.filter(p, has(p.exitCode)).map(p, p.exitCode).distinct().size() == self.filter(p, has(p.exitCode)).size()",message="two policies match the same exitCode: each exit code may appear in one policy only"
	// +optional
	Policies []LifecyclePolicy `json:"policies,omitempty"`
	// MaxRetry bounds restarts of this task.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxRetry int32 `json:"maxRetry,omitempty"`
	// DependsOn holds this task's pods until the named tasks run.
	// +optional
	DependsOn *DependsOn `json:"dependsOn,omitempty"`
	// SubGroups splits the task's pods into gangs of their own inside the Job's: the replicas of
	// a training job, say, each placed whole in its own rack (docs/gang.md, "Gangs of gangs").
	// +optional
	SubGroups *TaskSubGroups `json:"subGroups,omitempty"`
}

// TaskSubGroups splits a task's pods into sub-groups of its Job's PodGroup: pods 0 to size-1
// make sub-group <task>-0, the next size pods <task>-1, and so on.
// +kubebuilder:validation:XValidation:rule="!has(self.minMember) || self.minMember <= self.size",message="subGroups.minMember must not exceed subGroups.size: a sub-group cannot run more pods than it has",fieldPath=".minMember"
type TaskSubGroups struct {
	// Size is how many of the task's pods make one sub-group. The task's replicas must be a
	// multiple of it; every sub-group must have its minimum for the job to run, unless
	// minSubGroups says fewer.
	// +kubebuilder:validation:Minimum=1
	Size int32 `json:"size"`
	// MinSubGroups is how many of the task's sub-groups must run for the job to run: the job
	// starts once that many are placed whole, and the others are placed later, each whole, when
	// room comes (upstream's CompositePodGroup minGroupCount). Defaults to all of them (replicas
	// / size); the task's minimum of pods is then minSubGroups × size. Only one task of a job
	// may set it, and none other may have subGroups.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinSubGroups *int32 `json:"minSubGroups,omitempty"`
	// MinMember is how many pods of each sub-group must run at once. Defaults to size.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinMember *int32 `json:"minMember,omitempty"`
	// Topology places each sub-group's minimum in one domain (a rack), inside the Job's topology
	// domain (a block) when the Job has one.
	// +optional
	Topology *schedulingv1alpha1.PodGroupTopology `json:"topology,omitempty"`
}

// The dependsOn cycle rule of JobSpec works on task indices (ix). succ[i] lists the tasks that
// task i waits for; r1 says which task reaches which in at most one step (itself included).
// Squared five times it gives r32, reachability in up to 32 steps, enough for 32 tasks (a
// squaring that changes nothing ends the work early); a cycle is a task i waiting for a task j
// that reaches i. One-element lists bind the intermediate matrices, as CRD CEL has no cel.bind.
// Its index list, lists.range(32), must follow tasks' maxItems. It costs about 300,000 of the
// 1,000,000 a rule may spend, at worst, for 32 tasks; jobs without dependsOn skip it.

// JobSpec is a multi-task batch workload.
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy is immutable",fieldPath=".managedBy"
// +kubebuilder:validation:XValidation:rule="!has(self.taskTopology) || !has(self.tasks) || [(has(self.taskTopology.affinity) ? self.taskTopology.affinity.flatten() : []) + (has(self.taskTopology.antiAffinity) ? self.taskTopology.antiAffinity.flatten() : []) + (has(self.taskTopology.order) ? self.taskTopology.order : [])].all(names, names.all(n, self.tasks.exists(t, t.name == n)))",message="taskTopology names a task that is not in the job",fieldPath=".taskTopology"
// +kubebuilder:validation:XValidation:rule="!has(self.minAvailable) || !has(self.tasks) || self.minAvailable <= self.tasks.map(t, has(t.replicas) ? t.replicas : 0).sum()",message="minAvailable must not exceed the total replicas of the job's tasks",fieldPath=".minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(self.minSuccess) || !has(self.tasks) || self.minSuccess <= self.tasks.map(t, has(t.replicas) ? t.replicas : 0).sum()",message="minSuccess must not exceed the total replicas of the job's tasks",fieldPath=".minSuccess"
// +kubebuilder:validation:XValidation:rule="!has(self.tasks) || self.tasks.map(t, has(t.subGroups) && has(t.replicas) && t.subGroups.size > 0 ? t.replicas / t.subGroups.size : 0).sum() <= 128",message="the job's tasks make more than 128 sub-groups",fieldPath=".tasks"
// +kubebuilder:validation:XValidation:rule="!has(self.minAvailable) || !has(self.tasks) || !self.tasks.exists(t, has(t.subGroups))",message="a job whose tasks have subGroups runs all of them: minAvailable cannot be set",fieldPath=".minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(self.tasks) || !self.tasks.exists(t, has(t.subGroups) && has(t.subGroups.minSubGroups)) || self.tasks.filter(t, has(t.subGroups)).size() == 1",message="a task with subGroups.minSubGroups must be the job's only task with subGroups",fieldPath=".tasks"
// +kubebuilder:validation:XValidation:rule="!has(self.disruptionMode) || self.disruptionMode != 'Single' || (has(self.tasks) && self.tasks.exists(t, has(t.subGroups)))",message="disruptionMode Single disrupts one sub-group at a time: it needs a task with subGroups",fieldPath=".disruptionMode"
// +kubebuilder:validation:XValidation:rule="!has(self.tasks) || self.tasks.all(t, !has(t.dependsOn) || !has(t.dependsOn.name) || t.dependsOn.name.all(n, self.tasks.exists(u, u.name == n)))",message="dependsOn names a task that is not in the job",fieldPath=".tasks"
// +kubebuilder:validation:XValidation:rule="!has(self.tasks) || !self.tasks.exists(t, has(t.dependsOn) && has(t.dependsOn.name)) || [lists.range(32).filter(i, i < size(self.tasks))].all(ix, [self.tasks.map(t, ix.filter(j, has(t.dependsOn) && has(t.dependsOn.name) && self.tasks[j].name != t.name && self.tasks[j].name in t.dependsOn.name))].all(succ, [ix.map(i, ix.map(j, i == j || j in succ[i]))].all(r1, [r1.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r1[k][j])))[0])].all(r2, [r2 == r1 ? r2 : r2.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r2[k][j])))[0])].all(r4, [r4 == r2 ? r4 : r4.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r4[k][j])))[0])].all(r8, [r8 == r4 ? r8 : r8.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r8[k][j])))[0])].all(r16, [r16 == r8 ? r16 : r16.map(row, [ix.filter(k, row[k])].map(s, ix.map(j, s.exists(k, r16[k][j])))[0])].all(r32, !ix.exists(i, succ[i].exists(j, r32[j][i]))))))))))",message="dependsOn must not form a cycle: tasks that wait for each other would never start",fieldPath=".tasks"
type JobSpec struct {
	// SchedulerName of the Job's pods.
	// +kubebuilder:default=tephra-scheduler
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// Queue the Job runs in.
	// +kubebuilder:default=default
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Queue string `json:"queue,omitempty"`
	// PriorityClassName of the Job's pods and pod group.
	// +kubebuilder:validation:MaxLength=253
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
	// ReadyTimeoutSeconds is the ready timeout of the Job's PodGroup: how long its minimum has,
	// from its first pod bound, to be all bound and Running before its bound pods are evicted
	// (the PodGroupUnready event) and placed again. Defaults to tephra-controllers'
	// --default-ready-timeout.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ReadyTimeoutSeconds *int32 `json:"readyTimeoutSeconds,omitempty"`
	// RuntimeEstimateSeconds is how long the Job is expected to run once its minimum runs: the
	// runtime estimate of its PodGroup. A Job that runs longer is not stopped for it, only
	// reported (docs/gang.md).
	// +kubebuilder:validation:Minimum=1
	// +optional
	RuntimeEstimateSeconds *int32 `json:"runtimeEstimateSeconds,omitempty"`
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
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(p, has(p.event) ? [p.event] : (has(p.events) ? p.events : [])).flatten().distinct().size() == self.map(p, has(p.event) ? [p.event] : (has(p.events) ? p.events : [])).flatten().size()",message="two policies match the same event: each event may appear in one policy only"
	// +kubebuilder:validation:XValidation:rule="self.filter(p, has(p.exitCode)).map(p, p.exitCode).distinct().size() == self.filter(p, has(p.exitCode)).size()",message="two policies match the same exitCode: each exit code may appear in one policy only"
	// +optional
	Policies []LifecyclePolicy `json:"policies,omitempty"`
	// Plugins to apply to the Job's pods, by name (env, svc, ssh, pytorch, tensorflow, mpi, ray),
	// each with its arguments.
	// +kubebuilder:validation:MaxProperties=7
	// +kubebuilder:validation:XValidation:rule="self.all(name, name in ['env', 'svc', 'ssh', 'pytorch', 'tensorflow', 'mpi', 'ray'])",message="unknown plugin: the plugins are env, svc, ssh, pytorch, tensorflow, mpi and ray"
	// +kubebuilder:validation:XValidation:rule="self.all(name, dyn(self[name]) == null || size(self[name]) <= 16)",message="a plugin takes at most 16 arguments"
	// +kubebuilder:validation:XValidation:rule="self.all(name, dyn(self[name]) == null || lists.range(16).all(i, i >= size(self[name]) || size(self[name][i]) <= 256))",message="a plugin argument must be at most 256 characters long"
	// +optional
	Plugins map[string][]string `json:"plugins,omitempty"`
	// Suspend frees all the Job's resources while true; resuming starts it again.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// ManagedBy names the controller that runs the Job: tephra.dev/job-controller, Tephra's Job
	// controller (the default), or kueue.x-k8s.io/multikueue, Kueue's MultiKueue on a manager
	// cluster, which runs the Job on a worker cluster and mirrors its status back: Tephra's
	// controllers then create nothing for it (docs/kueue.md). Immutable.
	// +kubebuilder:validation:XValidation:rule="self in ['tephra.dev/job-controller', 'kueue.x-k8s.io/multikueue']",message="managedBy must be tephra.dev/job-controller (Tephra's Job controller) or kueue.x-k8s.io/multikueue (Kueue's MultiKueue)"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
	// Topology places the Job's minimum inside one network domain; the Job's PodGroup carries
	// it (docs/topology.md).
	// +optional
	Topology *schedulingv1alpha1.PodGroupTopology `json:"topology,omitempty"`
	// TaskTopology places the pods of some tasks on the same nodes (a parameter server next to
	// its workers) or on different ones (replicas spread), and says which tasks to create first.
	// Without it, the Job's annotations volcano.sh/task-topology-affinity, -anti-affinity and
	// -task-order are read instead (docs/job.md).
	// +optional
	TaskTopology *TaskTopology `json:"taskTopology,omitempty"`
	// DisruptionMode says what preemption and reclaim take of the Job once it runs: All (the
	// default) every pod, Single the pods of one sub-group of a task with subGroups, which the
	// Job then replaces while the others run on. The Job's PodGroup carries it.
	// +kubebuilder:validation:Enum=All;Single
	// +optional
	DisruptionMode schedulingv1alpha1.DisruptionMode `json:"disruptionMode,omitempty"`
	// Tasks of the Job.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Tasks []TaskSpec `json:"tasks"`
}

// TaskSet is a set of a job's tasks, by name.
// +kubebuilder:validation:MinItems=1
// +kubebuilder:validation:MaxItems=32
// +kubebuilder:validation:items:MaxLength=63
// +listType=set
type TaskSet []string

// TaskTopology places a job's tasks relative to each other. Affinity and anti-affinity are
// preferences the scheduler scores (the pods' preferred inter-pod affinity, per node): they never
// keep a gang from being placed, nor move it out of its topology domain.
type TaskTopology struct {
	// Affinity lists sets of tasks whose pods prefer each other's nodes: [[ps, worker]] places
	// workers on the nodes of the parameter servers while they fit.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Affinity []TaskSet `json:"affinity,omitempty"`
	// AntiAffinity lists sets of tasks whose pods prefer nodes without each other: [[worker]]
	// spreads the workers one per node while there are nodes for them.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AntiAffinity []TaskSet `json:"antiAffinity,omitempty"`
	// Order lists tasks whose pods are created, and so queued for scheduling, before the
	// others, in that order: [ps, worker] places parameter servers first and workers next to
	// them.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Order []string `json:"order,omitempty"`
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
