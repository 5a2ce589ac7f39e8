package job

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/disruption"
)

// trainingPolicies is the usual shape for training: stop on a code error, survive a machine loss.
var trainingPolicies = withPolicies(
	onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.AbortJobAction),
	onEvent(batchv1alpha1.PodEvictedEvent, batchv1alpha1.RestartJobAction),
)

// lostWithNode is worker-1 as the pod garbage collector leaves it when its node was deleted:
// Failed, with no exit code of its own, and a DisruptionTarget condition.
func lostWithNode(j *batchv1alpha1.Job) corev1.Pod {
	pod := newTestPod(j, "worker", 1, podState{phase: corev1.PodFailed, disruption: disruption.ReasonDeletionByPodGC})
	pod.Spec.NodeName = "node-b"
	pod.Status.ContainerStatuses = nil
	return pod
}

// TestDisruptionsAreEvictions checks that whatever takes a pod away from outside (its node lost
// or not ready, a deletion) is the job's PodEvicted event, named by its cause, and never
// PodFailed, whether the decision sees the pod ending or only its last state once it is gone.
func TestDisruptionsAreEvictions(t *testing.T) {
	runningBut1 := func(j *batchv1alpha1.Job) []corev1.Pod {
		return podsOf(j, running(), map[string]podState{"worker-1": {}})
	}
	for _, tc := range []struct {
		name string
		pods func(*batchv1alpha1.Job) []corev1.Pod
		gone func(*batchv1alpha1.Job) []corev1.Pod
		want string
	}{{
		name: "failed by the pod garbage collector because its node was deleted",
		pods: func(j *batchv1alpha1.Job) []corev1.Pod { return append(runningBut1(j), lostWithNode(j)) },
		want: "pod train-worker-1 was evicted: its node node-b is gone (the pod garbage collector removed it): the job policy on event PodEvicted restarts the job (retry 1 of 3)",
	}, {
		name: "gone before the controller saw it fail: its last state tells",
		pods: runningBut1,
		gone: func(j *batchv1alpha1.Job) []corev1.Pod { return []corev1.Pod{lostWithNode(j)} },
		want: "pod train-worker-1 was evicted: its node node-b is gone (the pod garbage collector removed it): the job policy on event PodEvicted restarts the job (retry 1 of 3)",
	}, {
		name: "force-deleted while it ran, gone before the controller saw it terminate",
		pods: runningBut1,
		gone: func(j *batchv1alpha1.Job) []corev1.Pod {
			pod := newTestPod(j, "worker", 1, podState{phase: corev1.PodRunning})
			pod.Spec.NodeName = "node-b"
			return []corev1.Pod{pod}
		},
		want: "pod train-worker-1 was evicted: it was deleted while it ran on node node-b: the job policy on event PodEvicted restarts the job (retry 1 of 3)",
	}, {
		name: "evicted by the taint manager from a node not ready past its toleration",
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			pod := newTestPod(j, "worker", 1, podState{phase: corev1.PodRunning, terminating: true, disruption: disruption.ReasonDeletionByTaintManager})
			pod.Spec.NodeName = "node-b"
			pod.Status.Conditions[0].Message = "Taint manager: deleting due to NoExecute taint"
			return append(runningBut1(j), pod)
		},
		want: "pod train-worker-1 was evicted: its node node-b was not ready or unreachable for longer than the pod tolerates: Taint manager: deleting due to NoExecute taint: the job policy on event PodEvicted restarts the job (retry 1 of 3)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(trainingPolicies)
			o := Observed{Job: job, Pods: tc.pods(job), Now: t0}
			if tc.gone != nil {
				o.Gone = tc.gone(job)
			}
			d := Decide(o)
			assert.Equal(t, batchv1alpha1.JobRestarting, d.Status.State.Phase, "message: %s", d.Status.State.Message)
			assert.Equal(t, string(batchv1alpha1.PodEvictedEvent), d.Status.State.Reason)
			require.Len(t, d.Actions, 1)
			assert.Equal(t, tc.want, d.Actions[0].Message)
		})
	}

	t.Run("a failure of the pod's own program is still PodFailed", func(t *testing.T) {
		job := newJob(trainingPolicies)
		d := Decide(Observed{Job: job, Pods: podsOf(job, running(), map[string]podState{"worker-1": failed(3)}), Now: t0})
		assert.Equal(t, batchv1alpha1.JobAborting, d.Status.State.Phase)
		require.Len(t, d.Actions, 1)
		assert.Contains(t, d.Actions[0].Message, "pod train-worker-1 failed (exit code 3): the job policy on event PodFailed aborts the job")
	})

	t.Run("a gone pod whose slot is filled again, or of an earlier run, is no event", func(t *testing.T) {
		job := newJob(trainingPolicies)
		old := lostWithNode(job)
		old.Labels[JobRetryLabel] = "7"
		d := Decide(Observed{Job: job, Pods: podsOf(job, running(), nil), Gone: []corev1.Pod{old}, Now: t0})
		assert.Equal(t, batchv1alpha1.JobRunning, d.Status.State.Phase)
		assert.Empty(t, d.Actions)
	})
}

// Without a PodEvicted policy, a pod that ended because it was disrupted is replaced: it is not a
// failure that could fail the job.
func TestEvictedPodWithoutPolicyIsReplaced(t *testing.T) {
	job := newJob()
	pods := append(podsOf(job, running(), map[string]podState{"worker-1": {}}), lostWithNode(job))
	d := Decide(Observed{Job: job, Pods: pods, Now: t0})
	assert.Equal(t, batchv1alpha1.JobRunning, d.Status.State.Phase, "message: %s", d.Status.State.Message)
	assert.Equal(t, []PodDeletion{{Name: "train-worker-1", UID: lostWithNode(job).UID, Reason: ReasonReplaceEvicted}}, d.Delete)

	// Once it is gone, its slot is created again.
	d = Decide(Observed{Job: job, Pods: podsOf(job, running(), map[string]podState{"worker-1": {}}), Gone: []corev1.Pod{lostWithNode(job)}, Now: t0})
	assert.Equal(t, batchv1alpha1.JobRunning, d.Status.State.Phase)
	assert.Equal(t, []string{"train-worker-1"}, createdNames(job, d))
}

// A restarting job whose pod is stuck terminating on a node that is down force-deletes it once
// its grace period is over, and not before: otherwise the pod's fixed name would hold the
// restart forever.
func TestPodStuckOnANodeDownIsForceDeleted(t *testing.T) {
	job := newJob(withPhase(batchv1alpha1.JobRestarting, "PodEvicted"), func(j *batchv1alpha1.Job) { j.Status.RetryCount = 1 })
	stuck := newTestPod(job, "worker", 1, podState{phase: corev1.PodRunning, terminating: true, disruption: disruption.ReasonDeletionByTaintManager})
	stuck.Spec.NodeName = "node-b"
	stuck.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(5 * time.Second)))

	d := Decide(Observed{Job: job, Pods: []corev1.Pod{stuck}, NodesDown: map[string]bool{"node-b": true}, Now: t0})
	assert.Empty(t, d.Delete, "its grace period is not over")
	assert.Equal(t, 5*time.Second, d.RequeueAfter)

	d = Decide(Observed{Job: job, Pods: []corev1.Pod{stuck}, NodesDown: map[string]bool{"node-b": true}, Now: t0.Add(6 * time.Second)})
	assert.Equal(t, []PodDeletion{{Name: "train-worker-1", UID: stuck.UID, Reason: ReasonNodeDown, Force: true}}, d.Delete)
	assert.Equal(t, batchv1alpha1.JobRestarting, d.Status.State.Phase)

	d = Decide(Observed{Job: job, Pods: []corev1.Pod{stuck}, NodesDown: map[string]bool{"node-b": false}, Now: t0.Add(6 * time.Second)})
	assert.Empty(t, d.Delete, "a Ready node's kubelet ends the pod itself")
}
