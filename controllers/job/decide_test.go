package job

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// TestDecide checks one decision of the state machine for each situation: the phase it leads
// to, the retry counted, the pods deleted and created, and the actions taken.
func TestDecide(t *testing.T) {
	allPS := []string{"train-ps-0", "train-ps-1"}
	allWorkers := []string{"train-worker-0", "train-worker-1", "train-worker-2", "train-worker-3"}
	all := append(append([]string{}, allPS...), allWorkers...)
	liveBut := func(except string) []string {
		var out []string
		for _, n := range all {
			if n != except {
				out = append(out, n)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		job  *batchv1alpha1.Job
		pods func(job *batchv1alpha1.Job) []corev1.Pod
		now  time.Time

		phase   batchv1alpha1.JobPhase
		reason  string
		retry   int32
		deleted []string
		created []string
		actions []string
		requeue time.Duration
	}{{
		name:    "a new job is Pending and creates all its pods",
		job:     newJob(withPhase("", "")),
		phase:   batchv1alpha1.JobPending,
		reason:  ReasonCreated,
		created: all,
	}, {
		name:  "a Pending job whose pods all run is Running",
		job:   newJob(withPhase(batchv1alpha1.JobPending, ReasonCreated)),
		pods:  func(j *batchv1alpha1.Job) []corev1.Pod { return podsOf(j, running(), nil) },
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
	}, {
		name: "a Pending job short of its minimum stays Pending",
		job:  newJob(withPhase(batchv1alpha1.JobPending, ReasonCreated)),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-3": pending()})
		},
		phase: batchv1alpha1.JobPending, reason: ReasonCreated,
	}, {
		name: "a missing pod of a Running job is created again",
		job:  newJob(),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-2": {}})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		created: []string{"train-worker-2"},
	}, {
		name: "without a policy, a failed pod fails a job that needs every pod",
		job:  newJob(),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobFailed, reason: ReasonTooManyFailed,
		deleted: liveBut("train-worker-1"),
	}, {
		name: "without a policy, a failed pod is tolerated while minAvailable can still succeed",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.MinAvailable = ptr.To[int32](4) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
	}, {
		name: "a task's own minAvailable must be reachable too",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.Tasks[1].MinAvailable = ptr.To[int32](4) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobFailed, reason: ReasonTooManyFailed,
		deleted: liveBut("train-worker-1"),
	}, {
		name: "PodFailed → RestartJob counts a retry and enters Restarting, deleting every pod",
		job:  newJob(withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRestarting, reason: "PodFailed", retry: 1,
		deleted: all,
		actions: []string{"RestartJob"},
	}, {
		name: "RestartJob once retryCount reached maxRetry fails the job",
		job: newJob(withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction)),
			func(j *batchv1alpha1.Job) { j.Status.RetryCount = 3 }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, podState{phase: corev1.PodRunning, retry: 3}, map[string]podState{"worker-1": {phase: corev1.PodFailed, exitCode: 1, retry: 3}})
		},
		phase: batchv1alpha1.JobFailed, reason: ReasonRetriesExhausted, retry: 3,
		deleted: liveBut("train-worker-1"),
		actions: []string{"RestartJob"},
	}, {
		name: "Restarting waits for every pod of the old run to be gone",
		job:  newJob(withPhase(batchv1alpha1.JobRestarting, "PodFailed"), func(j *batchv1alpha1.Job) { j.Status.RetryCount = 1 }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, podState{phase: corev1.PodRunning, terminating: true}, map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRestarting, reason: "PodFailed", retry: 1,
		deleted: []string{"train-worker-1"},
	}, {
		name:  "once the old run is gone, Restarting starts the new run",
		job:   newJob(withPhase(batchv1alpha1.JobRestarting, "PodFailed"), func(j *batchv1alpha1.Job) { j.Status.RetryCount = 1 }),
		phase: batchv1alpha1.JobPending, reason: ReasonRestarted, retry: 1,
		created: all,
	}, {
		name: "pods of an earlier run are deleted and their failures ignored",
		job: newJob(withPhase(batchv1alpha1.JobPending, ReasonRestarted), func(j *batchv1alpha1.Job) { j.Status.RetryCount = 1 },
			withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, podState{phase: corev1.PodRunning, retry: 1}, map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobPending, reason: ReasonRestarted, retry: 1,
		deleted: []string{"train-worker-1"},
	}, {
		name: "RestartTask bumps the task's generation and deletes only its pods",
		job:  newJob(withTaskPolicies(1, onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartTaskAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: allWorkers,
		actions: []string{"RestartTask"},
	}, {
		name: "after RestartTask, old-generation pods go and new ones fill the empty slots",
		job:  newJob(withRecord(runRecord{Tasks: map[string]taskRecord{"worker": {Generation: 1, Restarts: 1}}})),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{
				"worker-0": {}, "worker-1": {},
				"worker-2": {phase: corev1.PodRunning, generation: 1},
				"worker-3": failed(1),
			})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-3"},
		created: []string{"train-worker-0", "train-worker-1"},
	}, {
		name: "RestartSubGroup deletes the failed pod's sub-group only, and the other replicas run on",
		job: newJob(withTaskPolicies(1, onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartSubGroupAction)),
			func(j *batchv1alpha1.Job) { j.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2} }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-3": failed(1)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-2", "train-worker-3"},
		actions: []string{"RestartSubGroup"},
	}, {
		name: "RestartSubGroup of a task without sub-groups restarts the task",
		job:  newJob(withTaskPolicies(1, onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartSubGroupAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: allWorkers,
		actions: []string{"RestartTask"},
	}, {
		name: "RestartPod records the pod and deletes it",
		job:  newJob(withPolicies(onExit(3, batchv1alpha1.RestartPodAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(3)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-1"},
		actions: []string{"RestartPod"},
	}, {
		name: "a pod already being restarted is not restarted (or counted) twice",
		job: newJob(withPolicies(onExit(3, batchv1alpha1.RestartPodAction)),
			withRecord(runRecord{Tasks: map[string]taskRecord{"worker": {Restarts: 1}}, RestartingPods: []types.UID{"train-worker-1-r0-g0"}})),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(3)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-1"},
	}, {
		name: "a task out of restarts raises TaskFailed; without a policy for it, the default rules fail the job",
		job: newJob(withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartPodAction)),
			func(j *batchv1alpha1.Job) { j.Spec.Tasks[1].MaxRetry = 1 },
			withRecord(runRecord{Tasks: map[string]taskRecord{"worker": {Restarts: 1}}})),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobFailed, reason: ReasonTooManyFailed,
		deleted: liveBut("train-worker-1"),
		actions: []string{"TaskFailed"},
	}, {
		name: "TaskFailed → RestartJob",
		job: newJob(withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartPodAction),
			onEvent(batchv1alpha1.TaskFailedEvent, batchv1alpha1.RestartJobAction)),
			func(j *batchv1alpha1.Job) { j.Spec.Tasks[1].MaxRetry = 1 },
			withRecord(runRecord{Tasks: map[string]taskRecord{"worker": {Restarts: 1}}})),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRestarting, reason: "TaskFailed", retry: 1,
		deleted: all,
		actions: []string{"TaskFailed", "RestartJob"},
	}, {
		name: "exit code 4 → AbortJob picks the exit code's policy",
		job: newJob(withPolicies(onExit(3, batchv1alpha1.RestartPodAction), onExit(4, batchv1alpha1.AbortJobAction),
			onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.TerminateJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(4)})
		},
		phase: batchv1alpha1.JobAborting, reason: "PodFailed",
		deleted: liveBut("train-worker-1"),
		actions: []string{"AbortJob"},
	}, {
		name: "an exit code no policy names falls to the event policy after it",
		job: newJob(withPolicies(onExit(3, batchv1alpha1.RestartPodAction), onExit(4, batchv1alpha1.AbortJobAction),
			onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.TerminateJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(5)})
		},
		phase: batchv1alpha1.JobTerminating, reason: "PodFailed",
		deleted: liveBut("train-worker-1"),
		actions: []string{"TerminateJob"},
	}, {
		name: "a task's policy takes precedence over the job's",
		job: newJob(withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction)),
			withTaskPolicies(1, onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartPodAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-1"},
		actions: []string{"RestartPod"},
	}, {
		name: "a policy's timeout delays its action, and the failure waits for it",
		job: newJob(withPolicies(batchv1alpha1.LifecyclePolicy{Event: batchv1alpha1.PodFailedEvent,
			Action: batchv1alpha1.RestartJobAction, Timeout: &metav1.Duration{Duration: 30 * time.Second}})),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": {phase: corev1.PodFailed, exitCode: 1, finished: t0.Add(-10 * time.Second)}})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		requeue: 20 * time.Second,
	}, {
		name: "PodPending with a timeout restarts a pod pending too long",
		job: newJob(withPolicies(batchv1alpha1.LifecyclePolicy{Event: batchv1alpha1.PodPendingEvent,
			Action: batchv1alpha1.RestartPodAction, Timeout: &metav1.Duration{Duration: 5 * time.Minute}})),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-1": pending()})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-1"},
		actions: []string{"RestartPod"},
	}, {
		name: "`*` does not match TaskCompleted",
		job:  newJob(withPolicies(onEvent(batchv1alpha1.AnyEvent, batchv1alpha1.RestartJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": succeeded(), "ps-1": succeeded()})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
	}, {
		name: "`*` matches PodEvicted: a pod deleted by someone else",
		job:  newJob(withPolicies(onEvent(batchv1alpha1.AnyEvent, batchv1alpha1.RestartJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": {phase: corev1.PodRunning, terminating: true}})
		},
		phase: batchv1alpha1.JobRestarting, reason: "PodEvicted", retry: 1,
		deleted: liveBut("train-ps-0"),
		actions: []string{"RestartJob"},
	}, {
		name: "PodGroupUnready: the pods tephra-controllers evicts for a missed ready timeout match their own event",
		job:  newJob(withPolicies(onEvent(batchv1alpha1.PodGroupUnreadyEvent, batchv1alpha1.AbortJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": {phase: corev1.PodRunning, terminating: true, disruption: schedulingv1alpha1.ReasonPodGroupUnready}})
		},
		phase: batchv1alpha1.JobAborting, reason: "PodGroupUnready",
		deleted: liveBut("train-ps-0"),
		actions: []string{"AbortJob"},
	}, {
		name: "PodGroupUnready is not PodEvicted: a PodEvicted policy leaves it to the default rules",
		job:  newJob(withPolicies(onEvent(batchv1alpha1.PodEvictedEvent, batchv1alpha1.AbortJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": {phase: corev1.PodRunning, terminating: true, disruption: schedulingv1alpha1.ReasonPodGroupUnready}})
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
	}, {
		name: "TaskCompleted → CompleteJob on the master completes the job, deleting the workers",
		job:  newJob(withTaskPolicies(0, onEvent(batchv1alpha1.TaskCompletedEvent, batchv1alpha1.CompleteJobAction))),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": succeeded(), "ps-1": succeeded()})
		},
		phase: batchv1alpha1.JobCompleting, reason: "TaskCompleted",
		deleted: allWorkers,
		actions: []string{"CompleteJob"},
	}, {
		name: "Completing without live pods is Completed",
		job:  newJob(withPhase(batchv1alpha1.JobCompleting, "TaskCompleted")),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, succeeded(), map[string]podState{"worker-0": {}})
		},
		phase: batchv1alpha1.JobCompleted, reason: "TaskCompleted",
	}, {
		name: "minSuccess reached completes the job",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.MinSuccess = ptr.To[int32](2) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-0": succeeded(), "worker-1": succeeded()})
		},
		phase: batchv1alpha1.JobCompleting, reason: ReasonMinSuccess,
		deleted: []string{"train-ps-0", "train-ps-1", "train-worker-2", "train-worker-3"},
	}, {
		name:  "every pod succeeded: Completed",
		job:   newJob(),
		pods:  func(j *batchv1alpha1.Job) []corev1.Pod { return podsOf(j, succeeded(), nil) },
		phase: batchv1alpha1.JobCompleted, reason: ReasonPodsSucceeded,
	}, {
		name: "every pod ended and minAvailable succeeded: Completed despite a failure",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.MinAvailable = ptr.To[int32](5) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, succeeded(), map[string]podState{"worker-3": failed(1)})
		},
		phase: batchv1alpha1.JobCompleted, reason: ReasonPodsSucceeded,
	}, {
		name: "suspend deletes the live pods",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.Suspend = ptr.To(true) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": succeeded()})
		},
		phase: batchv1alpha1.JobAborting, reason: ReasonSuspended,
		deleted: liveBut("train-ps-0"),
	}, {
		name: "a suspended job without live pods is Aborted",
		job:  newJob(withPhase(batchv1alpha1.JobAborting, ReasonSuspended), func(j *batchv1alpha1.Job) { j.Spec.Suspend = ptr.To(true) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, pending(), map[string]podState{"ps-0": succeeded(), "ps-1": {}, "worker-0": {}, "worker-1": {}, "worker-2": {}, "worker-3": {}})
		},
		phase: batchv1alpha1.JobAborted, reason: ReasonSuspended,
	}, {
		name: "unsuspended, an Aborted job restarts without counting a retry",
		job: newJob(withPhase(batchv1alpha1.JobAborted, ReasonSuspended), func(j *batchv1alpha1.Job) {
			j.Spec.Suspend = ptr.To(false)
			j.Status.RetryCount = 1
		}),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, podState{}, map[string]podState{"ps-0": {phase: corev1.PodSucceeded, retry: 1}})
		},
		phase: batchv1alpha1.JobRestarting, reason: ReasonResumed, retry: 1,
		deleted: []string{"train-ps-0"},
	}, {
		name:  "a job aborted by a policy stays Aborted when not asked to resume",
		job:   newJob(withPhase(batchv1alpha1.JobAborted, "PodFailed")),
		phase: batchv1alpha1.JobAborted, reason: "PodFailed",
	}, {
		name: "the resume annotation resumes a job aborted by a policy",
		job: newJob(withPhase(batchv1alpha1.JobAborted, "PodFailed"), func(j *batchv1alpha1.Job) {
			j.Annotations = map[string]string{ResumeAnnotation: "true"}
		}),
		phase: batchv1alpha1.JobPending, reason: ReasonResumed,
		created: all,
	}, {
		name:  "suspending an Aborted job makes unsuspending resume it",
		job:   newJob(withPhase(batchv1alpha1.JobAborted, "PodFailed"), func(j *batchv1alpha1.Job) { j.Spec.Suspend = ptr.To(true) }),
		phase: batchv1alpha1.JobAborted, reason: ReasonSuspended,
	}, {
		name:  "a job created suspended creates nothing",
		job:   newJob(withPhase("", ""), func(j *batchv1alpha1.Job) { j.Spec.Suspend = ptr.To(true) }),
		phase: batchv1alpha1.JobAborted, reason: ReasonSuspended,
	}, {
		name: "Terminating without live pods is Terminated",
		job:  newJob(withPhase(batchv1alpha1.JobTerminating, "PodFailed")),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, podState{}, map[string]podState{"worker-1": failed(1)})
		},
		phase: batchv1alpha1.JobTerminated, reason: "PodFailed",
	}, {
		name: "a finished job waits for its TTL",
		job: newJob(withPhase(batchv1alpha1.JobCompleted, ReasonPodsSucceeded), func(j *batchv1alpha1.Job) {
			j.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
			j.Status.State.LastTransitionTime = metav1.NewTime(t0.Add(-20 * time.Second))
		}),
		phase: batchv1alpha1.JobCompleted, reason: ReasonPodsSucceeded,
		requeue: 40 * time.Second,
	}, {
		name:  "a dependency cycle fails the job",
		job:   newJob(withPhase("", ""), func(j *batchv1alpha1.Job) { dependsOn(j, 0, "all", "worker"); dependsOn(j, 1, "all", "ps") }),
		phase: batchv1alpha1.JobFailed, reason: ReasonInvalidJob,
	}, {
		name: "replicas lowered: pods beyond them are deleted",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.Tasks[1].Replicas = 2 }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			wide := newJob()
			return podsOf(wide, running(), nil)
		},
		phase: batchv1alpha1.JobRunning, reason: ReasonRunning,
		deleted: []string{"train-worker-2", "train-worker-3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []corev1.Pod
			if tc.pods != nil {
				pods = tc.pods(tc.job)
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			before := tc.job.DeepCopy()
			d := Decide(Observed{Job: tc.job, Pods: pods, Now: now})
			assert.Equal(t, before, tc.job, "Decide does not change its input")
			assert.Equal(t, tc.phase, d.Status.State.Phase, "phase; message: %s", d.Status.State.Message)
			assert.Equal(t, tc.reason, d.Status.State.Reason, "reason")
			assert.Equal(t, tc.retry, d.Status.RetryCount, "retryCount")
			assert.Equal(t, tc.deleted, deletedNames(d), "deleted pods")
			assert.Equal(t, tc.created, createdNames(tc.job, d), "created pods")
			assert.Equal(t, tc.actions, actionNames(d), "actions")
			assert.Equal(t, tc.requeue, d.RequeueAfter, "requeue after")
		})
	}
}

func dependsOn(j *batchv1alpha1.Job, task int, iteration batchv1alpha1.Iteration, names ...string) {
	j.Spec.Tasks[task].DependsOn = &batchv1alpha1.DependsOn{Name: names, Iteration: iteration}
}
