package plugins

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestVolcanoNames checks that images written for Volcano's job plugins find what they read
// under the names Volcano gives it: the variables of env, svc, mpi, pytorch and tensorflow, the
// hosts files of svc, and the ray head's Service and ports. The names are Volcano's, from its
// plugins' sources and user guides; a rename on Tephra's side fails here.
func TestVolcanoNames(t *testing.T) {
	job := newJob(map[string][]string{"env": nil, "svc": nil, "mpi": nil, "pytorch": nil, "tensorflow": nil},
		task("master", 1), task("worker", 2), task("ps", 1), task("mpimaster", 1))
	c, scheme := fakeClient(t)
	plugins, err := ForJob(c, scheme, job)
	require.NoError(t, err)
	pod := newPod(job, "worker", 1)
	for _, p := range plugins {
		require.NoError(t, p.OnPodCreate(pod, job), p.Name())
	}
	vars := envOf(t, pod.Spec.Containers[0])
	for name, want := range map[string]string{
		// env
		"VC_TASK_INDEX": "1",
		"VK_TASK_INDEX": "1",
		// svc: every task's hosts and replicas
		"VC_WORKER_HOSTS":    "train-worker-0.train,train-worker-1.train",
		"VC_WORKER_NUM":      "2",
		"VC_MASTER_HOSTS":    "train-master-0.train",
		"VC_PS_NUM":          "1",
		"VC_MPIMASTER_HOSTS": "train-mpimaster-0.train",
		// pytorch
		"MASTER_ADDR": "train-master-0.train",
		"MASTER_PORT": "23456",
		"WORLD_SIZE":  "3",
		"RANK":        "2",
	} {
		assert.Equal(t, want, vars[name], name)
	}
	for _, name := range []string{"TF_CONFIG"} {
		assert.Contains(t, vars, name)
	}
	assert.True(t, slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/volcano" }),
		"svc's hosts files under /etc/volcano/<task>.host")

	mpiJob := newJob(map[string][]string{"mpi": nil}, task("master", 1), task("worker", 2))
	plugins, err = ForJob(c, scheme, mpiJob)
	require.NoError(t, err)
	master := newPod(mpiJob, "master", 0)
	for _, p := range plugins {
		require.NoError(t, p.OnPodCreate(master, mpiJob), p.Name())
	}
	assert.Equal(t, "train-worker-0.train,train-worker-1.train", envOf(t, master.Spec.Containers[0])["MPI_HOST"])

	assert.Equal(t, "train-head-svc", RayHeadServiceName("train"))
	assert.Equal(t, []string{"gcs", "dashboard", "client-server"}, []string{RayGCSPortName, RayDashboardPortName, RayClientPortName})
}
