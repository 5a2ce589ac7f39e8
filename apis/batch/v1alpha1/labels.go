package v1alpha1

// Labels that the Job controller puts on the pods it creates.
const (
	// JobNameLabel names the Job that owns a pod.
	JobNameLabel = "batch.tephra.dev/job-name"
	// TaskIndexLabel is a pod's index within its task, from 0.
	TaskIndexLabel = "batch.tephra.dev/task-index"
)
