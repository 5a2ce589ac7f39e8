// Package foreign checks the adapters of scheduler-plugins' and Volcano's gang APIs end to end
// (controllers/foreign), with the objects that the Kubeflow, Spark and MPI operators create
// (/docs/integrations.md): the cluster has the optional foreign CRDs and the scheduler answers to
// volcano and scheduler-plugins-scheduler too (manifests/components).
package foreign

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// TestMain installs the shipped overlay for clusters where Tephra replaces scheduler-plugins and
// Volcano: the base, the foreign CRDs and the compatible scheduler names.
func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		Manifests: localcluster.KustomizeManifests(filepath.Join("manifests", "overlays", "foreign-schedulers")),
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// objects is a client for Tephra's and the foreign types.
func objects(t *testing.T, env *framework.Env) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	c, err := client.New(env.Cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// addNode adds one more node to a pool.
func addNode(t *testing.T, env *framework.Env, selector map[string]string, name string, cpus int) {
	t.Helper()
	_, err := env.Kube.CoreV1().Nodes().Create(context.Background(), localcluster.SimulatedNode(name, localcluster.NodeShape{
		CPU: fmt.Sprint(cpus), Memory: "64Gi", Pods: 110, Labels: selector,
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	require.NoError(t, env.Cluster.WaitNodesReady(context.Background(), name))
}

// member is a pod as an operator creates it for a gang scheduler.
type member struct {
	name, scheduler, cpu string
	labels, annotations  map[string]string
	pool                 map[string]string
}

func createPod(t *testing.T, env *framework.Env, ns string, m member) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: ns, Labels: m.labels, Annotations: m.annotations},
		Spec: corev1.PodSpec{
			SchedulerName: m.scheduler,
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  m.pool,
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(m.cpu)}},
			}},
		},
	}
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// bound counts the pods of a namespace bound to a node, among names (all when names is empty).
func bound(t *testing.T, env *framework.Env, ns string, names ...string) int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, pod := range pods.Items {
		if pod.Spec.NodeName == "" {
			continue
		}
		if len(names) == 0 {
			n++
			continue
		}
		for _, name := range names {
			if pod.Name == name {
				n++
			}
		}
	}
	return n
}

// neverBound checks for d that none of the namespace's named pods (all when none named) is bound.
func neverBound(t *testing.T, env *framework.Env, ns string, d time.Duration, names ...string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		require.Zero(t, bound(t, env, ns, names...), "a pod was bound")
	}
}

// mirror returns the Tephra PodGroup of a foreign one, once it exists.
func mirror(t *testing.T, c client.Client, ns, name string) *schedulingv1alpha1.PodGroup {
	t.Helper()
	var pg schedulingv1alpha1.PodGroup
	framework.Eventually(t, 30*time.Second, "the Tephra PodGroup "+name, func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pg)
		return err == nil, fmt.Sprint(err)
	})
	return &pg
}

// gone waits until obj (a key of its kind) no longer exists.
func gone(t *testing.T, c client.Client, obj client.Object, what string) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	framework.Eventually(t, time.Minute, what+" deleted", func() (bool, string) {
		err := c.Get(context.Background(), key, obj)
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
