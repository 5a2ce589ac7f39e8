package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// lookup is a DeviceLookup of fixed objects, with the devices of an inventory.
type lookup struct {
	inv       *DeviceInventory
	claims    map[string]*resourceapi.ResourceClaim
	templates map[string]*resourceapi.ResourceClaimTemplate
}

func (l lookup) DeviceClass(name string) *resourceapi.DeviceClass { return l.inv.DeviceClass(name) }
func (l lookup) Device(driver, pool, device string) *resourceapi.Device {
	return l.inv.Device(driver, pool, device)
}
func (l lookup) SharesDevices(class string) bool                         { return l.inv.SharesDevices(class) }
func (l lookup) DefaultShare(class string) Amounts                       { return l.inv.DefaultShare(class) }
func (l lookup) ResourceClaim(_, name string) *resourceapi.ResourceClaim { return l.claims[name] }
func (l lookup) ResourceClaimTemplate(_, name string) *resourceapi.ResourceClaimTemplate {
	return l.templates[name]
}

func class(name, kind string, ext string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["example.com"].kind == "` + kind + `"`}}},
	}}
	if ext != "" {
		c.Spec.ExtendedResourceName = ptr.To(ext)
	}
	return c
}

func device(name, kind string, memory string) resourceapi.Device {
	return resourceapi.Device{
		Name:       name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"kind": {StringValue: ptr.To(kind)}},
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}},
	}
}

// inventory has classes gpu (whole GPUs, also counted as example.com/gpu) and shared (GPUs
// whose memory claims share), and node-a's slice: 2 GPUs of 80Gi and 1 shared GPU of 40Gi.
func inventory() *DeviceInventory {
	inv := NewDeviceInventory()
	inv.SetClass(class("gpu", "gpu", "example.com/gpu"))
	inv.SetClass(class("shared", "shared", ""))
	shared := device("s0", "shared", "40Gi")
	shared.AllowMultipleAllocations = ptr.To(true)
	memory := shared.Capacity["memory"]
	memory.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("5Gi"))}
	shared.Capacity["memory"] = memory
	inv.SetSlice(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "example.com", Pool: resourceapi.ResourcePool{Name: "node-a"}, NodeName: ptr.To("node-a"),
		Devices: []resourceapi.Device{device("g0", "gpu", "80Gi"), device("g1", "gpu", "80Gi"), shared},
	}})
	return inv
}

func exactly(name, className string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

func newClaim(name string, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}}}
}

func allocate(claim *resourceapi.ResourceClaim, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	return claim
}

func result(request, dev string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: "example.com", Pool: "node-a", Device: dev}
}

func reserve(claim *resourceapi.ResourceClaim, pods ...string) *resourceapi.ResourceClaim {
	for _, p := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID(p)})
	}
	return claim
}

func podWith(name string, claims ...corev1.PodResourceClaim) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}, Spec: corev1.PodSpec{ResourceClaims: claims}}
}

func direct(entry, claim string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: entry, ResourceClaimName: ptr.To(claim)}
}

func fromTemplate(entry, template string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: ptr.To(template)}
}

const (
	gpuCount     = corev1.ResourceName("gpu.deviceclass.resource.k8s.io/devices")
	gpuMemory    = corev1.ResourceName("gpu.deviceclass.resource.k8s.io/memory")
	sharedMemory = corev1.ResourceName("shared.deviceclass.resource.k8s.io/memory")
	sharedCount  = corev1.ResourceName("shared.deviceclass.resource.k8s.io/devices")
	extGPU       = corev1.ResourceName("example.com/gpu")
)

func TestDeviceNames(t *testing.T) {
	assert.Equal(t, gpuCount, DevicesName("gpu"))
	assert.Equal(t, corev1.ResourceName("gpu.deviceclass.resource.k8s.io/memory"), DeviceAmountName("gpu", "example.com/memory"), "a qualified capacity is named by its last part")
	class, amount, ok := DeviceClassOf("gpu.example.com.deviceclass.resource.k8s.io/devices")
	assert.True(t, ok)
	assert.Equal(t, "gpu.example.com", class)
	assert.Equal(t, "devices", amount)
	_, _, ok = DeviceClassOf("nvidia.com/gpu")
	assert.False(t, ok)
	assert.Equal(t, "gpu memory: 40Gi", Amounts{gpuMemory: 40 << 30}.Describe(), "device memory shows in binary units")
}

func TestDeviceInventoryCountsWhatEachClassSelects(t *testing.T) {
	inv := inventory()
	assert.Equal(t, Amounts{gpuCount: 2, extGPU: 2, gpuMemory: 160 << 30, sharedCount: 1, sharedMemory: 40 << 30}, inv.Total())
	assert.True(t, inv.SharesDevices("shared"), "its device allows several allocations")
	assert.False(t, inv.SharesDevices("gpu"))
	inv.DeleteSlice("node-a")
	assert.Empty(t, inv.Total(), "a slice removed takes its devices along")
	assert.False(t, inv.SharesDevices("shared"))
	bad := class("bad", "gpu", "")
	bad.Spec.Selectors[0].CEL.Expression = "device.attributes["
	inv.SetClass(bad)
	inv.SetSlice(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "example.com", Pool: resourceapi.ResourcePool{Name: "node-b"}, Devices: []resourceapi.Device{device("g0", "gpu", "80Gi")}}})
	assert.Contains(t, inv.ClassProblem("bad"), "selector", "a selector that does not compile selects nothing, and says why")
	assert.Equal(t, int64(1), inv.Total()[gpuCount])
}

func TestDeviceInventoryCountsCountersOncePerPhysicalDevice(t *testing.T) {
	partition := func(name, memory string) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"kind": {StringValue: ptr.To("mig")}},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}}}
		d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse(memory)}}}}
		return d
	}
	pool := resourceapi.ResourcePool{Name: "node-a", ResourceSliceCount: 3}
	// The API puts a pool's counter sets and its partitions in different slices; they may come
	// in any order, and two slices of partitions may draw on one set.
	halves := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "halves"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "example.com", Pool: pool, NodeName: ptr.To("node-a"),
		Devices: []resourceapi.Device{partition("gpu-0-half-a", "20Gi"), partition("gpu-0-half-b", "20Gi")}}}
	whole := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "whole"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "example.com", Pool: pool, NodeName: ptr.To("node-a"),
		Devices: []resourceapi.Device{partition("gpu-0-whole", "40Gi")}}}
	counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "counters"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "example.com", Pool: pool,
		SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse("40Gi")}}}}}}
	inv := NewDeviceInventory()
	inv.SetClass(class("mig", "mig", ""))
	inv.SetSlice(halves)
	inv.SetSlice(whole)
	assert.Equal(t, Amounts{"mig.deviceclass.resource.k8s.io/devices": 3}, inv.Total(), "the counters are not published yet")
	inv.SetSlice(counters)
	want := Amounts{"mig.deviceclass.resource.k8s.io/devices": 3, "mig.deviceclass.resource.k8s.io/memory": 40 << 30}
	assert.Equal(t, want, inv.Total(), "three partitions of one 40Gi GPU offer 40Gi of its memory, not 80Gi or 160Gi")
	assert.Equal(t, want, inv.OnNode("node-a"), "the pool's devices are on its node")
	inv.DeleteSlice("counters")
	assert.Equal(t, Amounts{"mig.deviceclass.resource.k8s.io/devices": 3}, inv.Total(), "the counters go with their slice")
	inv.SetSlice(counters)

	l := lookup{inv: inv, claims: map[string]*resourceapi.ResourceClaim{
		"half": allocate(newClaim("half", exactly("r", "mig", 1)), result("r", "gpu-0-half-a")),
	}}
	got := ChargeDevices(podWith("p", direct("c", "half")), l)
	assert.Equal(t, Amounts{"mig.deviceclass.resource.k8s.io/devices": 1, "mig.deviceclass.resource.k8s.io/memory": 20 << 30}, got.Charged,
		"a partition is charged the counters it consumes")
}

func TestChargeDevices(t *testing.T) {
	inv := inventory()
	templates := map[string]*resourceapi.ResourceClaimTemplate{
		"two-gpuCount": {Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactly("r", "gpu", 2)}}}}},
	}
	sharedRequest := exactly("r", "shared", 1)
	sharedRequest.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}}
	admin := exactly("r", "gpu", 1)
	admin.Exactly.AdminAccess = ptr.To(true)
	all := exactly("r", "gpu", 0)
	all.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	prioritized := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
		{Name: "small", DeviceClassName: "shared", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}
	consumed := result("r", "s0")
	consumed.ShareID = ptr.To(types.UID("share-1"))
	consumed.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}
	claims := map[string]*resourceapi.ResourceClaim{
		"allocated":     allocate(newClaim("allocated", exactly("r", "gpu", 1)), result("r", "g0")),
		"shared":        reserve(allocate(newClaim("shared", exactly("r", "gpu", 1)), result("r", "g1")), "first", "second"),
		"unreserved":    newClaim("unreserved", exactly("r", "gpu", 1)),
		"admin":         newClaim("admin", admin),
		"all":           newClaim("all", all),
		"prioritized":   newClaim("prioritized", prioritized),
		"chose-small":   allocate(newClaim("chose-small", prioritized), result("r/small", "s0")),
		"slice-of":      allocate(newClaim("slice-of", sharedRequest), consumed),
		"no-class":      newClaim("no-class", exactly("r", "missing", 1)),
		"share-pending": newClaim("share-pending", sharedRequest),
		"share-default": newClaim("share-default", exactly("r", "shared", 1)),
	}
	claims["chose-small"].Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("share-2"))
	claims["chose-small"].Status.Allocation.Devices.Results[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}
	l := lookup{inv: inv, claims: claims, templates: templates}
	generated := podWith("gen", fromTemplate("gpuCount", "two-gpuCount"))
	generated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpuCount", ResourceClaimName: ptr.To("allocated")}}

	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		charged   Amounts
		shared    Amounts
		direct    Amounts
		problem   string
		uncounted []string
	}{
		{name: "a template not instantiated yet is charged what it asks for", pod: podWith("p", fromTemplate("gpuCount", "two-gpuCount")),
			charged: Amounts{gpuCount: 2, extGPU: 2}},
		{name: "the claim generated from a template is charged its allocation, with the device's whole capacity", pod: generated,
			charged: Amounts{gpuCount: 1, extGPU: 1, gpuMemory: 80 << 30}},
		{name: "a shared claim is charged to its first user", pod: podWith("first", direct("c", "shared")),
			charged: Amounts{gpuCount: 1, extGPU: 1, gpuMemory: 80 << 30}, shared: Amounts{gpuCount: 1, extGPU: 1, gpuMemory: 80 << 30}, direct: Amounts{gpuCount: 1, extGPU: 1, gpuMemory: 80 << 30}},
		{name: "and to nobody else", pod: podWith("second", direct("c", "shared")), charged: Amounts{}},
		{name: "a claim nobody reserved yet is charged to any pod that would use it", pod: podWith("any", direct("c", "unreserved")),
			charged: Amounts{gpuCount: 1, extGPU: 1}, direct: Amounts{gpuCount: 1, extGPU: 1}},
		{name: "admin access is not charged", pod: podWith("p", direct("c", "admin")), charged: Amounts{}},
		{name: "all the devices of a class cannot be counted before allocation", pod: podWith("p", direct("c", "all")), charged: Amounts{}, uncounted: []string{"gpu"}},
		{name: "a prioritized list is charged as its first choice before allocation", pod: podWith("p", direct("c", "prioritized")),
			charged: Amounts{gpuCount: 2, extGPU: 2}, direct: Amounts{gpuCount: 2, extGPU: 2}},
		{name: "and as the choice allocated after", pod: podWith("p", direct("c", "chose-small")),
			charged: Amounts{sharedMemory: 10 << 30}, direct: Amounts{sharedMemory: 10 << 30}},
		{name: "a share of a device is charged the capacity it consumes, not a device", pod: podWith("p", direct("c", "slice-of")),
			charged: Amounts{sharedMemory: 10 << 30}, direct: Amounts{sharedMemory: 10 << 30}},
		{name: "so is a share not allocated yet", pod: podWith("p", direct("c", "share-pending")),
			charged: Amounts{sharedMemory: 10 << 30}, direct: Amounts{sharedMemory: 10 << 30}},
		{name: "a share that asks for no capacity is charged the device's default", pod: podWith("p", direct("c", "share-default")),
			charged: Amounts{sharedMemory: 5 << 30}, direct: Amounts{sharedMemory: 5 << 30}},
		{name: "an unknown class is a problem, charged nothing", pod: podWith("p", direct("c", "no-class")), charged: Amounts{}, problem: `DeviceClass "missing" does not exist`},
		{name: "a missing claim is a problem", pod: podWith("p", direct("c", "nope")), charged: Amounts{}, problem: `ResourceClaim "nope" does not exist`},
		{name: "a missing template is a problem", pod: podWith("p", fromTemplate("c", "nope")), charged: Amounts{}, problem: `ResourceClaimTemplate "nope" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ChargeDevices(tc.pod, l)
			assert.Equal(t, tc.charged, got.Charged)
			if tc.shared != nil {
				assert.Equal(t, tc.shared, got.Shared)
			} else {
				assert.Empty(t, got.Shared)
			}
			if tc.direct != nil {
				assert.Equal(t, tc.direct, got.Direct)
			} else {
				assert.Empty(t, got.Direct)
			}
			if tc.problem != "" {
				assert.Len(t, got.Problems, 1)
				assert.Contains(t, got.Problems[0], tc.problem)
			} else {
				assert.Empty(t, got.Problems)
			}
			assert.Equal(t, tc.uncounted, got.Uncounted)
		})
	}
}

func TestChargeDevicesOfTheSchedulersExtendedResourceClaim(t *testing.T) {
	claim := allocate(newClaim("ext", exactly("container-0-request-0", "gpu", 1)), result("container-0-request-0", "g0"))
	pod := podWith("p")
	pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "ext"}
	got := ChargeDevices(pod, lookup{inv: inventory(), claims: map[string]*resourceapi.ResourceClaim{"ext": claim}})
	assert.Equal(t, Amounts{gpuCount: 1, gpuMemory: 80 << 30}, got.Charged, "the pod's requests carry example.com/gpu already: the claim adds the class's devices only")
}

func TestLimitOnClass(t *testing.T) {
	inv := inventory()
	assert.Equal(t, gpuCount, LimitOnClass(Amounts{corev1.ResourceCPU: 1, gpuCount: 2}, "gpu", inv.DeviceClass("gpu")))
	assert.Equal(t, extGPU, LimitOnClass(Amounts{extGPU: 2}, "gpu", inv.DeviceClass("gpu")))
	assert.Empty(t, LimitOnClass(Amounts{sharedCount: 2}, "gpu", inv.DeviceClass("gpu")))
}

func TestDescribeLabelsDevicesByClass(t *testing.T) {
	assert.Equal(t, "cpu: 1, gpu devices: 2, gpu memory: 160Gi", Amounts{corev1.ResourceCPU: 1000, gpuCount: 2, gpuMemory: 160 << 30}.Describe())
}
