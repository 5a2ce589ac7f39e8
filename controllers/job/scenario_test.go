package job

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// runAll settles the world and makes every pod run.
func runAll(t *testing.T, w *world) {
	t.Helper()
	_, err := w.settle(10)
	require.NoError(t, err)
	w.set(running())
	_, err = w.settle(10)
	require.NoError(t, err)
	require.Equal(t, batchv1alpha1.JobRunning, w.job.Status.State.Phase, w.job.Status.State.Message)
}

// A job restarted by a policy, with the controller crashing after it wrote the restart and
// before it finished deleting and creating pods (after each possible number of pod actions),
// ends the restart with retryCount exactly 1 and only pods of the new run.
func TestRestartJobIsCountedOnceWhereverTheControllerCrashes(t *testing.T) {
	for crashAfter := range 14 { // 6 deletions, 6 creations and a little more
		t.Run("after "+strconv.Itoa(crashAfter)+" pod actions", func(t *testing.T) {
			w := newWorld(newJob(withPhase("", ""), withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction))))
			runAll(t, w)
			w.set(failed(1), "worker-1")

			// The decision that restarts the job: its intent is written, then the controller
			// dies after crashAfter pod actions, over as many reconciles as it takes.
			actions := 0
			for {
				d := Decide(Observed{Job: w.job.DeepCopy(), Pods: w.podList(), Now: w.now})
				w.job.Status = d.Status
				if d.Record != nil {
					w.job.Annotations = map[string]string{RestartsAnnotation: *d.Record}
				}
				if len(d.Delete)+len(d.Create) == 0 {
					break
				}
				for _, del := range d.Delete {
					if actions == crashAfter {
						break
					}
					delete(w.pods, del.Name)
					actions++
				}
				spec := viewSpec(w.job)
				for _, slot := range d.Create {
					if actions == crashAfter {
						break
					}
					task, _ := spec.task(slot.Task)
					pod := NewPod(w.job, task.spec, slot.Index, w.job.Status.RetryCount, slot.Generation)
					w.uids++
					pod.UID = types.UID("crash-" + pod.Name + strconv.Itoa(w.uids))
					w.pods[pod.Name] = pod
					actions++
				}
				if actions == crashAfter {
					break
				}
			}
			require.Equal(t, int32(1), w.job.Status.RetryCount, "the restart was written before the crash")
			// A new controller takes over from what it observes.
			_, err := w.settle(10)
			require.NoError(t, err)
			w.set(running())
			_, err = w.settle(10)
			require.NoError(t, err)

			assert.Equal(t, int32(1), w.job.Status.RetryCount, "the restart is counted once")
			assert.Equal(t, batchv1alpha1.JobRunning, w.job.Status.State.Phase)
			assert.Len(t, w.pods, 6)
			for name, pod := range w.pods {
				assert.Equal(t, "1", pod.Labels[JobRetryLabel], "pod %s is of the new run", name)
			}
		})
	}
}

// maxRetry 2 lets the job restart twice; the third failure fails it with retryCount 2.
func TestRestartJobUpToMaxRetry(t *testing.T) {
	w := newWorld(newJob(withPhase("", ""), withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction)),
		func(j *batchv1alpha1.Job) { j.Spec.MaxRetry = 2 }))
	for run := range 3 {
		runAll(t, w)
		assert.Equal(t, int32(run), w.job.Status.RetryCount)
		w.set(failed(1), "ps-0")
		_, err := w.settle(10)
		require.NoError(t, err)
	}
	assert.Equal(t, batchv1alpha1.JobFailed, w.job.Status.State.Phase)
	assert.Equal(t, ReasonRetriesExhausted, w.job.Status.State.Reason)
	assert.Equal(t, int32(2), w.job.Status.RetryCount)
	for name, pod := range w.pods {
		assert.False(t, (observedPod{Pod: pod}).live(), "pod %s of a failed job does not run", name)
	}
}

// Suspending frees the pods; resuming starts the job again without counting a retry.
func TestSuspendAndResume(t *testing.T) {
	w := newWorld(newJob(withPhase("", "")))
	runAll(t, w)
	w.job.Spec.Suspend = ptr.To(true)
	_, err := w.settle(10)
	require.NoError(t, err)
	assert.Equal(t, batchv1alpha1.JobAborted, w.job.Status.State.Phase)
	assert.Empty(t, w.pods)

	w.job.Spec.Suspend = ptr.To(false)
	runAll(t, w)
	assert.Equal(t, int32(0), w.job.Status.RetryCount)
	assert.Len(t, w.pods, 6)
}

// RestartTask restarts the failed task's pods only, and a task that runs out of restarts
// raises TaskFailed once.
func TestRestartTaskWithinMaxRetry(t *testing.T) {
	w := newWorld(newJob(withPhase("", ""), withTaskPolicies(1, onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartTaskAction)),
		func(j *batchv1alpha1.Job) { j.Spec.Tasks[1].MaxRetry = 1 }))
	runAll(t, w)
	psUID := w.pods["train-ps-0"].UID
	workerUID := w.pods["train-worker-0"].UID
	w.set(failed(2), "worker-2")
	_, err := w.settle(10)
	require.NoError(t, err)
	assert.Equal(t, psUID, w.pods["train-ps-0"].UID, "the other task's pods are kept")
	assert.NotEqual(t, workerUID, w.pods["train-worker-0"].UID, "the task's pods are new")
	assert.Equal(t, "1", w.pods["train-worker-0"].Labels[TaskGenerationLabel])
	w.set(running(), "worker-0", "worker-1", "worker-2", "worker-3")

	w.set(failed(2), "worker-3")
	ds, err := w.settle(10)
	require.NoError(t, err)
	var taskFailed int
	for _, d := range ds {
		for _, a := range d.Actions {
			if a.Action == TaskFailedAction {
				taskFailed++
			}
		}
	}
	assert.Equal(t, 1, taskFailed, "TaskFailed is raised once")
	assert.Equal(t, batchv1alpha1.JobFailed, w.job.Status.State.Phase, "without a TaskFailed policy the job cannot succeed")
}
