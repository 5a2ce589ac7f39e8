package plugins

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// hostname is the host name of a job's pod, also its pod name: <job>-<task>-<index>.
func hostname(job, task string, index int) string {
	return fmt.Sprintf("%s-%s-%d", job, task, index)
}

// hosts lists the names by which the pods of a task reach each other through the svc plugin's
// Service: <job>-<task>-<index>.<job>, which resolves in the job's namespace.
func hosts(job *batchv1alpha1.Job, task *batchv1alpha1.TaskSpec) []string {
	names := make([]string, 0, task.Replicas)
	for i := range int(task.Replicas) {
		names = append(names, hostname(job.Name, task.Name, i)+"."+job.Name)
	}
	return names
}

// taskVar names a per-task environment variable: <prefix>_<TASK>_<suffix>, with the task name
// upper-cased and its dashes turned into underscores.
func taskVar(prefix, task, suffix string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(task, "-", "_")) + "_" + suffix
}

// findTask returns the job's task of that name, or nil.
func findTask(job *batchv1alpha1.Job, name string) *batchv1alpha1.TaskSpec {
	for i := range job.Spec.Tasks {
		if job.Spec.Tasks[i].Name == name {
			return &job.Spec.Tasks[i]
		}
	}
	return nil
}

// replicas is the task's replicas, 0 for a task the job does not have.
func replicas(task *batchv1alpha1.TaskSpec) int {
	if task == nil {
		return 0
	}
	return int(task.Replicas)
}

// podSlot reads a pod's task and index from the labels the Job controller gives it.
func podSlot(pod *corev1.Pod) (task string, index int, err error) {
	task = pod.Labels[schedulingv1alpha1.TaskLabel]
	if task == "" {
		return "", 0, fmt.Errorf("pod %s has no %s label", pod.Name, schedulingv1alpha1.TaskLabel)
	}
	index, err = strconv.Atoi(pod.Labels[batchv1alpha1.TaskIndexLabel])
	if err != nil || index < 0 {
		return "", 0, fmt.Errorf("pod %s has no task index in its %s label", pod.Name, batchv1alpha1.TaskIndexLabel)
	}
	return task, index, nil
}
