package job

import (
	"encoding/json"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Labels and annotations the controller keeps on Jobs and their pods, besides the API's.
const (
	// JobRetryLabel on a pod is the job's status.retryCount when the pod was created. A pod of
	// another retry belongs to a run that RestartJob ended: it is deleted, never counted.
	JobRetryLabel = "batch.tephra.dev/job-retry"
	// TaskGenerationLabel on a pod is its task's generation when the pod was created. RestartTask
	// bumps the generation before deleting the task's pods, so that pods of an older generation
	// are known to be on their way out even if the controller restarts in between.
	TaskGenerationLabel = "batch.tephra.dev/task-generation"
	// RestartsAnnotation on a Job holds the controller's bookkeeping of the current run (see
	// runRecord): what it decided and must not decide twice. It is written before the pods are
	// touched.
	RestartsAnnotation = "batch.tephra.dev/restarts"
	// ResumeAnnotation on a Job resumes it from Aborted (Volcano's `vcctl job resume`); the
	// controller removes it. Any value works.
	ResumeAnnotation = "batch.tephra.dev/resume"
)

// runRecord is what the controller decided in the current run of a job that the job's status
// cannot hold: task generations and restart counts. It lives in RestartsAnnotation so that a
// restarted controller does not repeat or forget a restart. A run starts empty: when the job is
// created, restarted or resumed.
type runRecord struct {
	// Retry is the job's retryCount that the record belongs to. A record of another retry is
	// empty for the current run.
	Retry int32 `json:"retry"`
	// Tasks holds each task's generation and restarts, by name.
	Tasks map[string]taskRecord `json:"tasks,omitempty"`
	// RestartingPods are pods that RestartPod deletes and then recreates. Their failure has been
	// handled: it is not handled again while they are on their way out. Only UIDs still observed
	// are kept.
	RestartingPods []types.UID `json:"restartingPods,omitempty"`
}

// taskRecord is a task's part of the runRecord.
type taskRecord struct {
	// Generation is bumped by RestartTask: the task's pods of other generations are stale.
	Generation int32 `json:"generation,omitempty"`
	// Restarts counts RestartTask and RestartPod actions on the task in this run, bounded by its
	// maxRetry.
	Restarts int32 `json:"restarts,omitempty"`
	// OutOfRetries is set once the task needed a restart beyond its maxRetry: TaskFailed was
	// raised, and is not raised again in this run.
	OutOfRetries bool `json:"outOfRetries,omitempty"`
}

// readRecord returns the record of the job's current run: empty if the annotation is missing,
// unreadable or of another retry.
func readRecord(job *batchv1alpha1.Job) runRecord {
	empty := runRecord{Retry: job.Status.RetryCount}
	raw, ok := job.Annotations[RestartsAnnotation]
	if !ok {
		return empty
	}
	var rec runRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.Retry != job.Status.RetryCount {
		return empty
	}
	return rec
}

// encode is the annotation value of the record.
func (r runRecord) encode() string {
	data, err := json.Marshal(r)
	if err != nil {
		// Plain maps, strings and numbers always marshal.
		panic(err)
	}
	return string(data)
}

func (r runRecord) clone() runRecord {
	out := runRecord{Retry: r.Retry, RestartingPods: slices.Clone(r.RestartingPods)}
	if r.Tasks != nil {
		out.Tasks = make(map[string]taskRecord, len(r.Tasks))
		for k, v := range r.Tasks {
			out.Tasks[k] = v
		}
	}
	return out
}

func (r runRecord) generation(task string) int32 { return r.Tasks[task].Generation }

func (r runRecord) restarting(uid types.UID) bool { return slices.Contains(r.RestartingPods, uid) }

func (r *runRecord) updateTask(task string, update func(*taskRecord)) {
	if r.Tasks == nil {
		r.Tasks = map[string]taskRecord{}
	}
	t := r.Tasks[task]
	update(&t)
	r.Tasks[task] = t
}

// parseCount reads a non-negative count from a label; ok is false if it is missing or malformed.
func parseCount(labels map[string]string, key string) (int32, bool) {
	v, ok := labels[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}
