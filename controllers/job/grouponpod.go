package job

import (
	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/datasets"
)

// groupOnPod says whether a job's gang is carried by its one pod (schedulingv1alpha1.GroupOnPod)
// rather than by a PodGroup object. An object costs a Job one more apiserver write, its status
// writes, and an event to every informer of PodGroups; in a burst of one-pod Jobs the apiserver's
// time is what bounds how soon they become pods. A gang of one needs no object unless
// the job asks for what only an object holds: a topology, a ready timeout, a runtime estimate
// (the PodGroup controller enforces the one and reports the overrun of the other), or
// sub-groups. groupObjects is set when the controllers enforce a default ready timeout, which
// every group then needs an object for.
func groupOnPod(job *batchv1alpha1.Job, groupObjects bool) bool {
	if groupObjects || job.Spec.Topology != nil || job.Spec.ReadyTimeoutSeconds != nil || job.Spec.RuntimeEstimateSeconds != nil {
		return false
	}
	var pods int32
	for _, t := range job.Spec.Tasks {
		if t.SubGroups != nil {
			return false
		}
		pods += t.Replicas
	}
	return pods == 1
}

// carryGroup makes a job's pod carry its group of one: the queue, and the job's annotations a
// PodGroup would carry (passedToGroup), but the job's datasets only when the pod declares none of
// its own: a member's own declaration wins over its group's.
func carryGroup(pod *corev1.Pod, job *batchv1alpha1.Job) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[schedulingv1alpha1.GroupOnPodAnnotation] = "true"
	pod.Labels[schedulingv1alpha1.QueueLabel] = queueOf(job)
	ownData := datasets.Declares(pod.Annotations)
	for _, key := range passedToGroup {
		v, ok := job.Annotations[key]
		if !ok || ownData && (key == schedulingv1alpha1.DatasetsAnnotation || key == schedulingv1alpha1.DataLocalityAnnotation) {
			continue
		}
		pod.Annotations[key] = v
	}
}
