package job

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// bytes reads the fuzzer's input as a stream of small choices; an exhausted stream reads 0.
type bytes struct {
	data []byte
	at   int
}

func (b *bytes) more() bool { return b.at < len(b.data) }

func (b *bytes) next(n int) int {
	if n <= 0 || !b.more() {
		return 0
	}
	v := int(b.data[b.at])
	b.at++
	return v % n
}

var (
	fuzzEvents = []batchv1alpha1.Event{
		batchv1alpha1.PodFailedEvent, batchv1alpha1.PodEvictedEvent, batchv1alpha1.PodPendingEvent,
		batchv1alpha1.TaskCompletedEvent, batchv1alpha1.TaskFailedEvent, batchv1alpha1.UnknownEvent, batchv1alpha1.AnyEvent,
	}
	fuzzActions = []batchv1alpha1.Action{
		batchv1alpha1.RestartJobAction, batchv1alpha1.RestartTaskAction, batchv1alpha1.RestartPodAction,
		batchv1alpha1.AbortJobAction, batchv1alpha1.TerminateJobAction, batchv1alpha1.CompleteJobAction,
	}
	knownPhases = map[batchv1alpha1.JobPhase]bool{
		batchv1alpha1.JobPending: true, batchv1alpha1.JobRunning: true, batchv1alpha1.JobRestarting: true,
		batchv1alpha1.JobCompleting: true, batchv1alpha1.JobCompleted: true, batchv1alpha1.JobAborting: true,
		batchv1alpha1.JobAborted: true, batchv1alpha1.JobTerminating: true, batchv1alpha1.JobTerminated: true,
		batchv1alpha1.JobFailed: true,
	}
)

func fuzzPolicies(b *bytes, most int) []batchv1alpha1.LifecyclePolicy {
	var out []batchv1alpha1.LifecyclePolicy
	for range b.next(most + 1) {
		p := batchv1alpha1.LifecyclePolicy{Action: fuzzActions[b.next(len(fuzzActions))]}
		if b.next(4) == 0 {
			p.ExitCode = ptr.To(int32(1 + b.next(3)))
		} else {
			p.Event = fuzzEvents[b.next(len(fuzzEvents))]
		}
		if b.next(3) == 0 {
			p.Timeout = &metav1.Duration{Duration: time.Duration(b.next(60)) * time.Second}
		}
		out = append(out, p)
	}
	return out
}

// fuzzJob builds a job of 1 to 3 tasks of up to 4 pods with random minimums, retries, policies
// and dependencies.
func fuzzJob(b *bytes) *batchv1alpha1.Job {
	job := newJob(withPhase("", ""), func(j *batchv1alpha1.Job) {
		j.Spec.Tasks = nil
		j.Spec.MaxRetry = int32(b.next(4))
	})
	for i := range 1 + b.next(3) {
		task := newTask(fmt.Sprintf("t%d", i), int32(b.next(5)), "1")
		if b.next(3) == 0 {
			task.MinAvailable = ptr.To(int32(b.next(int(task.Replicas) + 1)))
		}
		if b.next(3) == 0 {
			task.MaxRetry = int32(b.next(4))
		}
		task.Policies = fuzzPolicies(b, 2)
		if i > 0 && b.next(3) == 0 {
			iteration := batchv1alpha1.IterationAll
			if b.next(2) == 0 {
				iteration = batchv1alpha1.IterationAny
			}
			task.DependsOn = &batchv1alpha1.DependsOn{Name: []string{fmt.Sprintf("t%d", b.next(i))}, Iteration: iteration}
		}
		job.Spec.Tasks = append(job.Spec.Tasks, task)
	}
	spec := viewSpec(job)
	if b.next(3) == 0 {
		job.Spec.MinAvailable = ptr.To(int32(b.next(int(spec.replicas) + 1)))
	}
	if b.next(4) == 0 && spec.replicas > 0 {
		job.Spec.MinSuccess = ptr.To(int32(1 + b.next(int(spec.replicas))))
	}
	if b.next(4) == 0 {
		job.Spec.TTLSecondsAfterFinished = ptr.To(int32(b.next(100)))
	}
	job.Spec.Policies = fuzzPolicies(b, 3)
	return job
}

// pick returns one of the world's pods, or nil if it has none.
func (w *world) pick(b *bytes) *corev1.Pod {
	if len(w.pods) == 0 {
		return nil
	}
	names := make([]string, 0, len(w.pods))
	for name := range w.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	return w.pods[names[b.next(len(names))]]
}

func finishPod(pod *corev1.Pod, phase corev1.PodPhase, code int32, at time.Time) {
	pod.Spec.NodeName = "node-0"
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(at)}}}}
}

// event plays one thing that can happen to a job's pods or spec.
func (w *world) event(b *bytes) {
	switch b.next(12) {
	case 0:
		if pod := w.pick(b); pod != nil && pod.Status.Phase == corev1.PodPending {
			pod.Spec.NodeName = "node-0"
			pod.Status.Phase = corev1.PodRunning
		}
	case 1:
		if pod := w.pick(b); pod != nil && pod.Status.Phase == corev1.PodRunning {
			finishPod(pod, corev1.PodSucceeded, 0, w.now)
		}
	case 2:
		if pod := w.pick(b); pod != nil && (pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending) {
			finishPod(pod, corev1.PodFailed, int32(1+b.next(3)), w.now)
		}
	case 3: // evicted by someone else
		if pod := w.pick(b); pod != nil && pod.DeletionTimestamp == nil {
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
		}
	case 4: // deletions complete
		for name, pod := range w.pods {
			if pod.DeletionTimestamp != nil {
				delete(w.pods, name)
			}
		}
	case 5: // a pod vanishes at once
		if pod := w.pick(b); pod != nil {
			delete(w.pods, pod.Name)
		}
	case 6:
		w.now = w.now.Add(time.Duration(1+b.next(120)) * time.Second)
	case 7:
		w.job.Spec.Suspend = ptr.To(w.job.Spec.Suspend == nil || !*w.job.Spec.Suspend)
	case 8:
		if w.job.Annotations == nil {
			w.job.Annotations = map[string]string{}
		}
		w.job.Annotations[ResumeAnnotation] = "true"
	case 9:
		if pod := w.pick(b); pod != nil && pod.Status.Phase == corev1.PodRunning {
			pod.Status.Phase = corev1.PodUnknown
		}
	case 10:
		if len(w.job.Spec.Tasks) > 0 {
			task := &w.job.Spec.Tasks[b.next(len(w.job.Spec.Tasks))]
			task.Replicas = int32(b.next(5))
			if task.MinAvailable != nil && *task.MinAvailable > task.Replicas {
				task.MinAvailable = ptr.To(task.Replicas)
			}
		}
	case 11:
		if pod := w.pick(b); pod != nil && pod.Status.Phase == corev1.PodRunning {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.now)})
		}
	}
}

// checkInvariants fails the test if the world is in a state the controller must never leave
// a job in.
func (w *world) checkInvariants(t *testing.T, d Decision, prevRetry int32) {
	t.Helper()
	spec := viewSpec(w.job)
	perTask := map[string]int32{}
	var total int32
	for _, pod := range w.pods {
		if pod.DeletionTimestamp == nil {
			perTask[pod.Labels["scheduling.tephra.dev/task"]]++
			total++
		}
	}
	for task, n := range perTask {
		want := int32(0)
		if t, ok := spec.task(task); ok {
			want = t.replicas
		}
		if n > want {
			t.Fatalf("task %s has %d pods, more than its %d replicas", task, n, want)
		}
	}
	if total > spec.replicas {
		t.Fatalf("the job has %d pods, more than its %d replicas", total, spec.replicas)
	}
	s := w.job.Status
	if !knownPhases[s.State.Phase] {
		t.Fatalf("unknown phase %q", s.State.Phase)
	}
	if s.RetryCount < prevRetry || s.RetryCount > prevRetry+1 {
		t.Fatalf("retryCount went from %d to %d in one decision", prevRetry, s.RetryCount)
	}
	if s.RetryCount > max(w.job.Spec.MaxRetry, 0) {
		t.Fatalf("retryCount %d exceeds maxRetry %d", s.RetryCount, w.job.Spec.MaxRetry)
	}
	if Finished(s.State.Phase) && len(d.Create) > 0 {
		t.Fatalf("a %s job creates pods", s.State.Phase)
	}
}

// FuzzStateMachine plays random jobs and random sequences of pod events through the state
// machine, as the controller would apply its decisions, and checks that it never panics, never
// gives a job more pods than its replicas, never creates a pod over another, never counts more
// than one retry per decision, and decides the same twice from the same observation. The seed
// corpus runs as a normal test; `go test -fuzz FuzzStateMachine ./controllers/job` explores.
func FuzzStateMachine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 4, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, 2, 2, 1, 2, 0, 0, 0, 4, 6, 60})
	f.Add([]byte("restart the job whenever a pod fails, evict some, suspend and resume, let time pass"))
	f.Add([]byte{2, 3, 2, 1, 1, 1, 1, 0, 2, 4, 0, 1, 1, 1, 1, 1, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2})
	f.Add([]byte{0, 4, 3, 0, 0, 3, 1, 0, 0, 0, 2, 1, 1, 0, 0, 0, 2, 2, 2, 2, 2, 2, 4, 4, 4, 6, 200, 6, 200, 7, 7, 8, 0, 0, 0, 0})
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 10, 20, 30, 40, 50, 60, 70, 80, 90})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &bytes{data: data}
		w := newWorld(fuzzJob(b))
		for step := 0; step < 300; step++ {
			if step > 0 {
				if !b.more() {
					break
				}
				w.event(b)
			}
			again := Decide(Observed{Job: w.job.DeepCopy(), Pods: w.podList(), Now: w.now})
			prevRetry := w.job.Status.RetryCount
			d, err := w.decide()
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if !reflect.DeepEqual(d, again) {
				t.Fatalf("step %d: two decisions from the same observation differ:\n%+v\n%+v", step, d, again)
			}
			w.checkInvariants(t, d, prevRetry)
			if w.deleted {
				return
			}
		}
		// Left alone, the controller stops acting: no loop of deleting and creating pods.
		for round := range 60 {
			prevRetry := w.job.Status.RetryCount
			ds, err := w.settle(1)
			if err != nil {
				t.Fatalf("settling, round %d: %v", round, err)
			}
			w.checkInvariants(t, ds[0], prevRetry)
			if w.deleted || len(ds[0].Create)+len(ds[0].Delete) == 0 && ds[0].Record == nil {
				return
			}
		}
		t.Fatalf("the controller still acts after 60 decisions without news: phase %s, pods %d", w.job.Status.State.Phase, len(w.pods))
	})
}
