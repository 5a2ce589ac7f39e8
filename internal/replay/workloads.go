package replay

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/replay/trace"
)

// namespace holds every object of a replay.
const namespace = "replay"

// Labels and annotations of the replay's pods.
const (
	// jobLabel names the trace job a pod belongs to (its Kubernetes name, jobNames).
	jobLabel = "replay.tephra.dev/job"
	// indexLabel is the pod's index in its job, which a pod created again keeps.
	indexLabel = "replay.tephra.dev/index"
	// durationAnnotation is kwok's: a running pod ends at the time it holds (manifests/kwok).
	durationAnnotation = "sim.tephra.dev/duration"
)

// taskName is the one task of a trace job's Tephra Job.
const taskName = "worker"

// jobNames gives each trace job a Kubernetes name: its own, lower-cased, with what a DNS label
// may not hold replaced by '-', cut to 40 characters, and suffixed with its row when that is
// taken, so that every job has one whatever the trace calls it.
func jobNames(jobs []trace.Job) []string {
	names := make([]string, len(jobs))
	taken := map[string]bool{}
	for i, j := range jobs {
		name := dnsLabel(j.Name, 40)
		if name == "" || taken[name] {
			name = dnsLabel(fmt.Sprintf("%s-%d", name, i), 50)
		}
		taken[name] = true
		names[i] = name
	}
	return names
}

func dnsLabel(s string, limit int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > limit {
		out = out[:limit]
	}
	out = strings.Trim(out, "-")
	if out != "" && len(validation.IsDNS1123Label(out)) > 0 {
		return ""
	}
	return out
}

// priorityClassName is the PriorityClass of a trace priority.
func priorityClassName(p int32) string {
	if p < 0 {
		return fmt.Sprintf("replay-priority-minus-%d", -int64(p))
	}
	return fmt.Sprintf("replay-priority-%d", p)
}

// createPriorityClasses creates a PriorityClass for each priority the trace names.
func createPriorityClasses(ctx context.Context, client kubernetes.Interface, jobs []trace.Job) error {
	done := map[int32]bool{}
	for _, j := range jobs {
		if !j.HasPriority || done[j.Priority] {
			continue
		}
		done[j.Priority] = true
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClassName(j.Priority)}, Value: j.Priority,
			Description: "a priority of the replayed trace"}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("PriorityClass %s: %w", pc.Name, err)
		}
	}
	return nil
}

// podTemplate is a trace job's pod, in any configuration.
func podTemplate(j trace.Job, name string) corev1.PodTemplateSpec {
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(j.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(j.Memory),
	}
	if j.GPUs > 0 {
		requests[localcluster.GPUResource] = *resource.NewQuantity(int64(j.GPUs), resource.DecimalSI)
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobLabel: name}},
		Spec: corev1.PodSpec{
			SchedulerName:                 schedulingv1alpha1.SchedulerName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "main", Image: "replay.tephra.dev/job",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests},
			}},
		},
	}
	if j.HasPriority {
		t.Spec.PriorityClassName = priorityClassName(j.Priority)
	}
	return t
}

// workloads creates a trace job's objects in one configuration's API.
type workloads struct {
	config *Configuration
	client kubernetes.Interface
	tephra versioned.Interface
	// speedup divides the trace's times, for the estimates and SLA waiting times of backfill.
	speedup float64
}

// submit creates the job: a Tephra Job (C), or its pods (B0), or its pods and, for a gang, an
// upstream PodGroup (B1), or a batch/v1 Job (B1j).
func (w *workloads) submit(ctx context.Context, j trace.Job, name string) error {
	switch w.config.Gangs {
	case TephraJobs:
		return w.createTephraJob(ctx, j, name)
	case BatchJobs:
		if _, err := w.client.BatchV1().Jobs(namespace).Create(ctx, batchJob(j, name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Job %s: %w", name, err)
		}
		return nil
	}
	if w.config.Gangs == UpstreamGangs && j.MinReplicas > 1 {
		if _, err := w.client.SchedulingV1beta1().PodGroups(namespace).Create(ctx, upstreamPodGroup(j, name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the PodGroup of job %s: %w", name, err)
		}
	}
	for i := range j.Replicas {
		if err := w.createPod(ctx, j, name, i, fmt.Sprintf("%s-%d", name, i)); err != nil {
			return err
		}
	}
	return nil
}

// upstreamPodGroup is the gang of a job of a minimum above one in B1: a PodGroup with a gang
// policy of its minimum, of its pods' priority. kube-scheduler refuses to place a group whose
// pods' priority is not the group's own, so a gang with a trace priority would otherwise wait
// for good.
func upstreamPodGroup(j trace.Job, name string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{jobLabel: name}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(j.MinReplicas)},
		}},
	}
	if j.HasPriority {
		pg.Spec.PriorityClassName = priorityClassName(j.Priority)
	}
	return pg
}

// declareData makes the pods of a job that reads a dataset declare it, in the configurations
// with DataLocality.
func (w *workloads) declareData(t *corev1.PodTemplateSpec, j trace.Job) {
	if w.config.DataLocality && j.Dataset != "" {
		t.Annotations = map[string]string{datasets.Annotation: j.Dataset}
	}
}

// createPod creates pod index of job name (B0, B1), under podName.
func (w *workloads) createPod(ctx context.Context, j trace.Job, name string, index int, podName string) error {
	t := podTemplate(j, name)
	w.declareData(&t, j)
	pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	pod.Name, pod.Namespace = podName, namespace
	pod.Labels[indexLabel] = strconv.Itoa(index)
	if w.config.Gangs == UpstreamGangs && j.MinReplicas > 1 {
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	}
	if _, err := w.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s: %w", podName, err)
	}
	return nil
}

// createTephraJob creates a Tephra Job of one task of the job's replicas, with its minimum, in
// its queue.
func (w *workloads) createTephraJob(ctx context.Context, j trace.Job, name string) error {
	t := podTemplate(j, name)
	w.declareData(&t, j)
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{jobLabel: name}},
		Spec: batchv1alpha1.JobSpec{
			Queue:             j.Queue,
			MinAvailable:      ptr.To(int32(j.MinReplicas)),
			PriorityClassName: t.Spec.PriorityClassName,
			Tasks:             []batchv1alpha1.TaskSpec{{Name: taskName, Replicas: int32(j.Replicas), Template: t}},
		},
	}
	if w.config.Backfill || w.config.ShortestFirstBound > 0 {
		w.estimate(job, j)
	}
	if w.config.Backfill {
		w.backfill(job, j)
	}
	if _, err := w.tephra.BatchV1alpha1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Job %s: %w", name, err)
	}
	return nil
}

// batchJob is a trace job as a batch/v1 Job for upstream's Job controller (B1j): its pods run
// at once (parallelism = completions = replicas), Indexed when there are several, as distributed
// training Jobs are written. A job of a minimum above one states a gang of its minimum in
// spec.scheduling; the Job controller then creates its Workload and PodGroup and names the
// PodGroup in its pods (WorkloadWithJob). A job without one is scheduled pod by pod.
//
// The Job controller, not the driver, creates a pod again when one is deleted before the job is
// done; the Job must survive every such deletion (a preemption) to be comparable with the other
// configurations, where a preempted job starts again:
//   - backoffLimit is the largest there is: kwok's pods never fail by themselves, so only
//     deletions count against it;
//   - podReplacementPolicy is TerminatingOrFailed, the default without a podFailurePolicy: a
//     deleted pod counts as failed and is replaced as soon as it is deleted. A podFailurePolicy
//     that ignored DisruptionTarget would force the policy Failed, which waits for the deleted
//     pod to reach phase Failed: only a kubelet sets that, and kwok deletes the pod instead, so
//     the Job would keep its finalizer on the pod and wait for good.
//
// A replacement after a deletion waits for the Job controller's backoff after failures (10 s of
// wall clock, doubling), which is not played at the speedup (docs/replay.md, "What is compared").
func batchJob(j trace.Job, name string) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{jobLabel: name}},
		Spec: batchv1.JobSpec{
			Parallelism:          ptr.To(int32(j.Replicas)),
			Completions:          ptr.To(int32(j.Replicas)),
			BackoffLimit:         ptr.To(int32(math.MaxInt32)),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			// The template's jobLabel is on every pod the Job controller creates: the driver
			// finds the job's pods by it.
			Template: podTemplate(j, name),
		},
	}
	if j.Replicas > 1 {
		job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}
	if j.MinReplicas > 1 {
		job.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{
			SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To(int32(j.MinReplicas))},
			},
		}
	}
	return job
}

// estimate states the job's runtime estimate, its trace duration played at the speedup, rounded
// up to whole seconds and a second more (the PodGroup controller counts from its Scheduled
// condition, which has whole seconds).
func (w *workloads) estimate(job *batchv1alpha1.Job, j trace.Job) {
	estimate := int32(math.Ceil(j.Duration/w.speedup)) + 1
	job.Spec.RuntimeEstimateSeconds = &estimate
}

// backfill gives a big gang an SLA waiting time (none where the head of each queue reserves).
func (w *workloads) backfill(job *batchv1alpha1.Job, j trace.Job) {
	if j.GPUs*j.Replicas >= backfillGangGPUs && !w.config.QueueHeadReservations {
		sla := time.Duration(float64(backfillSLA) / w.speedup).Round(100 * time.Millisecond)
		job.Annotations = map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: sla.String()}
	}
}

// remove deletes what is left of a job once its work is done: its Tephra Job or batch/v1 Job
// (whose pods, and Workload and PodGroup, go with it), or its pods and PodGroup.
func (w *workloads) remove(ctx context.Context, name string, pods []string) error {
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	var err error
	switch w.config.Gangs {
	case TephraJobs:
		err = w.tephra.BatchV1alpha1().Jobs(namespace).Delete(ctx, name, now)
	case BatchJobs:
		err = w.client.BatchV1().Jobs(namespace).Delete(ctx, name, now)
	default:
		return w.removePods(ctx, name, pods, now)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// removePods deletes a job's bare pods and its PodGroup (B0, B1).
func (w *workloads) removePods(ctx context.Context, name string, pods []string, now metav1.DeleteOptions) error {
	for _, pod := range pods {
		if err := w.client.CoreV1().Pods(namespace).Delete(ctx, pod, now); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if w.config.Gangs == UpstreamGangs {
		if err := w.client.SchedulingV1beta1().PodGroups(namespace).Delete(ctx, name, now); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
