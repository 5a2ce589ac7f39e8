package localcluster

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DeviceDriver is the simulated DRA driver of the local cluster. No kubelet plugin runs: the
// ResourceSlices it would publish are enough for kube-scheduler to allocate its devices, and
// kwok runs the pods.
const DeviceDriver = "gpu.tephra.dev"

// The DeviceClasses of the simulated driver: whole GPUs, and GPUs whose memory several claims
// share (consumable capacity).
const (
	GPUClass       = "gpu.tephra.dev"
	SharedGPUClass = "shared-gpu.tephra.dev"
)

// DeviceShape is what the simulated driver publishes for a node.
type DeviceShape struct {
	// GPUs are whole devices of GPUClass, each with GPUMemory.
	GPUs int
	// SharedGPUs are devices of SharedGPUClass that allow several allocations, each taking a
	// part of the device's GPUMemory (10Gi unless a claim asks for more, in steps of 1Gi).
	SharedGPUs int
	// GPUMemory of each device; default 80Gi.
	GPUMemory string
	// Group, if set, is an attribute "group" of every device, so that a test's DeviceClass
	// (DeviceClassOf) selects only its own nodes' devices, and the cluster's total of the
	// class, and so every queue's share of it, involves only the test's nodes and queues.
	Group string
}

// DeviceClasses returns the simulated driver's DeviceClasses.
func DeviceClasses() []*resourceapi.DeviceClass {
	return []*resourceapi.DeviceClass{DeviceClassOf(GPUClass, "", false), DeviceClassOf(SharedGPUClass, "", true)}
}

// DeviceClassOf is a DeviceClass of the simulated driver's whole GPUs (shared false) or shared
// GPUs, of one group of devices (DeviceShape.Group; "" for all).
func DeviceClassOf(name, group string, shared bool) *resourceapi.DeviceClass {
	kind := "gpu"
	if shared {
		kind = "shared-gpu"
	}
	expression := fmt.Sprintf(`device.driver == %q && device.attributes[%q].kind == %q`, DeviceDriver, DeviceDriver, kind)
	if group != "" {
		expression += fmt.Sprintf(` && device.attributes[%q].group == %q`, DeviceDriver, group)
	}
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}}},
	}
}

// CreateDeviceClasses creates the simulated driver's DeviceClasses (those that exist are kept).
func (c *Cluster) CreateDeviceClasses(ctx context.Context) error {
	for _, class := range DeviceClasses() {
		if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DeviceClass %s: %w", class.Name, err)
		}
	}
	return nil
}

// SimulatedSlice is the ResourceSlice the simulated driver publishes for a node: one pool named
// after the node, with the node's devices.
func SimulatedSlice(node string, shape DeviceShape) *resourceapi.ResourceSlice {
	memory := resource.MustParse("80Gi")
	if shape.GPUMemory != "" {
		memory = resource.MustParse(shape.GPUMemory)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + DeviceDriver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   DeviceDriver,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	attributes := func(kind string, i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"kind": {StringValue: ptr.To(kind)}, "index": {IntValue: ptr.To(int64(i))}}
		if shape.Group != "" {
			a["group"] = resourceapi.DeviceAttribute{StringValue: ptr.To(shape.Group)}
		}
		return a
	}
	for i := range shape.GPUs {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: attributes("gpu", i),
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: memory}},
		})
	}
	for i := range shape.SharedGPUs {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{
			Name:                     fmt.Sprintf("shared-gpu-%d", i),
			AllowMultipleAllocations: ptr.To(true),
			Attributes:               attributes("shared-gpu", i),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {
				Value: memory,
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default:    ptr.To(resource.MustParse("10Gi")),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi")), Step: ptr.To(resource.MustParse("1Gi"))},
				},
			}},
		})
	}
	return slice
}

// PublishDevices publishes the simulated driver's ResourceSlice for each node (those that
// exist are kept), and its DeviceClasses.
func (c *Cluster) PublishDevices(ctx context.Context, nodes []string, shape DeviceShape) error {
	if err := c.CreateDeviceClasses(ctx); err != nil {
		return err
	}
	for _, node := range nodes {
		slice := SimulatedSlice(node, shape)
		if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("publishing the devices of %s: %w", node, err)
		}
	}
	return nil
}
