package bench

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// The two kinds of Job a burst is made of: which controller turns the Jobs into pods.
const (
	// TephraJobKind is batch.tephra.dev/v1alpha1 Jobs: tephra-controllers' Job controller creates
	// each Job's pods, and the PodGroup of a Job of several (a one-pod Job's pod carries its group).
	TephraJobKind = "Tephra"
	// BatchJobKind is batch/v1 Jobs: kube-controller-manager's Job controller creates the pods,
	// with no gang.
	BatchJobKind = "batch/v1"
)

// jobKinds are the kinds in the order a repetition starts from (runOrder rotates it).
var jobKinds = []string{TephraJobKind, BatchJobKind}

// JobShape is what one burst's Jobs look like: N Jobs of one pod, or N/8 Jobs of a gang of 8, so
// that both bursts create N pods.
type JobShape struct {
	// Name is the shape's short name, as the matrix's scenarios have (P, G8): J1 or J8.
	Name string `json:"name"`
	// PodsPerJob is each Job's pods: a Tephra Job's replicas and minAvailable, a batch/v1 Job's
	// parallelism and completions.
	PodsPerJob int    `json:"podsPerJob"`
	Title      string `json:"title"`
}

// JobShapes are the bursts of every repetition.
var JobShapes = []*JobShape{
	{Name: "J1", PodsPerJob: 1, Title: "one-pod Jobs"},
	{Name: "J8", PodsPerJob: 8, Title: "Jobs of a gang of 8 pods"},
}

// jobs is how many Jobs of the shape make a burst of about n pods.
func (sh *JobShape) jobs(n int) int { return n / sh.PodsPerJob }

// jobName is the i-th Job of a burst; both kinds use the same names, one kind at a time.
func (sh *JobShape) jobName(i int) string {
	return fmt.Sprintf("%s-%05d", strings.ToLower(sh.Name), i)
}

// Each burst pod asks for little, so that kwokNodesFor's nodes hold a whole burst with room to
// spare: what is measured is how fast the pods are made and bound, never whether they fit.
var (
	burstPodCPU    = resource.MustParse("10m")
	burstPodMemory = resource.MustParse("16Mi")
)

// burstTaskName is the Tephra Job's one task, a part of its pods' names.
const burstTaskName = "work"

// burstPodTemplate is the pod template of every Job of a burst, of either kind. It has no
// sim.tephra.dev/duration annotation: kwok keeps such a pod Running until it is deleted, so no
// completion (and no controller's work on one) falls inside the measurement.
func burstPodTemplate() corev1.PodTemplateSpec {
	requests := corev1.ResourceList{corev1.ResourceCPU: burstPodCPU, corev1.ResourceMemory: burstPodMemory}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "job-burst"}},
		Spec: corev1.PodSpec{
			// The same scheduler binds both kinds' pods: the comparison is of the controllers.
			SchedulerName: schedulingv1alpha1.SchedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:      "work",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: requests},
			}},
		},
	}
}

// tephraBurstJob is the i-th Tephra Job of a burst: one task of the shape's pods, all of which
// must run at once (minAvailable = replicas), in the default queue.
func tephraBurstJob(sh *JobShape, namespace string, i int) *batchv1alpha1.Job {
	pods := int32(sh.PodsPerJob)
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: sh.jobName(i), Namespace: namespace},
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			Queue:         schedulingv1alpha1.DefaultQueue,
			MinAvailable:  ptr.To(pods),
			Tasks: []batchv1alpha1.TaskSpec{{
				Name:         burstTaskName,
				Replicas:     pods,
				MinAvailable: ptr.To(pods),
				Template:     burstPodTemplate(),
			}},
		},
	}
}

// batchBurstJob is the i-th batch/v1 Job of a burst: parallelism = completions = the shape's
// pods, all started at once. A Job of several pods is Indexed, as a distributed job's workers
// are; batch/v1 has no gang, so its pods are plain pods.
func batchBurstJob(sh *JobShape, namespace string, i int) *batchv1.Job {
	pods := int32(sh.PodsPerJob)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: sh.jobName(i), Namespace: namespace},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods),
			Completions: ptr.To(pods),
			Template:    burstPodTemplate(),
		},
	}
	if pods > 1 {
		job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}
	return job
}

// kwokNodesFor is how many simulated nodes hold a burst of pods: at least 50, and no more than
// 100 burst pods on one (of its 110), so that every pod fits at once whatever the scheduler's
// spread.
func kwokNodesFor(pods int) int {
	return max(minBurstNodes, (pods+maxBurstPodsPerNode-1)/maxBurstPodsPerNode)
}

const (
	minBurstNodes       = 50
	maxBurstPodsPerNode = 100
)
