package queue

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

const (
	gpuClass    = "gpu.example.com"
	sharedClass = "shared-gpu.example.com"
	gpuDriver   = "gpu.example.com"
	extendedGPU = corev1.ResourceName("example.com/gpu")
)

var (
	gpuDevices    = quota.DevicesName(gpuClass)
	gpuMemory     = quota.DeviceAmountName(gpuClass, "memory")
	sharedDevices = quota.DevicesName(sharedClass)
)

// testInventory offers 4 GPUs of 80Gi each, all of DeviceClass gpuClass (which also counts as
// the extended resource example.com/gpu); sharedClass selects none of them.
func testInventory(t *testing.T) *quota.DeviceInventory {
	t.Helper()
	inv := quota.NewDeviceInventory()
	inv.SetClass(&resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpuClass},
		Spec: resourceapi.DeviceClassSpec{
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + gpuDriver + `"`}}},
			ExtendedResourceName: ptr.To(string(extendedGPU)),
		},
	})
	inv.SetClass(&resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: sharedClass},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "other.example.com"`}}}},
	})
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuDriver, NodeName: ptr.To("n"),
			Pool: resourceapi.ResourcePool{Name: "n", ResourceSliceCount: 1},
		},
	}
	for _, name := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"} {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{
			Name:     name,
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		})
	}
	inv.SetSlice(slice)
	require.Equal(t, int64(4), inv.Total()[gpuDevices], "the inventory's GPUs")
	return inv
}

func gpuRequest(name, class string, mode resourceapi.DeviceAllocationMode, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func allocated(request string, devices ...string) *resourceapi.AllocationResult {
	a := &resourceapi.AllocationResult{}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: request, Driver: gpuDriver, Pool: "n", Device: d})
	}
	return a
}

func reservedFor(pods ...*corev1.Pod) []resourceapi.ResourceClaimConsumerReference {
	var refs []resourceapi.ResourceClaimConsumerReference
	for _, p := range pods {
		refs = append(refs, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return refs
}

// claimPod is a pod of queue that uses the claims named.
func claimPod(name, queue, node string, claims ...string) corev1.Pod {
	pod := testPod(name, map[string]string{schedulingv1alpha1.QueueLabel: queue}, node, corev1.PodRunning, 0)
	pod.UID = types.UID(name + "-uid")
	pod.Spec.Containers[0].Resources.Requests = nil
	if node == "" {
		pod.Status.Phase = corev1.PodPending
	}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return pod
}

// The queues charge devices as the scheduler does: a claim shared by two pods once, to its
// first user; an allocated claim what was allocated (its devices and their capacity); a claim
// not allocated yet what it requests, under its DeviceClass's extended resource name too; and
// the devices the ResourceSlices offer add to the cluster's total.
func TestAccountChargesDevices(t *testing.T) {
	queues := []*schedulingv1alpha1.Queue{testQueue("root", "", 1), testQueue("train", "root", 1), testQueue("infer", "root", 1)}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}}}

	// Two training pods share one GPU through a claim reserved for both: it is charged once.
	t0 := claimPod("t0", "train", "n", "shared")
	t1 := claimPod("t1", "train", "n", "shared")
	shared := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{gpuRequest("gpu", gpuClass, resourceapi.DeviceAllocationModeExactCount, 1)}}},
		Status:     resourceapi.ResourceClaimStatus{Allocation: allocated("gpu", "gpu-0"), ReservedFor: reservedFor(&t0, &t1)},
	}
	// An inference pod asked for all the devices of the class and got two: the allocation
	// counts, with the memory of the devices allocated whole.
	i0 := claimPod("i0", "infer", "n", "all")
	all := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{gpuRequest("gpus", gpuClass, resourceapi.DeviceAllocationModeAll, 0)}}},
		Status:     resourceapi.ResourceClaimStatus{Allocation: allocated("gpus", "gpu-1", "gpu-2"), ReservedFor: reservedFor(&i0)},
	}
	// A pending inference pod's claim, not allocated, asks for 3 GPUs (and 1 device of a
	// class that selects none).
	i1 := claimPod("i1", "infer", "", "want")
	want := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "want", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			gpuRequest("gpus", gpuClass, resourceapi.DeviceAllocationModeExactCount, 3),
			gpuRequest("shared", sharedClass, resourceapi.DeviceAllocationModeExactCount, 1),
		}}},
	}
	devices := &cachedDevices{DeviceInventory: testInventory(t), claims: map[types.NamespacedName]*resourceapi.ResourceClaim{}}
	for _, c := range []*resourceapi.ResourceClaim{shared, all, want} {
		devices.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	pods := []corev1.Pod{t0, t1, i0, i1}

	a := Account(queues, pods, []corev1.Node{node}, nil, tephraOnly, devices)

	assert.Equal(t, int64(4), a.Total[gpuDevices], "the slices' GPUs")
	assert.Equal(t, int64(4), a.Total[extendedGPU], "the GPUs under their class's extended resource name")
	assert.Equal(t, int64(4*80<<30), a.Total[gpuMemory], "the GPUs' memory")
	assert.Equal(t, int64(8000), a.Total[corev1.ResourceCPU], "the nodes' allocatable still counts")

	assert.Equal(t, quota.Amounts{gpuDevices: 1, extendedGPU: 1, gpuMemory: 80 << 30}, a.Allocated["train"], "the shared claim is charged once")
	assert.Equal(t, quota.Amounts{gpuDevices: 2, extendedGPU: 2, gpuMemory: 160 << 30}, a.Allocated["infer"], "the claim is charged its allocation")
	assert.Equal(t, int64(3), a.Allocated["root"][gpuDevices])
	assert.Equal(t, quota.Amounts{gpuDevices: 3, extendedGPU: 3, sharedDevices: 1}, a.Demand["infer"], "the pending claim is charged its requests")

	// infer wants 5 GPUs, train holds 1: of 4, train deserves its 1, infer the other 3.
	assert.Equal(t, int64(1), a.Deserved["train"][gpuDevices])
	assert.Equal(t, int64(3), a.Deserved["infer"][gpuDevices])

	status := a.Status(queues[2])
	assert.Equal(t, "2", ptr.To(status.Allocated[gpuDevices]).String())
	assert.Equal(t, "160Gi", ptr.To(status.Allocated[gpuMemory]).String())
	assert.Equal(t, "3", ptr.To(status.Deserved[gpuDevices]).String())
	assert.Contains(t, status.AllocatedSummary, quota.Label(gpuDevices)+": 2")

	// The queue metrics carry the device resources.
	exportMetrics(a)
	assert.Equal(t, 2.0, testutil.ToFloat64(allocatedGauge.WithLabelValues("infer", string(gpuDevices))))
	assert.Equal(t, 3.0, testutil.ToFloat64(deservedGauge.WithLabelValues("infer", string(gpuDevices))))

	// Without devices, the same pods are charged their requests alone.
	none := Account(queues, pods, []corev1.Node{node}, nil, tephraOnly, nil)
	assert.Empty(t, none.Allocated["infer"])
	assert.NotContains(t, none.Total, gpuDevices)
}

// A pod that asks for an extended resource a DeviceClass serves gets a claim from the
// scheduler: the extended resource counts from its requests, its devices under their class.
func TestAccountChargesExtendedResourceClaims(t *testing.T) {
	queues := []*schedulingv1alpha1.Queue{testQueue("root", "", 1), testQueue("default", "root", 1)}
	pod := testPod("p", nil, "n", corev1.PodRunning, 0)
	pod.UID = "p-uid"
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{extendedGPU: resource.MustParse("2")}
	pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources"}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "p-extended-resources", Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{gpuRequest("container-0-request-0", gpuClass, resourceapi.DeviceAllocationModeExactCount, 2)}}},
		Status:     resourceapi.ResourceClaimStatus{Allocation: allocated("container-0-request-0", "gpu-0", "gpu-1"), ReservedFor: reservedFor(&pod)},
	}
	devices := &cachedDevices{DeviceInventory: testInventory(t), claims: map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ns", Name: claim.Name}: claim}}

	a := Account(queues, []corev1.Pod{pod}, nil, nil, tephraOnly, devices)

	assert.Equal(t, quota.Amounts{extendedGPU: 2, gpuDevices: 2, gpuMemory: 160 << 30}, a.Allocated["default"])
}

// AccountFrom reads the claims and templates from the cache: a pod whose claim is not
// generated yet is charged what its template asks for.
func TestAccountFromReadsClaimsAndTemplates(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, schedulingv1alpha1.AddToScheme(scheme))
	pod := claimPod("p", "default", "", "direct")
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gen", ResourceClaimTemplateName: ptr.To("two-gpus")})
	direct := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{gpuRequest("gpu", gpuClass, resourceapi.DeviceAllocationModeExactCount, 1)}}},
	}
	template := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "two-gpus", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			gpuRequest("gpus", gpuClass, resourceapi.DeviceAllocationModeExactCount, 2),
		}}}},
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		testQueue("root", "", 1), testQueue("default", "root", 1), &pod, direct, template,
	).Build()

	a, _, err := AccountFrom(context.Background(), reader, tephraOnly, false, testInventory(t), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(3), a.Demand["default"][gpuDevices])
	assert.Equal(t, int64(4), a.Total[gpuDevices])

	a, _, err = AccountFrom(context.Background(), reader, tephraOnly, false, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, a.Demand["default"], "no devices without an inventory")
}

// A claim that several waiting pods of a queue name, reserved by none yet, is charged to each
// (any may be first), and the queue counts it once, as the scheduler's ledger does.
func TestAccountCountsAClaimNamedByManyPodsOnce(t *testing.T) {
	queues := []*schedulingv1alpha1.Queue{testQueue("root", "", 1), testQueue("train", "root", 1)}
	channel := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "channel", Namespace: "ns"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{gpuRequest("gpu", gpuClass, resourceapi.DeviceAllocationModeExactCount, 1)}}},
	}
	devices := &cachedDevices{DeviceInventory: testInventory(t), claims: map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ns", Name: "channel"}: channel}}
	pods := []corev1.Pod{claimPod("r0", "train", "", "channel"), claimPod("r1", "train", "", "channel"), claimPod("r2", "train", "", "channel")}
	a := Account(queues, pods, nil, nil, tephraOnly, devices)
	assert.Equal(t, quota.Amounts{gpuDevices: 1, extendedGPU: 1}, a.Demand["train"])
}
