package job

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const testNamespace = "team-a"

// newTask is a task of replicas pods asking for cpu each.
func newTask(name string, replicas int32, cpu string) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{
		Name:     name,
		Replicas: replicas,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse(cpu),
						corev1.ResourceMemory: resource.MustParse("1Gi"),
					}},
				}},
			},
		},
	}
}

// newJob is a Running job "train" of 2 ps and 4 workers with maxRetry 3, changed by mutate.
func newJob(mutate ...func(*batchv1alpha1.Job)) *batchv1alpha1.Job {
	job := &batchv1alpha1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "train", Namespace: testNamespace, UID: "job-uid", Generation: 1,
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
		},
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: "tephra-scheduler",
			Queue:         "default",
			MaxRetry:      3,
			Tasks:         []batchv1alpha1.TaskSpec{newTask("ps", 2, "1"), newTask("worker", 4, "2")},
		},
		Status: batchv1alpha1.JobStatus{State: batchv1alpha1.JobState{
			Phase: batchv1alpha1.JobRunning, Reason: ReasonRunning, LastTransitionTime: metav1.NewTime(t0.Add(-30 * time.Minute)),
		}},
	}
	for _, f := range mutate {
		f(job)
	}
	return job
}

func withPhase(phase batchv1alpha1.JobPhase, reason string) func(*batchv1alpha1.Job) {
	return func(j *batchv1alpha1.Job) { j.Status.State.Phase, j.Status.State.Reason = phase, reason }
}

func withPolicies(policies ...batchv1alpha1.LifecyclePolicy) func(*batchv1alpha1.Job) {
	return func(j *batchv1alpha1.Job) { j.Spec.Policies = policies }
}

func withTaskPolicies(task int, policies ...batchv1alpha1.LifecyclePolicy) func(*batchv1alpha1.Job) {
	return func(j *batchv1alpha1.Job) { j.Spec.Tasks[task].Policies = policies }
}

func withRecord(rec runRecord) func(*batchv1alpha1.Job) {
	return func(j *batchv1alpha1.Job) {
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations[RestartsAnnotation] = rec.encode()
	}
}

func onEvent(e batchv1alpha1.Event, a batchv1alpha1.Action) batchv1alpha1.LifecyclePolicy {
	return batchv1alpha1.LifecyclePolicy{Event: e, Action: a}
}

func onExit(code int32, a batchv1alpha1.Action) batchv1alpha1.LifecyclePolicy {
	return batchv1alpha1.LifecyclePolicy{ExitCode: ptr.To(code), Action: a}
}

// podState is what a test pod is doing.
type podState struct {
	phase       corev1.PodPhase
	exitCode    int32
	terminating bool
	// disruption, when set, is the reason of a DisruptionTarget condition (as evictions set it).
	disruption string
	retry      int32
	generation int32
	// finished is when its container ended (t0 if zero).
	finished time.Time
}

func running() podState   { return podState{phase: corev1.PodRunning} }
func pending() podState   { return podState{phase: corev1.PodPending} }
func succeeded() podState { return podState{phase: corev1.PodSucceeded} }
func failed(code int32) podState {
	return podState{phase: corev1.PodFailed, exitCode: code}
}

// newTestPod is the pod of a slot of job in state s, as the controller would have created it.
func newTestPod(job *batchv1alpha1.Job, task string, index int32, s podState) corev1.Pod {
	view := viewSpec(job)
	spec, _ := view.task(task)
	var taskSpec *batchv1alpha1.TaskSpec
	if spec != nil {
		taskSpec = spec.spec
	} else {
		ts := newTask(task, 1, "1")
		taskSpec = &ts
	}
	pod := NewPod(job, taskSpec, index, s.retry, s.generation)
	pod.UID = types.UID(fmt.Sprintf("%s-r%d-g%d", pod.Name, s.retry, s.generation))
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Minute))
	pod.Status.Phase = s.phase
	if s.terminating {
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(-time.Second)))
	}
	if s.disruption != "" {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: s.disruption, LastTransitionTime: metav1.NewTime(t0.Add(-time.Second))})
	}
	finished := s.finished
	if finished.IsZero() {
		finished = t0
	}
	switch s.phase {
	case corev1.PodFailed:
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: max(s.exitCode, 1), FinishedAt: metav1.NewTime(finished)}}}}
	case corev1.PodSucceeded:
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.NewTime(finished)}}}}
	}
	return *pod
}

// podsOf are the pods of all slots of the job's tasks, in the given state unless overridden by
// name suffix ("worker-1").
func podsOf(job *batchv1alpha1.Job, s podState, overrides map[string]podState) []corev1.Pod {
	var pods []corev1.Pod
	for _, t := range job.Spec.Tasks {
		for i := range t.Replicas {
			state := s
			if o, ok := overrides[fmt.Sprintf("%s-%d", t.Name, i)]; ok {
				state = o
			}
			if state.phase == "" {
				continue // no pod in this slot
			}
			pods = append(pods, newTestPod(job, t.Name, i, state))
		}
	}
	return pods
}

func deletedNames(d Decision) []string {
	var out []string
	for _, del := range d.Delete {
		out = append(out, del.Name)
	}
	sort.Strings(out)
	return out
}

func createdNames(job *batchv1alpha1.Job, d Decision) []string {
	var out []string
	for _, s := range d.Create {
		out = append(out, PodName(job.Name, s.Task, s.Index))
	}
	sort.Strings(out)
	return out
}

func actionNames(d Decision) []string {
	var out []string
	for _, a := range d.Actions {
		out = append(out, string(a.Action))
	}
	return out
}

// world is a job and its pods in memory, to which decisions are applied as the reconciler and
// the apiserver would: the fuzz test and multi-step tests run the state machine in it.
type world struct {
	job  *batchv1alpha1.Job
	pods map[string]*corev1.Pod
	now  time.Time
	uids int
	// deleted is set once the job is deleted.
	deleted bool
}

func newWorld(job *batchv1alpha1.Job) *world {
	return &world{job: job, pods: map[string]*corev1.Pod{}, now: t0}
}

func (w *world) podList() []corev1.Pod {
	names := make([]string, 0, len(w.pods))
	for name := range w.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]corev1.Pod, 0, len(names))
	for _, name := range names {
		out = append(out, *w.pods[name].DeepCopy())
	}
	return out
}

// decide runs the state machine on the world and applies its decision. It returns the decision
// and an error describing a decision no apiserver would accept (creating a pod over an existing
// one).
func (w *world) decide() (Decision, error) {
	d := Decide(Observed{Job: w.job.DeepCopy(), Pods: w.podList(), Now: w.now})
	if d.Record != nil || d.ConsumeResume {
		if w.job.Annotations == nil {
			w.job.Annotations = map[string]string{}
		}
		if d.Record != nil {
			w.job.Annotations[RestartsAnnotation] = *d.Record
		}
		if d.ConsumeResume {
			delete(w.job.Annotations, ResumeAnnotation)
		}
	}
	w.job.Status = d.Status
	for _, del := range d.Delete {
		pod, ok := w.pods[del.Name]
		if !ok || pod.UID != del.UID {
			continue
		}
		if pod.Spec.NodeName == "" {
			delete(w.pods, del.Name) // an unbound pod goes at once
		} else if pod.DeletionTimestamp == nil {
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
		}
	}
	spec := viewSpec(w.job)
	for _, slot := range d.Create {
		t, ok := spec.task(slot.Task)
		if !ok {
			return d, fmt.Errorf("created a pod of unknown task %s", slot.Task)
		}
		if slot.Index >= t.replicas {
			return d, fmt.Errorf("created pod %s-%d beyond the task's %d replicas", slot.Task, slot.Index, t.replicas)
		}
		pod := NewPod(w.job, t.spec, slot.Index, w.job.Status.RetryCount, slot.Generation)
		if _, taken := w.pods[pod.Name]; taken {
			return d, fmt.Errorf("created pod %s, which exists", pod.Name)
		}
		w.uids++
		pod.UID = types.UID("uid-" + strconv.Itoa(w.uids))
		pod.CreationTimestamp = metav1.NewTime(w.now)
		pod.Status.Phase = corev1.PodPending
		w.pods[pod.Name] = pod
	}
	if d.DeleteJob {
		w.deleted = true
	}
	return d, nil
}

// settle decides until nothing changes any more (at most n rounds), as the controller would
// on the events of its own writes; it returns every decision taken.
func (w *world) settle(n int) ([]Decision, error) {
	var out []Decision
	for range n {
		before := w.job.DeepCopy()
		beforePods := len(w.pods)
		d, err := w.decide()
		out = append(out, d)
		if err != nil {
			return out, err
		}
		// Deletions of bound pods complete.
		for name, pod := range w.pods {
			if pod.DeletionTimestamp != nil {
				delete(w.pods, name)
			}
		}
		if len(d.Delete) == 0 && len(d.Create) == 0 && beforePods == len(w.pods) &&
			before.Status.State == w.job.Status.State && before.Annotations[RestartsAnnotation] == w.job.Annotations[RestartsAnnotation] {
			return out, nil
		}
	}
	return out, nil
}

// set changes the phase of the world's pods whose names end in the given suffixes (all if none).
func (w *world) set(s podState, suffixes ...string) {
	for name, pod := range w.pods {
		match := len(suffixes) == 0
		for _, suffix := range suffixes {
			if len(name) >= len(suffix) && name[len(name)-len(suffix):] == suffix {
				match = true
			}
		}
		if !match || pod.DeletionTimestamp != nil {
			continue
		}
		pod.Spec.NodeName = "node-0"
		pod.Status.Phase = s.phase
		pod.Status.ContainerStatuses = nil
		if s.phase == corev1.PodFailed || s.phase == corev1.PodSucceeded {
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: s.exitCode, FinishedAt: metav1.NewTime(w.now)}}}}
		}
	}
}
