package flow

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Volcano's ray example, with only apiVersion and schedulerName changed (manifests/examples/ray.yaml):
// its head and two workers run as one gang; the head runs `ray start --head` with the GCS,
// dashboard and client server ports open, the workers `ray start --address` at the head's name;
// the Service ray-cluster-job-head-svc, as Volcano names it, sends those three ports to the head
// pod, and the headless Service ray-cluster-job (the svc plugin ray brings) resolves the head's
// name.
func TestVolcanoRayExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 2*time.Minute)
	j := decode[batchv1alpha1.Job](t, loadExample(t, "ray.yaml")[0])
	require.Equal(t, map[string][]string{"ray": {}}, j.Spec.Plugins, "only the ray plugin, as in Volcano's example")
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
	require.NoError(t, err)

	var pods map[string]corev1.Pod
	framework.Eventually(t, time.Minute, "head and workers running", func() (bool, string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=ray-cluster-job"})
		if err != nil {
			return false, err.Error()
		}
		pods = map[string]corev1.Pod{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				pods[p.Name] = p
			}
		}
		return len(pods) == 3, fmt.Sprint(keys(pods))
	})
	assert.Equal(t, []string{"ray-cluster-job-head-0", "ray-cluster-job-worker-0", "ray-cluster-job-worker-1"}, keys(pods))
	head := pods["ray-cluster-job-head-0"]
	assert.Equal(t, []string{"sh", "-c", "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 --ray-client-server-port=10001"},
		head.Spec.Containers[0].Command)
	assert.Equal(t, []corev1.ContainerPort{
		{Name: "gcs", ContainerPort: 6379, Protocol: corev1.ProtocolTCP},
		{Name: "dashboard", ContainerPort: 8265, Protocol: corev1.ProtocolTCP},
		{Name: "client-server", ContainerPort: 10001, Protocol: corev1.ProtocolTCP},
	}, head.Spec.Containers[0].Ports)
	for _, name := range []string{"ray-cluster-job-worker-0", "ray-cluster-job-worker-1"} {
		worker := pods[name]
		assert.Equal(t, []string{"sh", "-c", "ray start --block --address=ray-cluster-job-head-0.ray-cluster-job:6379"}, worker.Spec.Containers[0].Command, name)
		assert.Equal(t, "ray-cluster-job", worker.Spec.Subdomain)
		env := map[string]string{}
		for _, e := range worker.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		assert.Equal(t, "ray-cluster-job-head-0.ray-cluster-job", env["VC_HEAD_HOSTS"], name)
		assert.Equal(t, "2", env["VC_WORKER_NUM"], name)
	}
	assert.Equal(t, "ray-cluster-job-head-0", head.Spec.Hostname)

	svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "ray-cluster-job-head-svc", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.Equal(t, []corev1.ServicePort{
		{Name: "gcs", Port: 6379, TargetPort: intstr.FromString("gcs"), Protocol: corev1.ProtocolTCP},
		{Name: "dashboard", Port: 8265, TargetPort: intstr.FromString("dashboard"), Protocol: corev1.ProtocolTCP},
		{Name: "client-server", Port: 10001, TargetPort: intstr.FromString("client-server"), Protocol: corev1.ProtocolTCP},
	}, svc.Spec.Ports)
	headless, err := env.Kube.CoreV1().Services(ns).Get(ctx, "ray-cluster-job", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClusterIPNone, headless.Spec.ClusterIP)

	// The head Service reaches the head pod only, on its three ports.
	framework.Eventually(t, time.Minute, "the head Service's endpoints", func() (bool, string) {
		slices, err := env.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=ray-cluster-job-head-svc"})
		if err != nil {
			return false, err.Error()
		}
		var addresses, ports []string
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					addresses = append(addresses, e.Addresses...)
				}
			}
			for _, p := range s.Ports {
				ports = append(ports, fmt.Sprintf("%s:%d", *p.Name, *p.Port))
			}
		}
		sort.Strings(ports)
		return fmt.Sprint(addresses) == fmt.Sprint([]string{head.Status.PodIP}) &&
			fmt.Sprint(ports) == "[client-server:10001 dashboard:8265 gcs:6379]", fmt.Sprint(addresses, ports)
	})
	// The Job's status follows its pods' by one reconcile, which may come after the endpoints.
	var got *batchv1alpha1.Job
	framework.Eventually(t, 30*time.Second, "the Job to be Running", func() (bool, string) {
		got, err = env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, "ray-cluster-job", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.State.Phase == batchv1alpha1.JobRunning, fmt.Sprintf("%s: %s", got.Status.State.Phase, got.Status.State.Message)
	})
	assert.Equal(t, int32(3), got.Status.MinAvailable)
}
