package plugins

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

func TestSvcCreatesAHeadlessServiceAndTheHostsConfigMap(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "svc", nil)
	require.NoError(t, err)
	job := newJob(nil, task("ps", 1), task("worker-gpu", 3))
	require.NoError(t, p.OnJobAdd(context.Background(), job))

	svc := get(t, c, &corev1.Service{}, "train")
	assertOwnedByJob(t, svc, job)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.Equal(t, map[string]string{batchv1alpha1.JobNameLabel: "train"}, svc.Spec.Selector)
	assert.True(t, svc.Spec.PublishNotReadyAddresses)

	cm := get(t, c, &corev1.ConfigMap{}, "train-svc")
	assertOwnedByJob(t, cm, job)
	assert.Equal(t, map[string]string{
		"ps.host":         "train-ps-0.train",
		"worker-gpu.host": "train-worker-gpu-0.train\ntrain-worker-gpu-1.train\ntrain-worker-gpu-2.train",
	}, cm.Data)
}

func TestSvcPublishNotReadyAddressesCanBeTurnedOff(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "svc", []string{"--publish-not-ready-addresses=false", "--disable-network-policy"})
	require.NoError(t, err)
	job := newJob(nil, task("worker", 1))
	require.NoError(t, p.OnJobAdd(context.Background(), job))
	assert.False(t, get(t, c, &corev1.Service{}, "train").Spec.PublishNotReadyAddresses)
}

func TestSvcOnJobAddIsIdempotentAndFollowsReplicas(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "svc", nil)
	require.NoError(t, err)
	job := newJob(nil, task("worker", 2))
	ctx := context.Background()
	require.NoError(t, p.OnJobAdd(ctx, job))
	svc := get(t, c, &corev1.Service{}, "train")
	cm := get(t, c, &corev1.ConfigMap{}, "train-svc")

	require.NoError(t, p.OnJobAdd(ctx, job))
	assert.Equal(t, svc.ResourceVersion, get(t, c, &corev1.Service{}, "train").ResourceVersion, "the Service is not written again")
	assert.Equal(t, cm.ResourceVersion, get(t, c, &corev1.ConfigMap{}, "train-svc").ResourceVersion, "the ConfigMap is not written again")

	job.Spec.Tasks[0].Replicas = 3
	require.NoError(t, p.OnJobAdd(ctx, job))
	assert.Equal(t, "train-worker-0.train\ntrain-worker-1.train\ntrain-worker-2.train",
		get(t, c, &corev1.ConfigMap{}, "train-svc").Data["worker.host"], "the hosts follow the replicas")
}

func TestSvcRefusesObjectsOfSomethingElse(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"}}
	c, scheme := fakeClient(t, foreign)
	p, err := New(c, scheme, "svc", nil)
	require.NoError(t, err)
	err = p.OnJobAdd(context.Background(), newJob(nil, task("worker", 1)))
	assert.ErrorContains(t, err, "Service ml/train exists and does not belong to job train: delete it, or rename the job")
}

func TestSvcRefusesJobNamesThatCannotNameAService(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "svc", nil)
	require.NoError(t, err)
	job := newJob(nil, task("worker", 1))
	job.Name = "7b-finetune"
	assert.ErrorContains(t, p.OnJobAdd(context.Background(), job), `plugin svc: job name "7b-finetune" cannot name its Service: a DNS-1035 label`)
}

func TestSvcNamesPodsAndTellsThemEveryHost(t *testing.T) {
	p := mustNew(t, "svc")
	job := newJob(nil, task("ps", 2), task("worker-gpu", 3))
	pod := mutated(t, p, job, "worker-gpu", 1)

	assert.Equal(t, "train-worker-gpu-1", pod.Spec.Hostname)
	assert.Equal(t, "train", pod.Spec.Subdomain)
	assert.Equal(t, []corev1.Volume{{Name: "tephra-svc", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "train-svc"}},
	}}}, pod.Spec.Volumes)
	want := map[string]string{
		"TEPHRA_PS_HOSTS":         "train-ps-0.train,train-ps-1.train",
		"TEPHRA_PS_NUM":           "2",
		"TEPHRA_WORKER_GPU_HOSTS": "train-worker-gpu-0.train,train-worker-gpu-1.train,train-worker-gpu-2.train",
		"TEPHRA_WORKER_GPU_NUM":   "3",
		"VC_PS_HOSTS":             "train-ps-0.train,train-ps-1.train",
		"VC_PS_NUM":               "2",
		"VC_WORKER_GPU_HOSTS":     "train-worker-gpu-0.train,train-worker-gpu-1.train,train-worker-gpu-2.train",
		"VC_WORKER_GPU_NUM":       "3",
	}
	for _, c := range allContainers(pod) {
		assert.Equal(t, want, envOf(t, c), c.Name)
		assert.Equal(t, []corev1.VolumeMount{
			{Name: "tephra-svc", MountPath: "/etc/tephra", ReadOnly: true},
			{Name: "tephra-svc", MountPath: "/etc/volcano", ReadOnly: true},
		}, c.VolumeMounts, c.Name)
	}
}

func TestSvcLeavesTheTemplatesMountsAlone(t *testing.T) {
	p := mustNew(t, "svc")
	job := newJob(nil, task("worker", 1))
	mine := corev1.VolumeMount{Name: "config", MountPath: "/etc/volcano"}
	job.Spec.Tasks[0].Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mine}
	pod := mutated(t, p, job, "worker", 0)
	require.NoError(t, p.OnPodCreate(pod, job), "a second call changes nothing")
	assert.Len(t, pod.Spec.Volumes, 1)
	assert.Equal(t, []corev1.VolumeMount{mine, {Name: "tephra-svc", MountPath: "/etc/tephra", ReadOnly: true}},
		pod.Spec.Containers[0].VolumeMounts)
}

func TestSvcRefusesNamesThatCannotBeHostNames(t *testing.T) {
	p := mustNew(t, "svc")
	job := newJob(nil, task("worker", 1))
	job.Name = "team.train"
	assert.ErrorContains(t, p.OnPodCreate(newPod(job, "worker", 0), job), `job name "team.train" cannot be its pods' DNS subdomain`)

	job = newJob(nil, task(strings.Repeat("w", 60), 1))
	assert.ErrorContains(t, p.OnPodCreate(newPod(job, job.Spec.Tasks[0].Name, 0), job), "cannot be its host name (shorten the job or task name)")
}
