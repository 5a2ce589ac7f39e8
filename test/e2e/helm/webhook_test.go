package helm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// The chart's resize webhook, served by the chart's controllers with the certificate they make
// themselves, refuses an in-place resize past the queue's capability.
func TestChartWebhookRefusesAResizePastTheCapability(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "helm-resize", 1, 4)
	createQueue(t, env, "helm-capped")
	q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(ctx, "helm-capped", metav1.GetOptions{})
	require.NoError(t, err)
	q.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	_, err = env.Tephra.SchedulingV1alpha1().Queues().Update(ctx, q, metav1.UpdateOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: ns, Labels: map[string]string{schedulingv1alpha1.QueueLabel: "helm-capped"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, NodeSelector: nodes,
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			}}},
		},
	}
	createPod(t, env, pod)
	var running *corev1.Pod
	framework.Eventually(t, time.Minute, "the pod running", func() (bool, string) {
		running, err = env.Kube.CoreV1().Pods(ns).Get(ctx, "work", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return running.Status.Phase == corev1.PodRunning, string(running.Status.Phase)
	})
	running.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	_, err = env.Kube.CoreV1().Pods(ns).UpdateResize(ctx, "work", running, metav1.UpdateOptions{})
	require.Error(t, err, "a resize past the queue's capability is refused")
	assert.Contains(t, err.Error(), `would take queue "helm-capped" past its capability: cpu 2 > 1`)
}

// With controllers.webhook.enabled=false the chart installs no webhook, no Service or Role for
// it, and tells the controllers to serve none.
func TestChartWithoutTheWebhook(t *testing.T) {
	ctx := testContext(t)
	objects := renderChart(t, ctx, "--set", "controllers.webhook.enabled=false")
	for _, key := range []string{
		"ValidatingWebhookConfiguration//tephra-controllers",
		"Service/tephra-system/tephra-controllers-webhook",
		"Role/tephra-system/tephra-controllers-webhook-certificate",
	} {
		assert.NotContains(t, objects, key)
	}
	var controllers appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objects["Deployment/tephra-system/tephra-controllers"].Object, &controllers))
	assert.Contains(t, controllers.Spec.Template.Spec.Containers[0].Args, "--webhook-configuration=")
}
