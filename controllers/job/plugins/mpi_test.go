package plugins

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestMPITellsTheLauncherItsWorkers(t *testing.T) {
	p := mustNew(t, "mpi", "--master=mpimaster", "--worker=mpiworker")
	job := newJob(nil, task("mpimaster", 1), task("mpiworker", 3))

	launcher := mutated(t, p, job, "mpimaster", 0)
	for _, c := range allContainers(launcher) {
		assert.Equal(t, map[string]string{
			"MPI_HOST":     "train-mpiworker-0.train,train-mpiworker-1.train,train-mpiworker-2.train",
			"MPI_HOSTFILE": "/etc/tephra/mpiworker.host",
		}, envOf(t, c), c.Name)
	}
	port := []corev1.ContainerPort{{Name: "mpijob-port", ContainerPort: 22, Protocol: corev1.ProtocolTCP}}
	assert.Equal(t, port, launcher.Spec.Containers[0].Ports)

	worker := mutated(t, p, job, "mpiworker", 2)
	assert.Empty(t, envOf(t, worker.Spec.Containers[0]))
	assert.Equal(t, port, worker.Spec.Containers[0].Ports)
}

// TestMPIJobGetsSvcAndSSH applies ForJob's plugins to a job that lists only mpi, as Volcano's
// MPI example does with svc and ssh.
func TestMPIJobGetsSvcAndSSH(t *testing.T) {
	c, scheme := fakeClient(t)
	job := newJob(map[string][]string{"mpi": {"--port=2022"}}, task("master", 1), task("worker", 2))
	plugins, err := ForJob(c, scheme, job)
	require.NoError(t, err)
	for _, p := range plugins {
		require.NoError(t, p.OnJobAdd(context.Background(), job))
	}
	hostfile := get(t, c, &corev1.ConfigMap{}, "train-svc").Data["worker.host"]
	assert.Equal(t, "train-worker-0.train\ntrain-worker-1.train", hostfile)
	get(t, c, &corev1.Secret{}, "train-ssh")

	launcher := newPod(job, "master", 0)
	for _, p := range plugins {
		require.NoError(t, p.OnPodCreate(launcher, job))
	}
	vars := envOf(t, launcher.Spec.Containers[0])
	assert.Equal(t, "train-worker-0.train,train-worker-1.train", vars["MPI_HOST"])
	assert.Equal(t, "train-worker-0.train,train-worker-1.train", vars["TEPHRA_WORKER_HOSTS"])
	var mounts []string
	for _, m := range launcher.Spec.Containers[0].VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	assert.Equal(t, []string{"/etc/tephra", "/etc/volcano", "/root/.ssh"}, mounts)
	assert.Equal(t, int32(2022), launcher.Spec.Containers[0].Ports[0].ContainerPort)
	assert.Equal(t, "train-master-0", launcher.Spec.Hostname)
}
