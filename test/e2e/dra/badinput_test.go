package dra

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A pod whose claim names a DeviceClass that does not exist is told so by an event, waits, and
// runs once the class is created: nothing is lost, nothing crashes, nothing passes uncounted.
func TestUnknownDeviceClassIsAnEventNotACrash(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-late.e2e.tephra.dev"
	pool := devicePool(t, env, "dra-late", 1, localcluster.DeviceShape{GPUs: 2})
	framework.CreateQueue(t, env, "dra-late", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{devicesOf(class): resource.MustParse("1")}
	})
	createClaim(t, env, ns, "early", deviceRequest(class, 1, nil))
	submit(t, env, ns, 1, "early", devicePod{queue: "dra-late", pool: pool, claims: []claimRef{named("gpu", "early")}})

	framework.WaitEventOnAny(t, env, ns, []string{"early-0"}, `DevicesNotAccounted: request "gpu": DeviceClass "gpu-late.e2e.tephra.dev" does not exist`)
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "early-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "DRA does not allocate a class that does not exist")

	createClass(t, env, class, "dra-late", false, nil)
	framework.WaitBound(t, env, ns, map[string]int{"dra-late": 1}, time.Minute, func() string { return podStates(env, ns) })
	framework.WaitQueueStatus(t, env, "dra-late", 30*time.Second, "allocated 1 device", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 1
	})
}

// A claim for all the devices of a class (allocationMode: All) cannot be counted before it is
// allocated: a queue that limits the class refuses the pod for good, with an event that says
// why and what to do, rather than admit what it cannot count.
func TestAllDevicesOfALimitedClassAreRefused(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-all.e2e.tephra.dev"
	pool := devicePool(t, env, "dra-all", 1, localcluster.DeviceShape{GPUs: 2})
	createClass(t, env, class, "dra-all", false, nil)
	framework.CreateQueue(t, env, "dra-all", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{devicesOf(class): resource.MustParse("1")}
	})
	all := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeAll}}
	createTemplate(t, env, ns, "all-gpus", all)
	submit(t, env, ns, 1, "greedy", devicePod{queue: "dra-all", pool: pool, claims: []claimRef{fromTemplate("gpu", "all-gpus")}})

	framework.WaitEventOnAny(t, env, ns, []string{"greedy-0"}, `allocationMode: All), and queue "dra-all" limits them`)
	framework.HoldBound(t, env, ns, map[string]int{"dra-all": 0}, 5*time.Second)
	assert.Contains(t, env.Events(ns, "greedy-0"), "ask for an exact count")
}
