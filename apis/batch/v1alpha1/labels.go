package v1alpha1

// Labels and annotations of the pods the Job controller creates, and of the Jobs that JobFlows
// and CronJobs create.
const (
	// JobNameLabel names the Job that owns a pod.
	JobNameLabel = "batch.tephra.dev/job-name"
	// TaskIndexLabel is a pod's index within its task, from 0.
	TaskIndexLabel = "batch.tephra.dev/task-index"
	// JobFlowLabel names the JobFlow that created a Job.
	JobFlowLabel = "batch.tephra.dev/jobflow"
	// FlowLabel names the flow of its JobFlow that a Job was created for.
	FlowLabel = "batch.tephra.dev/flow"
	// CronJobLabel names the CronJob that created a Job.
	CronJobLabel = "batch.tephra.dev/cronjob"
	// ScheduledTimeAnnotation is the scheduled time, RFC 3339, of the CronJob run a Job is for.
	ScheduledTimeAnnotation = "batch.tephra.dev/cronjob-scheduled-timestamp"
)
