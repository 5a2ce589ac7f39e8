package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	topologyv1alpha2 "github.com/tephra-dev/tephra/apis/topology/v1alpha2"
)

// GPUResource is the extended resource simulated nodes offer as GPUs.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// KwokNodeAnnotation marks a node as simulated by kwok; any node with it (and kwokManagedLabel)
// is managed.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// kwokManagedLabel=kwokManagedValue is on every simulated node; kwok manages only nodes with it.
const (
	kwokManagedLabel = "type"
	kwokManagedValue = "kwok"
)

// NodeShape is what a simulated node offers.
type NodeShape struct {
	CPU    string // e.g. "8"
	Memory string // e.g. "32Gi"
	Pods   int    // default 110
	GPUs   int
	// Extended adds extended resources, e.g. a resource of a test's own that no other test's
	// nodes offer, so that queue shares computed from the cluster total involve only its nodes.
	Extended map[corev1.ResourceName]int64
	// Labels are added to the node's, e.g. to keep a test's pods on its own nodes.
	Labels map[string]string
	// Taints of the node.
	Taints []corev1.Taint
	// NUMA, if set, publishes a NodeResourceTopology for the node, as NFD's topology-updater
	// would on a real one.
	NUMA *NUMAShape
	// Devices, if set, are published in a ResourceSlice of the simulated DRA driver (devices.go).
	Devices *DeviceShape
}

// NUMAShape is how a simulated node's resources split into NUMA zones.
type NUMAShape struct {
	// Zones splits CPU, memory and GPUs evenly into this many zones named node-0, node-1, ...
	Zones int
	// Policy and Scope are kubelet's Topology Manager settings the node reports:
	// single-numa-node, restricted, best-effort or none; container or pod.
	Policy, Scope string
}

// DefaultNodeShape is the shape of `make up`'s nodes: 2 NUMA zones under single-numa-node.
var DefaultNodeShape = NodeShape{CPU: "8", Memory: "32Gi", Pods: 110, GPUs: 4,
	NUMA: &NUMAShape{Zones: 2, Policy: "single-numa-node", Scope: "container"}}

// SimulatedNode returns a Node object that kwok will run, with the given shape.
func SimulatedNode(name string, shape NodeShape) *corev1.Node {
	pods := shape.Pods
	if pods == 0 {
		pods = 110
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(shape.CPU),
		corev1.ResourceMemory: resource.MustParse(shape.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	if shape.GPUs > 0 {
		resources[GPUResource] = *resource.NewQuantity(int64(shape.GPUs), resource.DecimalSI)
	}
	for name, v := range shape.Extended {
		resources[name] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	labels := map[string]string{
		kwokManagedLabel:         kwokManagedValue,
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	for k, v := range shape.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: shape.Taints},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Phase:       corev1.NodeRunning,
		},
	}
}

// SimulatedTopology is the NodeResourceTopology of a simulated node: its CPUs, memory and GPUs
// split evenly into shape.NUMA.Zones zones, all available.
func SimulatedTopology(name string, shape NodeShape) *topologyv1alpha2.NodeResourceTopology {
	zones := int64(shape.NUMA.Zones)
	cpu, memory := resource.MustParse(shape.CPU), resource.MustParse(shape.Memory)
	perZone := map[string]resource.Quantity{
		"cpu":    *resource.NewMilliQuantity(cpu.MilliValue()/zones, resource.DecimalSI),
		"memory": *resource.NewQuantity(memory.Value()/zones, resource.BinarySI),
	}
	if shape.GPUs > 0 {
		perZone[string(GPUResource)] = *resource.NewQuantity(int64(shape.GPUs)/zones, resource.DecimalSI)
	}
	topology := &topologyv1alpha2.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Attributes: topologyv1alpha2.AttributeList{
			{Name: topologyv1alpha2.AttributeTopologyManagerPolicy, Value: shape.NUMA.Policy},
			{Name: topologyv1alpha2.AttributeTopologyManagerScope, Value: shape.NUMA.Scope},
		},
	}
	for z := range shape.NUMA.Zones {
		zone := topologyv1alpha2.Zone{Name: fmt.Sprintf("node-%d", z), Type: topologyv1alpha2.ZoneTypeNode}
		for _, name := range []string{"cpu", "memory", string(GPUResource)} {
			if q, ok := perZone[name]; ok {
				zone.Resources = append(zone.Resources, topologyv1alpha2.ResourceInfo{Name: name, Capacity: q, Allocatable: q, Available: q})
			}
		}
		topology.Zones = append(topology.Zones, zone)
	}
	return topology
}

// CreateNodes creates count simulated nodes named prefix-0, prefix-1, ... and waits until they
// are Ready and untainted by the node lifecycle controller.
func (c *Cluster) CreateNodes(ctx context.Context, prefix string, count int, shape NodeShape) ([]string, error) {
	names := make([]string, 0, count)
	for i := range count {
		node := SimulatedNode(fmt.Sprintf("%s-%d", prefix, i), shape)
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return names, fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		names = append(names, node.Name)
		if shape.NUMA != nil {
			topology := SimulatedTopology(node.Name, shape)
			if _, err := c.Tephra.TopologyV1alpha2().NodeResourceTopologies().Create(ctx, topology, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return names, fmt.Errorf("creating the NodeResourceTopology of %s: %w", node.Name, err)
			}
		}
	}
	if shape.Devices != nil {
		if err := c.PublishDevices(ctx, names, *shape.Devices); err != nil {
			return names, err
		}
	}
	return names, c.WaitNodesReady(ctx, names...)
}

// WaitNodesReady waits until the named nodes are Ready and carry no not-ready taint.
func (c *Cluster) WaitNodesReady(ctx context.Context, names ...string) error {
	for _, name := range names {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if !nodeReady(node) {
				last = "not Ready"
				return false, nil
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
					last = "tainted " + taint.Key
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for node %s to be Ready (%s): %w", name, last, err)
		}
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// LoseNode makes a simulated node stop reporting, as a node whose kubelet or network is gone:
// kwok no longer renews its lease or status, nor ends its pods, so the node lifecycle controller
// finds it unreachable after its grace period, taints it, and evicts its pods once their
// toleration is over; the evicted pods stay Terminating, as on a real unreachable node.
func (c *Cluster) LoseNode(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"lost"}}}`, kwokManagedLabel)
	_, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
