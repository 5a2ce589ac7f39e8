package cli

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	tephrafake "github.com/tephra-dev/tephra/apis/client/clientset/versioned/fake"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const (
	gpuClass   = "gpu.tephra.dev"
	gpuDevices = corev1.ResourceName("gpu.tephra.dev.deviceclass.resource.k8s.io/devices")
	gpuMemory  = corev1.ResourceName("gpu.tephra.dev.deviceclass.resource.k8s.io/memory")
)

func testOptions(kube []runtime.Object, tephra ...runtime.Object) (*Options, *bytes.Buffer) {
	out := &bytes.Buffer{}
	return &Options{
		IOStreams: genericiooptions.IOStreams{Out: out, ErrOut: out},
		Flags:     &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")},
		Now:       func() time.Time { return time.Unix(0, 0) },
		kube:      fake.NewClientset(kube...), tephra: tephrafake.NewSimpleClientset(tephra...),
	}, out
}

func TestResourceLabels(t *testing.T) {
	assert.Equal(t, "gpu.tephra.dev devices", resourceLabel(gpuDevices))
	assert.Equal(t, "gpu.tephra.dev memory", resourceLabel(gpuMemory))
	assert.Equal(t, "nvidia.com/gpu", resourceLabel("nvidia.com/gpu"))
	assert.Equal(t, "cpu: 2, memory: 1Gi, gpu.tephra.dev devices: 2, gpu.tephra.dev memory: 80Gi", describeAmounts(map[corev1.ResourceName]int64{
		corev1.ResourceCPU: 2000, corev1.ResourceMemory: 1 << 30, gpuDevices: 2, gpuMemory: 80 << 30,
	}))

	names, classes := devicesIn(`queue "q" would exceed its capability (a.example.com.deviceclass.resource.k8s.io/devices 3 > 2, b.example.com.deviceclass.resource.k8s.io/memory 9Gi > 8Gi, a.example.com.deviceclass.resource.k8s.io/devices 1 > 0).`)
	assert.Equal(t, []corev1.ResourceName{"a.example.com.deviceclass.resource.k8s.io/devices", "b.example.com.deviceclass.resource.k8s.io/memory"}, names)
	assert.Equal(t, []string{"a.example.com", "b.example.com"}, classes)
	assert.Equal(t, "DeviceClasses a.example.com and b.example.com", deviceClassesPhrase(classes))
}

// `queues` shows device resources by their DeviceClass.
func TestQueuesShowDevices(t *testing.T) {
	q := &schedulingv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1, Capability: corev1.ResourceList{gpuDevices: resource.MustParse("2")}},
		Status: schedulingv1alpha1.QueueStatus{
			Allocated: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpuDevices: resource.MustParse("2")},
			Deserved:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), gpuDevices: resource.MustParse("2")},
		},
	}
	o, out := testOptions(nil, q)
	rows, err := o.queueRows()
	require.NoError(t, err)
	require.NoError(t, printQueues(o, rows, false))
	assert.Contains(t, out.String(), "cpu: 1, gpu.tephra.dev devices: 2")
	assert.Contains(t, out.String(), "[##########] 100% gpu.tephra.dev devices")
	assert.NotContains(t, out.String(), "deviceclass.resource.k8s.io", "tables abbreviate device resources")
	assert.Equal(t, string(gpuDevices), rows[1].ShareResource, "-o json keeps the resource name")
}

// `why` says plainly that a pod waits for the devices of a DeviceClass when its queue's
// capability holds them back.
func TestWhyNamesTheDeviceClass(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.QueueLabel: "gpu"}},
		Spec:       corev1.PodSpec{SchedulerName: schedulingv1alpha1.SchedulerName},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: `QueueCapabilityExceeded: queue "gpu" would exceed its capability (gpu.tephra.dev.deviceclass.resource.k8s.io/devices 3 > 2)`,
		}}},
	}
	q := &schedulingv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1, Capability: corev1.ResourceList{gpuDevices: resource.MustParse("2")}},
		Status:     schedulingv1alpha1.QueueStatus{Allocated: corev1.ResourceList{gpuDevices: resource.MustParse("2")}, Running: 1},
	}
	o, out := testOptions([]runtime.Object{pod}, q)

	v, err := o.why("pod/train")
	require.NoError(t, err)
	assert.True(t, v.Waiting)
	assert.Equal(t, schedulingv1alpha1.ReasonQueueCapability, v.Blocker)
	assert.Equal(t, []string{gpuClass}, v.DeviceClasses)
	assert.Equal(t, `queue "gpu" would exceed its capability (gpu.tephra.dev devices 3 > 2)`, v.Reason)
	assert.Equal(t, "wait for work of queue gpu to release devices of DeviceClass gpu.tephra.dev, or raise the capability of the queue named in the reason in "+string(gpuDevices), v.Unblock)

	o.printVerdict(v)
	assert.Equal(t, `pod ns/train waits for devices of DeviceClass gpu.tephra.dev (QueueCapabilityExceeded): queue "gpu" would exceed its capability (gpu.tephra.dev devices 3 > 2)
  queue gpu: allocated gpu.tephra.dev devices: 2, deserved -, capability gpu.tephra.dev devices: 2; workloads: 0 pending, 1 running
To unblock: wait for work of queue gpu to release devices of DeviceClass gpu.tephra.dev, or raise the capability of the queue named in the reason in gpu.tephra.dev.deviceclass.resource.k8s.io/devices
`, out.String())
}

// `top` counts the devices the Ready nodes' ResourceSlices offer and those the bound pods'
// claims hold, a claim shared by two pods once.
func TestTopCountsDevices(t *testing.T) {
	ready := corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	nodes := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: ready},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}},
	}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: gpuClass}}
	slice := func(node string, devices int) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
			Spec:       resourceapi.ResourceSliceSpec{Driver: "gpu.tephra.dev", NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
		}
		for i := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-" + string(rune('0'+i))})
		}
		return s
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	p0, p1 := pod("p0"), pod("p1")
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.tephra.dev", Pool: "n1", Device: "gpu-0"},
			}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p0", UID: p0.UID}, {Resource: "pods", Name: "p1", UID: p1.UID}},
		},
	}
	o, out := testOptions(append(nodes, class, slice("n1", 4), slice("gone", 4), claim, p0, p1))

	u, err := o.usage(10)
	require.NoError(t, err)
	assert.Contains(t, u.Cluster, capacityOf{Resource: string(gpuDevices), Allocatable: "4", Requested: "1", Free: "3"},
		"the Ready node's 4 GPUs, one held by the claim the two pods share")
	require.NoError(t, printUsage(o, u))
	assert.Regexp(t, `gpu.tephra.dev devices +4 +1 +3`, out.String())

	// Without DeviceClasses, top shows no devices.
	o, _ = testOptions(append(nodes, slice("n1", 4), claim, p0, p1))
	u, err = o.usage(10)
	require.NoError(t, err)
	for _, c := range u.Cluster {
		assert.NotEqual(t, string(gpuDevices), c.Resource)
	}
}

// `top` tells free GPUs on whole nodes, which a gang of whole nodes can use, from those scattered
// over partly used nodes.
func TestTopTellsFreeGPUsOnWholeNodesFromScatteredOnes(t *testing.T) {
	const gpu corev1.ResourceName = "nvidia.com/gpu"
	var objects []runtime.Object
	for i, used := range []int64{3, 8, 0} {
		name := fmt.Sprintf("n%d", i)
		objects = append(objects, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), gpu: resource.MustParse("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}})
		if used > 0 {
			objects = append(objects, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p-" + name, Namespace: "ns"},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gpu: *resource.NewQuantity(used, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("1")},
				}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
	}
	o, out := testOptions(objects)
	u, err := o.usage(10)
	require.NoError(t, err)
	assert.Contains(t, u.Cluster, capacityOf{Resource: string(gpu), Allocatable: "24", Requested: "11", Free: "13", FreeOnWholeNodes: "8"},
		"of 13 free GPUs, 8 are on the empty node; 5 are scattered on the partly used one")
	require.NoError(t, printUsage(o, u))
	assert.Regexp(t, `nvidia.com/gpu +24 +11 +13 +8\n`, out.String())
	assert.Regexp(t, `cpu +192 +2 +190 +-\n`, out.String(), "CPU is not counted by whole nodes")
}
