package devices

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/quota"
)

const gpus = corev1.ResourceName("gpu.deviceclass.resource.k8s.io/devices")

// view returns a Devices with a class gpu, node-a's slice of 4 GPUs, and the claims given.
func view(t *testing.T, claims ...*resourceapi.ResourceClaim) *Devices {
	claimStore := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range claims {
		require.NoError(t, claimStore.Add(c))
	}
	d := &Devices{
		inventory: quota.NewDeviceInventory(),
		claims:    resourcelisters.NewResourceClaimLister(claimStore),
		templates: resourcelisters.NewResourceClaimTemplateLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
		pods:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podClaimIndex: indexByClaim}),
	}
	d.classChanged(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}, false)
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a-gpus"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "example.com", NodeName: ptr.To("node-a"), Pool: resourceapi.ResourcePool{Name: "node-a"}}}
	for _, name := range []string{"g0", "g1", "g2", "g3"} {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: name})
	}
	d.sliceChanged(slice, false)
	return d
}

func claimed(name string, allocated bool) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	if allocated {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "r", Driver: "example.com", Pool: "node-a", Device: "g0"}}}}
	}
	return c
}

func podUsing(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{
		NodeName:       "node-a",
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}},
		Containers:     []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
	}}
}

func TestWithDevicesCountsTheNodesDevicesAndWhatItsPodsAreCharged(t *testing.T) {
	d := view(t, claimed("used", true))
	node := framework.NewNodeInfo(podUsing("p", "used"))
	node.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}})
	bare := framework.NewNodeInfo()
	bare.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})

	nodes := d.WithDevices([]fwk.NodeInfo{node, bare})
	a, u := capacity.Of(nodes[0], gpus)
	assert.Equal(t, []int64{4, 1}, []int64{a, u}, "4 devices offered, 1 charged to the pod on the node")
	a, u = capacity.Of(nodes[0], corev1.ResourceCPU)
	assert.Equal(t, []int64{8000, 1000}, []int64{a, u}, "the node's other resources are as they were")
	assert.Same(t, bare, nodes[1], "a node without devices is left as it is")
	a, _ = capacity.Of(node, gpus)
	assert.Zero(t, a, "the scheduler's NodeInfo is not changed")
}

func TestClaimChangesNotifyItsPods(t *testing.T) {
	d := view(t)
	p := podUsing("p", "c")
	require.NoError(t, d.pods.Add(p))
	require.NoError(t, d.pods.Add(podUsing("other", "c2")))
	var notified []string
	var total quota.Amounts
	d.Notify(func(pod *corev1.Pod) { notified = append(notified, pod.Name) }, func(a quota.Amounts) { total = a })
	assert.Equal(t, quota.Amounts{gpus: 4}, total, "Notify hands the current total at once")
	d.claimChanged(claimed("c", true))
	assert.Equal(t, []string{"p"}, notified, "only the pods that use the claim are counted again")
	d.sliceChanged(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a-gpus"}}, true)
	assert.Empty(t, total, "a slice deleted takes its devices out of the total")
}
