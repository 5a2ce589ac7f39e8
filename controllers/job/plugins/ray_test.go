package plugins

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// rayTask is a task whose one container is named after the task, as in Volcano's ray example.
func rayTask(name string, replicas int32) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{Name: name, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: name, Image: "rayproject/ray"}},
	}}}
}

func TestRayStartsTheHeadAndPointsWorkersAtIt(t *testing.T) {
	p := mustNew(t, "ray")
	job := newJob(nil, rayTask("head", 1), rayTask("worker", 2))

	head := mutated(t, p, job, "head", 0)
	assert.Equal(t, []string{"sh", "-c", "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 --ray-client-server-port=10001"},
		head.Spec.Containers[0].Command)
	assert.Equal(t, []corev1.ContainerPort{
		{Name: "gcs", ContainerPort: 6379, Protocol: corev1.ProtocolTCP},
		{Name: "dashboard", ContainerPort: 8265, Protocol: corev1.ProtocolTCP},
		{Name: "client-server", ContainerPort: 10001, Protocol: corev1.ProtocolTCP},
	}, head.Spec.Containers[0].Ports)

	worker := mutated(t, p, job, "worker", 1)
	assert.Equal(t, []string{"sh", "-c", "ray start --block --address=train-head-0.train:6379"}, worker.Spec.Containers[0].Command)
	assert.Empty(t, worker.Spec.Containers[0].Ports)
}

func TestRayArgumentsAndTheTemplatesPorts(t *testing.T) {
	p := mustNew(t, "ray", "--head=driver", "--headContainer=main", "--worker=node", "--workerContainer=main",
		"--port=7000", "--dashboardPort=7001", "--clientServerPort=7002")
	job := newJob(nil, task("driver", 1), task("node", 1))
	job.Spec.Tasks[0].Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "mine", ContainerPort: 7001}}
	head := mutated(t, p, job, "driver", 0)
	assert.Equal(t, "ray start --head --block --dashboard-host=0.0.0.0 --port=7000 --dashboard-port=7001 --ray-client-server-port=7002", head.Spec.Containers[0].Command[2])
	assert.Equal(t, []corev1.ContainerPort{{Name: "mine", ContainerPort: 7001}, {Name: "gcs", ContainerPort: 7000, Protocol: corev1.ProtocolTCP},
		{Name: "client-server", ContainerPort: 7002, Protocol: corev1.ProtocolTCP}}, head.Spec.Containers[0].Ports, "a port the template opens is kept as written")
	assert.Nil(t, head.Spec.Containers[1].Command, "other containers are left alone")
	node := mutated(t, p, job, "node", 0)
	assert.Equal(t, "ray start --block --address=train-driver-0.train:7000", node.Spec.Containers[0].Command[2])
}

func TestRayRefusesWhatCannotWork(t *testing.T) {
	c, scheme := fakeClient(t)
	for args, want := range map[string]string{
		"--port=0":             "plugin ray: --port=0 is not a port",
		"--dashboardPort=6379": "must differ",
		"--head=x --worker=x":  "both name task",
		"--clientPort=70000":   "--clientPort=70000 is not a port",
		"--headContainer":      "flag needs an argument",
		"--unknown=1":          `unknown argument "--unknown=1"`,
	} {
		_, err := New(c, scheme, "ray", strings.Fields(args))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
	p := mustNew(t, "ray")
	job := newJob(nil, rayTask("driver", 1), rayTask("worker", 1))
	err := p.OnPodCreate(newPod(job, "worker", 0), job)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `plugin ray: the job has no task "head" to be the head (--head)`)
	job = newJob(nil, task("head", 1), rayTask("worker", 1))
	err = p.OnPodCreate(newPod(job, "head", 0), job)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `task "head" has no container "head" to run Ray in (--headContainer)`)
}

func TestRayCreatesTheHeadService(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "ray", nil)
	require.NoError(t, err)
	job := newJob(nil, rayTask("head", 1), rayTask("worker", 2))
	require.NoError(t, p.OnJobAdd(context.Background(), job))
	require.NoError(t, p.OnJobAdd(context.Background(), job), "idempotent")
	svc := get(t, c, &corev1.Service{}, "train-head-svc")
	assertOwnedByJob(t, svc, job)
	assert.Equal(t, map[string]string{batchv1alpha1.JobNameLabel: "train", schedulingv1alpha1.TaskLabel: "head"}, svc.Spec.Selector)
	assert.Empty(t, svc.Spec.ClusterIP, "a ClusterIP Service, unlike svc's headless one")
	assert.Equal(t, []corev1.ServicePort{
		{Name: "gcs", Port: 6379, TargetPort: intstr.FromString("gcs"), Protocol: corev1.ProtocolTCP},
		{Name: "dashboard", Port: 8265, TargetPort: intstr.FromString("dashboard"), Protocol: corev1.ProtocolTCP},
		{Name: "client-server", Port: 10001, TargetPort: intstr.FromString("client-server"), Protocol: corev1.ProtocolTCP},
	}, svc.Spec.Ports)
}
