package plugins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestPyTorchRanksMastersThenWorkers(t *testing.T) {
	p := mustNew(t, "pytorch", "--master=leader", "--worker=follower")
	job := newJob(nil, task("leader", 2), task("follower", 3), task("tensorboard", 1))
	for _, tc := range []struct {
		task  string
		index int
		rank  string
	}{{"leader", 0, "0"}, {"leader", 1, "1"}, {"follower", 0, "2"}, {"follower", 1, "3"}, {"follower", 2, "4"}} {
		pod := mutated(t, p, job, tc.task, tc.index)
		for _, c := range allContainers(pod) {
			assert.Equal(t, map[string]string{
				"MASTER_ADDR": "train-leader-0.train",
				"MASTER_PORT": "23456",
				"WORLD_SIZE":  "5",
				"RANK":        tc.rank,
			}, envOf(t, c), "%s-%d %s", tc.task, tc.index, c.Name)
		}
		assert.Equal(t, []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456, Protocol: corev1.ProtocolTCP}},
			pod.Spec.Containers[0].Ports)
		assert.Empty(t, pod.Spec.Containers[1].Ports)
	}
	other := mutated(t, p, job, "tensorboard", 0)
	assert.Empty(t, envOf(t, other.Spec.Containers[0]), "tasks that are neither master nor worker are left alone")
}

func TestPyTorchDefaultsAndPort(t *testing.T) {
	p := mustNew(t, "pytorch", "--port=29500")
	job := newJob(nil, task("master", 1), task("worker", 2))
	pod := mutated(t, p, job, "worker", 1)
	assert.Equal(t, map[string]string{"MASTER_ADDR": "train-master-0.train", "MASTER_PORT": "29500", "WORLD_SIZE": "3", "RANK": "2"},
		envOf(t, pod.Spec.Containers[0]))
	assert.Equal(t, int32(29500), pod.Spec.Containers[0].Ports[0].ContainerPort)
}

func TestPyTorchWithoutWorkers(t *testing.T) {
	p := mustNew(t, "pytorch")
	pod := mutated(t, p, newJob(nil, task("master", 1)), "master", 0)
	assert.Equal(t, "1", envOf(t, pod.Spec.Containers[0])["WORLD_SIZE"])
	assert.Equal(t, "0", envOf(t, pod.Spec.Containers[0])["RANK"])
}

func TestPyTorchNeedsItsMaster(t *testing.T) {
	p := mustNew(t, "pytorch", "--master=chief")
	job := newJob(nil, task("master", 1), task("worker", 2))
	err := p.OnPodCreate(newPod(job, "worker", 0), job)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `plugin pytorch: the job has no task "chief" to be the master (--master)`)
}

func TestPyTorchKeepsTheTemplatesPort(t *testing.T) {
	p := mustNew(t, "pytorch")
	job := newJob(nil, task("master", 1))
	mine := corev1.ContainerPort{Name: "dist", ContainerPort: 23456}
	job.Spec.Tasks[0].Template.Spec.Containers[1].Ports = []corev1.ContainerPort{mine}
	pod := mutated(t, p, job, "master", 0)
	assert.Empty(t, pod.Spec.Containers[0].Ports)
	assert.Equal(t, []corev1.ContainerPort{mine}, pod.Spec.Containers[1].Ports)
}
