package dra

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A queue whose capability is 2 devices of a class runs 2 of 6 pods that each claim one device
// through a ResourceClaimTemplate, on nodes with 8: the other 4 wait, told why, and their claims
// stay unallocated; the queue's status shows the 2 devices.
func TestDeviceCapability(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-cap.e2e.tephra.dev"
	pool := devicePool(t, env, "dra-cap", 2, localcluster.DeviceShape{GPUs: 4})
	createClass(t, env, class, "dra-cap", false, nil)
	framework.CreateQueue(t, env, "dra-cap", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{devicesOf(class): resource.MustParse("2")}
	})
	createTemplate(t, env, ns, "one-gpu", deviceRequest(class, 1, nil))

	names := submit(t, env, ns, 6, "p", devicePod{queue: "dra-cap", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-cap": 2}, time.Minute, func() string { return podStates(env, ns) })
	framework.WaitEventOnAny(t, env, ns, names, fmt.Sprintf(`queue "dra-cap" would exceed its capability (%s`, devicesOf(class)))
	framework.HoldBound(t, env, ns, map[string]int{"dra-cap": 2}, 5*time.Second)
	assert.Len(t, pendingOf(t, env, ns), 4, "4 pods wait")
	assert.Equal(t, 2, allocatedClaims(t, env, ns), "only the running pods' claims are allocated:\n%s", podStates(env, ns))
	framework.WaitQueueStatus(t, env, "dra-cap", 30*time.Second, "allocated 2 devices", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 2 && q.Status.Running == 2
	})
}

// Three pods naming one ResourceClaim share its device: the queue is charged it once, so a
// capability of 1 device runs all three, and its status shows 1 device, then 0 when they end.
func TestSharedClaimChargedOnce(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-once.e2e.tephra.dev"
	pool := devicePool(t, env, "dra-once", 1, localcluster.DeviceShape{GPUs: 4})
	createClass(t, env, class, "dra-once", false, nil)
	framework.CreateQueue(t, env, "dra-once", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{devicesOf(class): resource.MustParse("1")}
	})
	createClaim(t, env, ns, "shared", deviceRequest(class, 1, nil))

	names := submit(t, env, ns, 3, "user", devicePod{queue: "dra-once", pool: pool, claims: []claimRef{named("gpu", "shared")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-once": 3}, time.Minute, func() string { return podStates(env, ns) })
	claim, err := env.Kube.ResourceV1().ResourceClaims(ns).Get(context.Background(), "shared", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Len(t, claim.Status.ReservedFor, 3, "the claim is reserved for its 3 users")
	q := framework.WaitQueueStatus(t, env, "dra-once", 30*time.Second, "allocated 1 device for 3 running pods", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 1 && q.Status.Running == 3
	})
	assert.Equal(t, int64(300), q.Status.Allocated.Cpu().MilliValue(), "each pod's own CPU still counts")

	deletePods(t, env, ns, names...)
	framework.WaitQueueStatus(t, env, "dra-once", time.Minute, "no devices once the users are gone", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 0 && q.Status.Running == 0
	})
}

// A DeviceClass with an extended resource name charges its devices under that name too: a
// queue capped at 2 of example.com/gpu-ext runs 2 of 4 pods claiming one device each through a
// template; and a pod asking for example.com/gpu-ext in its container, which no node offers but
// the class serves (DRA extended resources), counts under the same capability.
func TestExtendedResourceNameLimitsDevices(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const (
		class                     = "gpu-ext.e2e.tephra.dev"
		ext   corev1.ResourceName = "example.com/gpu-ext-e2e"
	)
	pool := devicePool(t, env, "dra-ext", 2, localcluster.DeviceShape{GPUs: 4})
	createClass(t, env, class, "dra-ext", false, func(c *resourceapi.DeviceClass) {
		c.Spec.ExtendedResourceName = ptr.To(string(ext))
	})
	framework.CreateQueue(t, env, "dra-ext", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{ext: resource.MustParse("2")}
	})
	createTemplate(t, env, ns, "one-gpu", deviceRequest(class, 1, nil))

	names := submit(t, env, ns, 4, "claim", devicePod{queue: "dra-ext", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-ext": 2}, time.Minute, func() string { return podStates(env, ns) })
	framework.WaitEventOnAny(t, env, ns, names, fmt.Sprintf(`queue "dra-ext" would exceed its capability (%s`, ext))
	framework.HoldBound(t, env, ns, map[string]int{"dra-ext": 2}, 5*time.Second)
	framework.WaitQueueStatus(t, env, "dra-ext", 30*time.Second, "allocated 2 devices, under the class and its extended resource name", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, ext) == 2 && framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 2
	})

	// The extended resource itself, served by the class.
	deletePods(t, env, ns, names...)
	framework.WaitBound(t, env, ns, map[string]int{"dra-ext": 0}, time.Minute, func() string { return podStates(env, ns) })
	names = submit(t, env, ns, 3, "ext", devicePod{queue: "dra-ext", pool: pool, requests: corev1.ResourceList{ext: resource.MustParse("1")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-ext": 2}, time.Minute, func() string { return podStates(env, ns) })
	framework.HoldBound(t, env, ns, map[string]int{"dra-ext": 2}, 5*time.Second)
	framework.WaitEventOnAny(t, env, ns, names, fmt.Sprintf(`queue "dra-ext" would exceed its capability (%s`, ext))
	var served int
	for _, name := range names {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if pod.Spec.NodeName != "" {
			require.NotNil(t, pod.Status.ExtendedResourceClaimStatus, "pod %s runs on a device the scheduler claimed for it", name)
			served++
		}
	}
	assert.Equal(t, 2, served)
	framework.WaitQueueStatus(t, env, "dra-ext", 30*time.Second, "allocated 2 of the extended resource", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, ext) == 2 && q.Status.Running == 2
	})
}

// A queue capped at 40Gi of a shared GPU class's memory runs 2 pods each claiming 20Gi of a
// shared GPU (consumable capacity) on devices with 160Gi; the third waits.
func TestConsumableCapacityCapped(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "shared-gpu-cons.e2e.tephra.dev"
	memory := quota.DeviceAmountName(class, "memory")
	pool := devicePool(t, env, "dra-cons", 1, localcluster.DeviceShape{SharedGPUs: 2})
	createClass(t, env, class, "dra-cons", true, nil)
	framework.CreateQueue(t, env, "dra-cons", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{memory: resource.MustParse("40Gi")}
	})
	createTemplate(t, env, ns, "gpu-20gi", deviceRequest(class, 1, map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")}))

	names := submit(t, env, ns, 3, "slice", devicePod{queue: "dra-cons", pool: pool, claims: []claimRef{fromTemplate("gpu", "gpu-20gi")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-cons": 2}, time.Minute, func() string { return podStates(env, ns) })
	framework.WaitEventOnAny(t, env, ns, names, fmt.Sprintf(`queue "dra-cons" would exceed its capability (%s`, memory))
	framework.HoldBound(t, env, ns, map[string]int{"dra-cons": 2}, 5*time.Second)
	for _, c := range claims(t, env, ns) {
		if c.Status.Allocation == nil {
			continue
		}
		consumed := c.Status.Allocation.Devices.Results[0].ConsumedCapacity["memory"]
		assert.Equal(t, "20Gi", consumed.String(), "claim %s took 20Gi of its device", c.Name)
	}
	fortyGi := resource.MustParse("40Gi")
	framework.WaitQueueStatus(t, env, "dra-cons", 30*time.Second, "allocated 40Gi of device memory", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, memory) == fortyGi.Value() && q.Status.Running == 2
	})
}

// A gang of 4 pods each claiming one device, on nodes with only 3 devices of its class, binds
// nobody and leaves none of its claims allocated; once a node with one more device comes, it
// runs whole.
func TestDeviceGangAllOrNothing(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-gang.e2e.tephra.dev"
	pool := devicePool(t, env, "dra-gang", 1, localcluster.DeviceShape{GPUs: 3})
	createClass(t, env, class, "dra-gang", false, nil)
	framework.CreateQueue(t, env, "dra-gang", nil)
	createTemplate(t, env, ns, "one-gpu", deviceRequest(class, 1, nil))
	createGroup(t, env, ns, "gang", "dra-gang", 4)
	submit(t, env, ns, 4, "member", devicePod{queue: "dra-gang", group: "gang", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}})

	// A minute of tries: the members' claims exist (the controller manager makes them at once),
	// and no member binds.
	sawAllocated := 0
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		bound, err := framework.BoundByQueue(context.Background(), env, ns)
		require.NoError(t, err)
		require.Zero(t, bound["dra-gang"], "a member of the gang bound with 3 devices for 4:\n%s", podStates(env, ns))
		sawAllocated = max(sawAllocated, allocatedClaims(t, env, ns))
		time.Sleep(time.Second)
	}
	assert.Len(t, claims(t, env, ns), 4, "each member has its claim")
	assert.Zero(t, allocatedClaims(t, env, ns), "no claim of the gang is left allocated:\n%s", podStates(env, ns))
	if sawAllocated > 0 {
		t.Logf("up to %d claims of the gang were seen allocated for a while during the minute", sawAllocated)
	}

	// One more device, on a node of its own: the gang runs whole.
	extra := localcluster.DeviceShape{GPUs: 1, Group: "dra-gang"}
	names, err := env.Cluster.CreateNodes(context.Background(), "dra-gang-extra", 1, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: pool, Devices: &extra,
	})
	t.Cleanup(func() { deleteNodes(env, names) })
	require.NoError(t, err)
	framework.WaitBound(t, env, ns, map[string]int{"dra-gang": 4}, 2*time.Minute, func() string { return podStates(env, ns) })
	assert.Equal(t, 4, allocatedClaims(t, env, ns))
	framework.WaitQueueStatus(t, env, "dra-gang", 30*time.Second, "allocated 4 devices", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 4
	})
}

// A gang whose members all name one ResourceClaim, a channel device reachable from every node
// (as an interconnect's), besides each its own GPU: it runs, and its queue, capped at 1
// channel, is charged the channel once.
func TestGangSharesClaim(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const (
		gpuClass     = "gpu-chan.e2e.tephra.dev"
		channelClass = "channel-chan.e2e.tephra.dev"
	)
	pool := devicePool(t, env, "dra-chan", 2, localcluster.DeviceShape{GPUs: 2})
	createClass(t, env, gpuClass, "dra-chan", false, nil)
	// The channel: a device of the simulated driver that every node reaches.
	channels := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "dra-chan-channels"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   localcluster.DeviceDriver,
			AllNodes: ptr.To(true),
			Pool:     resourceapi.ResourcePool{Name: "dra-chan-channels", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "channel-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"kind": {StringValue: ptr.To("channel")}, "group": {StringValue: ptr.To("dra-chan")},
			}}},
		},
	}
	_, err := env.Kube.ResourceV1().ResourceSlices().Create(context.Background(), channels, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), channels.Name, metav1.DeleteOptions{})
	})
	createClass(t, env, channelClass, "", false, func(c *resourceapi.DeviceClass) {
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(
			`device.driver == %q && device.attributes[%q].kind == "channel" && device.attributes[%q].group == "dra-chan"`,
			localcluster.DeviceDriver, localcluster.DeviceDriver, localcluster.DeviceDriver)}}}
	})
	framework.CreateQueue(t, env, "dra-chan", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{devicesOf(channelClass): resource.MustParse("1"), devicesOf(gpuClass): resource.MustParse("4")}
	})
	createClaim(t, env, ns, "channel", resourceapi.DeviceRequest{Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: channelClass}})
	createTemplate(t, env, ns, "one-gpu", deviceRequest(gpuClass, 1, nil))
	createGroup(t, env, ns, "ring", "dra-chan", 4)
	submit(t, env, ns, 4, "rank", devicePod{queue: "dra-chan", group: "ring", pool: pool, claims: []claimRef{
		named("channel", "channel"), fromTemplate("gpu", "one-gpu"),
	}})

	framework.WaitBound(t, env, ns, map[string]int{"dra-chan": 4}, 90*time.Second, func() string { return podStates(env, ns) })
	claim, err := env.Kube.ResourceV1().ResourceClaims(ns).Get(context.Background(), "channel", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Len(t, claim.Status.ReservedFor, 4, "the channel is reserved for the 4 members")
	framework.WaitQueueStatus(t, env, "dra-chan", 30*time.Second, "allocated 4 GPUs and 1 channel", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, devicesOf(gpuClass)) == 4 && framework.AmountOf(q.Status.Allocated, devicesOf(channelClass)) == 1
	})
}

// Queue A fills all 8 devices of a class; queue B, of the same weight, then submits 8 pods:
// Tephra reclaims 4 of A's, each queue ends with 4 devices allocated, and it stays so.
func TestDeviceReclaimSplitsEvenly(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const class = "gpu-even.e2e.tephra.dev"
	pool := devicePool(t, env, "dra-even", 2, localcluster.DeviceShape{GPUs: 4})
	createClass(t, env, class, "dra-even", false, nil)
	framework.CreateQueue(t, env, "dra-even-a", nil)
	framework.CreateQueue(t, env, "dra-even-b", nil)
	createTemplate(t, env, ns, "one-gpu", deviceRequest(class, 1, nil))

	submit(t, env, ns, 8, "a", devicePod{queue: "dra-even-a", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-even-a": 8}, time.Minute, func() string { return podStates(env, ns) })
	submit(t, env, ns, 8, "b", devicePod{queue: "dra-even-b", pool: pool, claims: []claimRef{fromTemplate("gpu", "one-gpu")}})
	framework.WaitBound(t, env, ns, map[string]int{"dra-even-a": 4, "dra-even-b": 4}, 2*time.Minute, func() string { return podStates(env, ns) })
	framework.HoldBound(t, env, ns, map[string]int{"dra-even-a": 4, "dra-even-b": 4}, 15*time.Second)
	for _, name := range []string{"dra-even-a", "dra-even-b"} {
		framework.WaitQueueStatus(t, env, name, 30*time.Second, "allocated and deserved 4 devices", func(q *schedulingv1alpha1.Queue) bool {
			return framework.AmountOf(q.Status.Allocated, devicesOf(class)) == 4 && framework.AmountOf(q.Status.Deserved, devicesOf(class)) == 4
		})
	}
	// The recorder writes each Reclaimed event from a goroutine of its own after the eviction.
	reclaimed := 0
	framework.Eventually(t, 30*time.Second, "4 Reclaimed events", func() (bool, string) {
		events, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		reclaimed = 0
		var notes []string
		for _, e := range events.Items {
			if e.Reason == "Reclaimed" {
				reclaimed++
				notes = append(notes, e.Regarding.Name+": "+e.Note)
			}
		}
		return reclaimed >= 4, fmt.Sprint(notes)
	})
	assert.Equal(t, 4, reclaimed, "exactly 4 of A's pods were reclaimed")
}
