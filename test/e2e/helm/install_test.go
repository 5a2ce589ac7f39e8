// Package helm checks the Helm chart charts/tephra: rendered with default values it installs what
// manifests/ installs, and installed on a local control plane with values a Volcano user would
// set, Tephra's components run from its Deployments, as its ServiceAccounts, and place gangs.
package helm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// chartArgs are the values the package's cluster is installed with: Tephra also serves pods
// written for Volcano.
var chartArgs = []string{"--set", "compatibleSchedulerNames={volcano}"}

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{Manifests: localcluster.HelmManifests(chartArgs...)}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// A gang written for Volcano (schedulerName: volcano, its group-name annotation) runs unchanged
// on a chart installed with compatibleSchedulerNames={volcano}: all four members are placed at
// once, the PodGroup says Running, and the group's queue shows the four CPUs in use.
func TestVolcanoGangIsPlacedWholeAndCountsInItsQueue(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "volcano-whole", 2, 2)
	createQueue(t, env, "helm-volcano")

	createPodGroup(t, env, ns, "train", 4, "helm-volcano")
	for i := range 4 {
		createPod(t, env, volcanoPod(ns, fmt.Sprintf("train-%d", i), "train", "1", nodes))
	}
	framework.Eventually(t, time.Minute, "all 4 members to be bound", func() (bool, string) {
		bound, err := boundPods(ctx, env, ns)
		return err == nil && bound == 4, fmt.Sprintf("%d bound, err %v", bound, err)
	})
	framework.Eventually(t, 30*time.Second, "the PodGroup to be Running", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning, fmt.Sprintf("phase %s, conditions %v", pg.Status.Phase, pg.Status.Conditions)
	})
	framework.Eventually(t, 30*time.Second, "queue helm-volcano to show 4 CPUs allocated", func() (bool, string) {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(ctx, "helm-volcano", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cpu := q.Status.Allocated[corev1.ResourceCPU]
		return cpu.Cmp(resource.MustParse("4")) == 0, fmt.Sprintf("allocated %v, running groups %d", q.Status.Allocated, q.Status.Running)
	})
}

// A Volcano gang of three 2-CPU members on two 2-CPU nodes cannot be whole: no member is bound,
// and the PodGroup says it lacks resources.
func TestVolcanoGangTooBigForTheNodesPlacesNothing(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "volcano-too-big", 2, 2)

	createPodGroup(t, env, ns, "big", 3, "")
	for i := range 3 {
		createPod(t, env, volcanoPod(ns, fmt.Sprintf("big-%d", i), "big", "2", nodes))
	}
	framework.Eventually(t, time.Minute, "the PodGroup to be Unschedulable for lack of resources", func() (bool, string) {
		bound, err := boundPods(ctx, env, ns)
		if err == nil {
			assert.Equal(t, 0, bound, "no member of a gang that cannot be whole is bound")
		}
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == schedulingv1alpha1.ReasonNotEnoughResources,
			fmt.Sprintf("phase %s, conditions %v", pg.Status.Phase, pg.Status.Conditions)
	})
	// Placing some members and releasing them later would show as a bound pod in this window.
	for range 12 {
		bound, err := boundPods(ctx, env, ns)
		require.NoError(t, err)
		require.Equal(t, 0, bound, "no member of a gang that cannot be whole is bound")
		time.Sleep(250 * time.Millisecond)
	}
}

// The chart's metrics Services exist in the cluster and select the pods of the Deployments the
// chart renders (the local cluster runs those as processes), on a port those pods name.
func TestMetricsServicesSelectTheComponents(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	rendered := renderChart(t, ctx, chartArgs...)
	for _, tc := range []struct{ service, deployment string }{
		{"tephra-controllers-metrics", "tephra-controllers"},
		{"tephra-scheduler-metrics", "tephra-scheduler"},
	} {
		svc, err := env.Kube.CoreV1().Services(localcluster.ChartNamespace).Get(ctx, tc.service, metav1.GetOptions{})
		require.NoError(t, err, "the chart installs Service %s", tc.service)
		deploy := rendered["Deployment/"+localcluster.ChartNamespace+"/"+tc.deployment]
		require.NotNil(t, deploy, "the chart renders Deployment %s", tc.deployment)
		podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
		require.NotEmpty(t, svc.Spec.Selector)
		for key, value := range svc.Spec.Selector {
			assert.Equal(t, value, podLabels[key], "Service %s selects label %s of %s's pods", tc.service, key, tc.deployment)
		}
		podSpec, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
		ports := map[string]bool{}
		for _, c := range containersByName(podSpec) {
			list, _ := c["ports"].([]any)
			for _, p := range list {
				ports[p.(map[string]any)["name"].(string)] = true
			}
		}
		require.Len(t, svc.Spec.Ports, 1)
		assert.True(t, ports[svc.Spec.Ports[0].TargetPort.StrVal], "Service %s targets port %q, which %s's container names", tc.service, svc.Spec.Ports[0].TargetPort.StrVal, tc.deployment)
	}
}

// The scheduler holds its leader-election lease in kube-system: it runs with the chart's
// configuration and the chart's Role lets its ServiceAccount take the lease.
func TestSchedulerHoldsTheChartsLease(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	framework.Eventually(t, 30*time.Second, "lease kube-system/tephra-scheduler to have a holder", func() (bool, string) {
		lease, err := env.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "tephra-scheduler", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "") != "", fmt.Sprintf("holder %q", ptr.Deref(lease.Spec.HolderIdentity, ""))
	})
}

// createQueue creates a leaf queue under root and deletes it when the test ends.
func createQueue(t *testing.T, env *framework.Env, name string) {
	t.Helper()
	q := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue, Weight: 1}}
	_, err := env.Tephra.SchedulingV1alpha1().Queues().Create(context.Background(), q, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func createPodGroup(t *testing.T, env *framework.Env, ns, name string, minMember int32, queue string) {
	t.Helper()
	pg := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue, ScheduleTimeoutSeconds: ptr.To[int32](15)},
	}
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

// volcanoPod is a pod as a Volcano user writes it: schedulerName volcano, and its group named by
// Volcano's annotation rather than Tephra's label.
func volcanoPod(ns, name, group, cpu string, nodes map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Annotations: map[string]string{schedulingv1alpha1.VolcanoGroupNameAnnotation: group},
		},
		Spec: corev1.PodSpec{
			SchedulerName: "volcano",
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  nodes,
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
}

func createPod(t *testing.T, env *framework.Env, pod *corev1.Pod) {
	t.Helper()
	_, err := env.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// boundPods counts the pods of a namespace bound to a node.
func boundPods(ctx context.Context, env *framework.Env, ns string) (int, error) {
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}
