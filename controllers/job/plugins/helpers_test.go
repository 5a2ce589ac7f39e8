package plugins

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, batchv1alpha1.AddToScheme(scheme))
	return scheme
}

func fakeClient(t *testing.T, objects ...client.Object) (client.Client, *runtime.Scheme) {
	t.Helper()
	scheme := testScheme(t)
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).Build(), scheme
}

// newJob returns a job "train" in namespace "ml" with the given plugins and tasks.
func newJob(plugins map[string][]string, tasks ...batchv1alpha1.TaskSpec) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: types.UID("job-uid")},
		Spec:       batchv1alpha1.JobSpec{Plugins: plugins, Tasks: tasks},
	}
}

func task(name string, replicas int32) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{Name: name, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		Containers:     []corev1.Container{{Name: "main", Image: "busybox"}, {Name: "sidecar", Image: "busybox"}},
	}}}
}

// newPod builds the pod of a task's slot as the Job controller does before it calls the plugins.
func newPod(job *batchv1alpha1.Job, taskName string, index int) *corev1.Pod {
	var spec corev1.PodSpec
	if t := findTask(job, taskName); t != nil {
		spec = *t.Template.Spec.DeepCopy()
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      hostname(job.Name, taskName, index),
			Namespace: job.Namespace,
			Labels: map[string]string{
				batchv1alpha1.JobNameLabel:       job.Name,
				batchv1alpha1.TaskIndexLabel:     strconv.Itoa(index),
				schedulingv1alpha1.TaskLabel:     taskName,
				schedulingv1alpha1.PodGroupLabel: job.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: spec,
	}
}

// mutated runs the plugin's OnPodCreate on the pod of a slot and returns the pod.
func mutated(t *testing.T, p Plugin, job *batchv1alpha1.Job, taskName string, index int) *corev1.Pod {
	t.Helper()
	pod := newPod(job, taskName, index)
	require.NoError(t, p.OnPodCreate(pod, job))
	return pod
}

func mustNew(t *testing.T, name string, args ...string) Plugin {
	t.Helper()
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, name, args)
	require.NoError(t, err)
	return p
}

// envOf returns the variables of a container as a map, failing on a variable set twice.
func envOf(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		_, dup := vars[e.Name]
		require.False(t, dup, "container %s sets %s twice", c.Name, e.Name)
		vars[e.Name] = e.Value
	}
	return vars
}

// allContainers lists the init containers and containers of a pod.
func allContainers(pod *corev1.Pod) []corev1.Container {
	return append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
}

// assertOwnedByJob checks the controller reference of an object a plugin created.
func assertOwnedByJob(t *testing.T, obj metav1.Object, job *batchv1alpha1.Job) {
	t.Helper()
	require.Len(t, obj.GetOwnerReferences(), 1)
	ref := obj.GetOwnerReferences()[0]
	require.Equal(t, job.UID, ref.UID)
	require.Equal(t, "Job", ref.Kind)
	require.Equal(t, batchv1alpha1.SchemeGroupVersion.String(), ref.APIVersion)
	require.Equal(t, job.Name, ref.Name)
	require.NotNil(t, ref.Controller)
	require.True(t, *ref.Controller)
	require.Equal(t, job.Name, obj.GetLabels()[batchv1alpha1.JobNameLabel])
}

func get[T client.Object](t *testing.T, c client.Client, obj T, name string) T {
	t.Helper()
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: name}, obj))
	return obj
}
