package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// An in-place resize of a running pod is charged to its queue and, past the queue's capability,
// refused by tephra-controllers' webhook (manifests/controllers/webhook.yaml, called as a cluster
// would call it) with a message that names the queue and the numbers; a pod may always shrink.
func TestResizePastCapabilityIsRefused(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	pool := units(t, env, "e2e.tephra.dev/resize", 1, 1)
	framework.CreateQueue(t, env, "resize-capped", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	})
	submit(t, env, ns, 2, "work", workPod{queue: "resize-capped", cpu: "500m", pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"resize-capped": 2}, time.Minute)

	resize := func(name, cpu string) error {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		_, err = env.Kube.CoreV1().Pods(ns).UpdateResize(ctx, name, pod, metav1.UpdateOptions{})
		return err
	}
	allocatedCPU := func(want string) {
		t.Helper()
		framework.WaitQueueStatus(t, env, "resize-capped", 30*time.Second, "allocated cpu "+want, func(q *schedulingv1alpha1.Queue) bool {
			got := q.Status.Allocated[corev1.ResourceCPU]
			return got.Cmp(resource.MustParse(want)) == 0
		})
	}
	allocatedCPU("1")

	// Up to the capability: allowed and charged.
	require.NoError(t, resize("work-0", "1500m"))
	allocatedCPU("2")

	// Past it: refused, and nothing changes.
	err := resize("work-1", "1")
	require.Error(t, err, "a resize past the queue's capability is refused")
	assert.Contains(t, err.Error(), `resizing pod `+ns+`/work-1 would take queue "resize-capped" past its capability: cpu 2500m > 2 (allocated 2, the resize adds 500m)`)
	pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "work-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "500m", pod.Spec.Containers[0].Resources.Requests.Cpu().String())

	// Shrinking is always allowed, and makes room for the refused resize.
	require.NoError(t, resize("work-0", "1"))
	allocatedCPU("1500m")
	require.NoError(t, resize("work-1", "1"))
	allocatedCPU("2")
}
