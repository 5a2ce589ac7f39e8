package v1alpha1

// Labels and annotations that link pods to Tephra's scheduling objects.
const (
	// PodGroupLabel names the PodGroup, in the pod's namespace, that a pod belongs to.
	PodGroupLabel = "scheduling.tephra.dev/pod-group"
	// TaskLabel names the task of its group that a pod belongs to (for minTaskMember).
	TaskLabel = "scheduling.tephra.dev/task"
	// QueueLabel names the Queue of a pod that belongs to no PodGroup.
	QueueLabel = "scheduling.tephra.dev/queue"

	// CoschedulingPodGroupLabel is scheduler-plugins' pod-group label, accepted as PodGroupLabel.
	CoschedulingPodGroupLabel = "scheduling.x-k8s.io/pod-group"
	// VolcanoGroupNameAnnotation is Volcano's pod-group annotation, accepted as PodGroupLabel.
	VolcanoGroupNameAnnotation = "scheduling.k8s.io/group-name"
	// VolcanoOwnGroupNameAnnotation is Volcano's own pod-group annotation, accepted as
	// PodGroupLabel too.
	VolcanoOwnGroupNameAnnotation = "scheduling.volcano.sh/group-name"
	// VolcanoTaskSpecKey is Volcano's task label or annotation, accepted as TaskLabel.
	VolcanoTaskSpecKey = "volcano.sh/task-spec"

	// JobSetNameLabel is JobSet's label on the pods of its child Jobs: a JobSet is a gang of its
	// Jobs, its pods members of the PodGroup of the JobSet's name that tephra-controllers' JobSet
	// adapter creates (after every other group label or annotation).
	JobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"
	// JobSetReplicatedJobLabel and JobSetJobIndexLabel are JobSet's labels of a pod's child Job:
	// its replicated job and its index there. They name the pod's sub-group in its JobSet's
	// group, "<replicated job>-<index>" (JobSetSubGroup).
	JobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	JobSetJobIndexLabel      = "jobset.sigs.k8s.io/job-index"
	// ExclusiveTopologyAnnotation, on a JobSet or on the Job template of one of its replicated
	// jobs (where JobSet reads its own alpha.jobset.sigs.k8s.io/exclusive-topology), is a node
	// label: each child Job is placed whole in a domain of it that no other child Job of the
	// JobSet shares (an exclusive sub-group, docs/gang.md).
	ExclusiveTopologyAnnotation = "scheduling.tephra.dev/exclusive-topology"

	// SLAWaitingTimeAnnotation, on a PodGroup (or a Job, which passes it on), is how long the
	// group may wait for its minimum before tephra-scheduler reserves nodes for it, as a Go
	// duration ("30s", "10m").
	SLAWaitingTimeAnnotation = "scheduling.tephra.dev/sla-waiting-time"
	// MovableAnnotation, "true" on a pod, on its PodGroup or on a Job (which passes it on to its
	// group), declares that the pod may be moved: evicted, created again by its controller and
	// placed elsewhere, to make whole nodes for a gang that fits the cluster's free capacity but no
	// set of nodes (docs/consolidation.md). A job that checkpoints says so with it.
	MovableAnnotation = "scheduling.tephra.dev/movable"
	// DatasetsAnnotation lists, comma-separated, the datasets a pod reads; on a PodGroup (or a
	// Job, which passes it on), the datasets of its members that declare none themselves
	// (internal/datasets, docs/io.md).
	DatasetsAnnotation = "data.tephra.dev/datasets"
	// DataLocalityAnnotation is Preferred (the default) or Required: whether a pod may run away
	// from its datasets. On a PodGroup or a Job it goes with DatasetsAnnotation.
	DataLocalityAnnotation = "data.tephra.dev/locality"
	// GroupOnPodAnnotation, "true" on a pod with PodGroupLabel, says that the pod is its group's
	// only member and carries the group itself: no PodGroup object exists for it, and Tephra reads
	// the group from the pod (GroupOnPod). A Tephra Job of one pod that asks for nothing only a
	// PodGroup can hold is created so (docs/job.md): it then costs the apiserver what a batch/v1
	// Job does. A PodGroup object of the same name, if there is one, wins.
	GroupOnPodAnnotation = "scheduling.tephra.dev/group-on-pod"

	// SchedulerName is the name of Tephra's scheduling profile.
	SchedulerName = "tephra-scheduler"
	// RootQueue is the top of the queue tree; its capacity is the cluster's.
	RootQueue = "root"
	// DefaultQueue holds workloads that name no queue.
	DefaultQueue = "default"
)
