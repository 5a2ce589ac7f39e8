package plugins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestEnvSetsTheTaskIndexEverywhere(t *testing.T) {
	p := mustNew(t, "env")
	job := newJob(nil, task("ps", 1), task("worker", 3))
	pod := mutated(t, p, job, "worker", 2)
	for _, c := range allContainers(pod) {
		assert.Equal(t, map[string]string{"TEPHRA_TASK_INDEX": "2", "VC_TASK_INDEX": "2", "VK_TASK_INDEX": "2"}, envOf(t, c), c.Name)
	}
}

func TestEnvLeavesTheTemplatesVariablesAlone(t *testing.T) {
	p := mustNew(t, "env")
	job := newJob(nil, task("worker", 3))
	job.Spec.Tasks[0].Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VC_TASK_INDEX", Value: "mine"}}
	pod := mutated(t, p, job, "worker", 1)
	assert.NoError(t, p.OnPodCreate(pod, job), "a second call changes nothing")
	assert.Equal(t, map[string]string{"VC_TASK_INDEX": "mine", "TEPHRA_TASK_INDEX": "1", "VK_TASK_INDEX": "1"}, envOf(t, pod.Spec.Containers[0]))
}

func TestEnvNeedsTheIndexLabel(t *testing.T) {
	p := mustNew(t, "env")
	job := newJob(nil, task("worker", 3))
	pod := newPod(job, "worker", 0)
	delete(pod.Labels, "batch.tephra.dev/task-index")
	assert.ErrorContains(t, p.OnPodCreate(pod, job), "pod train-worker-0 has no task index in its batch.tephra.dev/task-index label")
}
