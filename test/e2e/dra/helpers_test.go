// Package dra checks that Tephra's queues count the devices Dynamic Resource Allocation hands
// out, end to end on a real control plane: kube-scheduler's DynamicResources plugin in
// tephra-scheduler allocates devices that the local cluster's simulated driver (gpu.tephra.dev)
// publishes in ResourceSlices for kwok nodes, the controller manager makes claims from
// ResourceClaimTemplates, and a Queue's capability, share, reclaim and status speak of
// devices: "<class>.deviceclass.resource.k8s.io/devices", a consumable capacity as
// ".../memory", and a class's extended resource name.
//
// Each test has nodes of its own whose devices carry a group of its own, and a DeviceClass that
// selects only that group (localcluster.DeviceClassOf), so that the cluster's total of its class,
// and so every queue's share of it, involves only its nodes and queues. The tests run one at a
// time: the examples' pods use the shared classes gpu.tephra.dev and shared-gpu.tephra.dev, which
// select any test's devices.
package dra

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

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

// TestMain runs the package as shipped, usage history included: minutes of one queue running alone
// weigh nothing against its week-long half-life, so shares stay by weight (docs/queues.md).
func TestMain(m *testing.M) {
	// A preemptor binds soon after its victims go, never at the periodic flush (issue #38).
	framework.CheckPreemptorsInEveryTest()
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// queueLabel says which queue a test's pod is in, whether it names its queue or its group does.
const queueLabel = framework.QueueLabel

// devicesOf is the queue resource of a DeviceClass's devices.
func devicesOf(class string) corev1.ResourceName { return quota.DevicesName(class) }

// devicePool creates count nodes named prefix-0.. whose simulated driver publishes devices of
// shape (its Group set to prefix unless set), and deletes them and their ResourceSlices when the
// test ends. Its pods select the nodes by the returned labels.
func devicePool(t *testing.T, env *framework.Env, prefix string, count int, devices localcluster.DeviceShape) map[string]string {
	t.Helper()
	pool := map[string]string{framework.PoolLabel: prefix}
	if devices.Group == "" {
		devices.Group = prefix
	}
	names, err := env.Cluster.CreateNodes(context.Background(), prefix, count, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: pool, Devices: &devices,
	})
	t.Cleanup(func() { deleteNodes(env, names) })
	require.NoError(t, err)
	return pool
}

// deleteNodes deletes simulated nodes and the ResourceSlices the simulated driver published for
// them (a kubelet would delete those of a node that goes).
func deleteNodes(env *framework.Env, names []string) {
	for _, node := range names {
		_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		_ = env.Kube.ResourceV1().ResourceSlices().Delete(context.Background(), localcluster.SimulatedSlice(node, localcluster.DeviceShape{}).Name, metav1.DeleteOptions{})
	}
}

// createClass creates a DeviceClass of the simulated driver's devices of one group (whole GPUs,
// or shared ones), changed by mutate, and deletes it when the test ends.
func createClass(t *testing.T, env *framework.Env, name, group string, shared bool, mutate func(*resourceapi.DeviceClass)) {
	t.Helper()
	class := localcluster.DeviceClassOf(name, group, shared)
	if mutate != nil {
		mutate(class)
	}
	_, err := env.Kube.ResourceV1().DeviceClasses().Create(context.Background(), class, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createGroup creates a PodGroup in a queue.
func createGroup(t *testing.T, env *framework.Env, ns, name, queue string, minMember int32) {
	t.Helper()
	pg := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue},
	}
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

// deviceRequest asks for count devices of a class, each with capacity (nil for the device's
// default), as the request named "gpu" of a claim.
func deviceRequest(class string, count int64, capacity map[resourceapi.QualifiedName]resource.Quantity) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
	}}
	if capacity != nil {
		r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: capacity}
	}
	return r
}

// createTemplate creates a ResourceClaimTemplate with requests in a namespace.
func createTemplate(t *testing.T, env *framework.Env, ns, name string, requests ...resourceapi.DeviceRequest) {
	t.Helper()
	_, err := env.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createClaim creates a ResourceClaim with requests in a namespace, for pods to name directly.
func createClaim(t *testing.T, env *framework.Env, ns, name string, requests ...resourceapi.DeviceRequest) {
	t.Helper()
	_, err := env.Kube.ResourceV1().ResourceClaims(ns).Create(context.Background(), &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// claimRef is a claim of a pod: made from a template for the pod alone, or named directly
// (shared with every pod that names it).
type claimRef struct{ entry, template, claim string }

func fromTemplate(entry, template string) claimRef { return claimRef{entry: entry, template: template} }
func named(entry, claim string) claimRef           { return claimRef{entry: entry, claim: claim} }

// devicePod is a pod of a test that runs until deleted, with claims, in a queue or a group.
type devicePod struct {
	queue, group string
	pool         map[string]string
	claims       []claimRef
	// requests of the container besides 100m of CPU (an extended resource a DeviceClass serves).
	requests corev1.ResourceList
}

func (d devicePod) build(ns, name string) *corev1.Pod {
	labels := map[string]string{queueLabel: d.queue}
	if d.group != "" {
		labels[schedulingv1alpha1.PodGroupLabel] = d.group
	} else {
		labels[schedulingv1alpha1.QueueLabel] = d.queue
	}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	limits := corev1.ResourceList{}
	for name, q := range d.requests {
		requests[name], limits[name] = q, q
	}
	container := corev1.Container{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  d.pool,
		},
	}
	for _, c := range d.claims {
		ref := corev1.PodResourceClaim{Name: c.entry}
		if c.template != "" {
			ref.ResourceClaimTemplateName = ptr.To(c.template)
		} else {
			ref.ResourceClaimName = ptr.To(c.claim)
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, ref)
		container.Resources.Claims = append(container.Resources.Claims, corev1.ResourceClaim{Name: c.entry})
	}
	pod.Spec.Containers = []corev1.Container{container}
	return pod
}

// submit creates count pods named prefix-0.. and returns their names.
func submit(t *testing.T, env *framework.Env, ns string, count int, prefix string, d devicePod) []string {
	t.Helper()
	var names []string
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), d.build(ns, name), metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, name)
	}
	return names
}

// deletePods deletes pods at once.
func deletePods(t *testing.T, env *framework.Env, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
}

// podStates describes a namespace's pods and claims, for failure messages.
func podStates(env *framework.Env, ns string) string {
	var b strings.Builder
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s: %s on %q (nominated %q); events %s\n", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.NominatedNodeName, env.Events(ns, p.Name))
		}
	}
	claims, err := env.Kube.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, c := range claims.Items {
			fmt.Fprintf(&b, "claim %s: %s, reserved for %d\n", c.Name, allocationOf(&c), len(c.Status.ReservedFor))
		}
	}
	return b.String()
}

// allocationOf describes a claim's allocation: its devices, or "not allocated".
func allocationOf(c *resourceapi.ResourceClaim) string {
	if c.Status.Allocation == nil {
		return "not allocated"
	}
	var devices []string
	for _, r := range c.Status.Allocation.Devices.Results {
		d := r.Pool + "/" + r.Device
		for name, q := range r.ConsumedCapacity {
			d += fmt.Sprintf(" %s=%s", name, q.String())
		}
		devices = append(devices, d)
	}
	return "allocated " + strings.Join(devices, ", ")
}

// claims lists the ResourceClaims of a namespace.
func claims(t *testing.T, env *framework.Env, ns string) []resourceapi.ResourceClaim {
	t.Helper()
	list, err := env.Kube.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}

// allocatedClaims counts the allocated claims of a namespace.
func allocatedClaims(t *testing.T, env *framework.Env, ns string) int {
	t.Helper()
	n := 0
	for _, c := range claims(t, env, ns) {
		if c.Status.Allocation != nil {
			n++
		}
	}
	return n
}

// pendingOf returns the names of the pods of a namespace that are not bound.
func pendingOf(t *testing.T, env *framework.Env, ns string) []string {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}
