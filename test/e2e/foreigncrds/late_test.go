// Package foreigncrds checks tephra-controllers on a cluster installed without the foreign CRDs
// (the default install): the adapters of controllers/foreign do not stop it, and each starts
// when its CRD is installed later.
package foreigncrds

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/foreign"
	"github.com/tephra-dev/tephra/controllers/upstream"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// Without the foreign CRDs tephra-controllers runs its own controllers and says which adapters
// wait; once the scheduler-plugins CRD is installed, its adapter starts and a gang of that API
// is scheduled.
func TestAdapterStartsWhenItsCRDIsInstalled(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	logPath := env.Cluster.LogPath(localcluster.Controllers)
	framework.Eventually(t, 30*time.Second, "the controllers' log naming the adapters that wait", func() (bool, string) {
		data, _ := os.ReadFile(logPath)
		for _, name := range []string{foreign.SchedulerPluginsControllerName, foreign.VolcanoPodGroupControllerName, foreign.VolcanoQueueControllerName, upstream.ControllerName} {
			if !logHas(string(data), "adapter not started", name) {
				return false, "log without adapter not started for " + name
			}
		}
		return true, ""
	})
	// Tephra's own controllers run: the default queues exist (TestMain) and a Tephra gang runs.
	ns := env.Namespace(t)
	selector := map[string]string{"e2e.tephra.dev/pool": "late"}
	_, err := env.Cluster.CreateNodes(ctx, "late", 1, localcluster.NodeShape{CPU: "4", Memory: "16Gi", Pods: 110, Labels: selector})
	require.NoError(t, err)

	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "manifests", "components", "foreign-crds", "scheduling.x-k8s.io_podgroups.yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(data, &crd))
	crds := apiextensionsclient.NewForConfigOrDie(env.Cluster.Config).ApiextensionsV1().CustomResourceDefinitions()
	_, err = crds.Create(ctx, &crd, metav1.CreateOptions{})
	require.NoError(t, err)

	scheme := runtime.NewScheme()
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	c, err := client.New(env.Cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	pg := &schedulerpluginsv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns}, Spec: schedulerpluginsv1alpha1.PodGroupSpec{MinMember: 2}}
	framework.Eventually(t, 30*time.Second, "the scheduler-plugins PodGroup created", func() (bool, string) {
		err := c.Create(ctx, pg)
		return err == nil, fmt.Sprint(err)
	})
	for i := range 2 {
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("late-%d", i), Labels: map[string]string{schedulingv1alpha1.CoschedulingPodGroupLabel: "late"}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, NodeSelector: selector, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	framework.Eventually(t, time.Minute, "the gang bound through the adapter started late", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d of 2 bound; events of late-0: %s", n, env.Events(ns, "late-0"))
	})
	logData, _ := os.ReadFile(logPath)
	require.True(t, logHas(string(logData), "adapter started: its API is served now", foreign.SchedulerPluginsControllerName), "log without the late start of %s", foreign.SchedulerPluginsControllerName)
}

// logHas says whether a line of log holds every one of parts.
func logHas(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
