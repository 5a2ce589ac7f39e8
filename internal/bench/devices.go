package bench

import (
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// Scenario G8-DRA's devices (Scenario.Devices): every node publishes devicesPerNode whole GPUs of
// the local cluster's simulated DRA driver in a ResourceSlice (no driver runs: the slices are
// all kube-scheduler's DynamicResources plugin needs to allocate), and every pod claims one of
// DeviceClass localcluster.GPUClass through its namespace's ResourceClaimTemplate claimTemplate.
// kube-controller-manager's resourceclaim controller, started alone for the backlog, generates
// each pod's claim from the template, as in a cluster; it is stopped before the scheduler starts,
// so that while the backlog drains only the scheduler and the driver talk to the apiserver, as in
// the other scenarios.
const (
	devicesPerNode = 4
	claimTemplate  = "gpu"
	podClaimName   = "gpu"
)

// claimControllerArgs run kube-controller-manager with the resourceclaim controller alone (the
// node lifecycle controller, among others, would taint the benchmark's nodes, which send no
// heartbeats), and without its client's default limit of 500 requests per second: it makes two
// per pod (the claim, and the pod's status naming it).
var claimControllerArgs = []string{
	"--controllers=resourceclaim-controller",
	"--kube-api-qps=5000", "--kube-api-burst=5000",
}

// deviceShape is what every node publishes in scenarios with devices.
var deviceShape = localcluster.DeviceShape{GPUs: devicesPerNode}

// publishDevices publishes the simulated driver's DeviceClasses and a ResourceSlice for every
// node, once per control plane.
func (b *benchCluster) publishDevices(ctx context.Context) error {
	if b.devicesPublished {
		return nil
	}
	for _, class := range localcluster.DeviceClasses() {
		if _, err := b.fast.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DeviceClass %s: %w", class.Name, err)
		}
	}
	err := parallel(ctx, 16, len(b.nodes), func(ctx context.Context, i int) error {
		slice := localcluster.SimulatedSlice(b.nodes[i], deviceShape)
		if _, err := b.fast.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("publishing the devices of %s: %w", b.nodes[i], err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.devicesPublished = true
	return nil
}

// unpublishDevices deletes the ResourceSlices and DeviceClasses (smoke runs, whose control plane
// runs the next scenario).
func (b *benchCluster) unpublishDevices(ctx context.Context) error {
	if !b.devicesPublished {
		return nil
	}
	all := metav1.ListOptions{}
	if err := b.fast.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the ResourceSlices: %w", err)
	}
	if err := b.fast.ResourceV1().DeviceClasses().DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the DeviceClasses: %w", err)
	}
	b.devicesPublished = false
	return nil
}

// createClaimTemplate creates the namespace's ResourceClaimTemplate: one device of GPUClass.
func (w *workload) createClaimTemplate(ctx context.Context, b *benchCluster) error {
	template := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: claimTemplate, Namespace: w.namespace},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: localcluster.GPUClass}}},
		}}},
	}
	if _, err := b.fast.ResourceV1().ResourceClaimTemplates(w.namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceClaimTemplate %s: %w", claimTemplate, err)
	}
	return nil
}

// startClaimController starts kube-controller-manager with its resourceclaim controller alone
// (claimControllerArgs), which generates the claims of the pods created next.
func (b *benchCluster) startClaimController(ctx context.Context) error {
	if err := b.StartComponent(ctx, localcluster.ControllerManager); err != nil {
		return fmt.Errorf("starting kube-controller-manager's resourceclaim controller: %w", err)
	}
	return nil
}

// waitClaims waits until the recorder has seen every pod name its generated claim, then stops
// kube-controller-manager.
func (b *benchCluster) waitClaims(ctx context.Context, w *workload, rec *recorder) error {
	defer b.StopComponent(localcluster.ControllerManager)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return rec.counts().claimed == len(w.pods), nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager generated the claims of %d of %d pods (see %s): %w",
			rec.counts().claimed, len(w.pods), b.LogPath(localcluster.ControllerManager), err)
	}
	return nil
}

// allocatedDevices counts the measured pods bound with their claim allocated a device of their
// node's pool and reserved for them, and fails if a device was allocated twice: the check that a
// scenario with devices did not bind pods without their devices.
func (b *benchCluster) allocatedDevices(ctx context.Context, ns string, rec *recorder) (int, error) {
	claims, err := b.fast.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing the ResourceClaims of %s: %w", ns, err)
	}
	nodes := rec.boundNodes()
	type deviceKey struct{ driver, pool, device string }
	taken := map[deviceKey]string{}
	allocated := 0
	for i := range claims.Items {
		claim := &claims.Items[i]
		owner := metav1.GetControllerOf(claim)
		if owner == nil || owner.Kind != "Pod" {
			continue
		}
		node, bound := nodes[owner.Name]
		if !bound || claim.Status.Allocation == nil {
			continue
		}
		reserved := false
		for _, ref := range claim.Status.ReservedFor {
			reserved = reserved || (ref.Resource == "pods" && ref.UID == owner.UID)
		}
		results := claim.Status.Allocation.Devices.Results
		if !reserved || len(results) != 1 || results[0].Driver != localcluster.DeviceDriver || results[0].Pool != node {
			continue
		}
		key := deviceKey{results[0].Driver, results[0].Pool, results[0].Device}
		if other, dup := taken[key]; dup {
			return allocated, fmt.Errorf("device %s/%s allocated to the claims of pods %s and %s", key.pool, key.device, other, owner.Name)
		}
		taken[key] = owner.Name
		allocated++
	}
	return allocated, nil
}

// cleanDevices deletes a namespace's claims and templates (smoke runs; no garbage collector
// deletes the claims with their pods).
func (b *benchCluster) cleanDevices(ctx context.Context, ns string) error {
	all := metav1.ListOptions{}
	if err := b.fast.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the ResourceClaims of %s: %w", ns, err)
	}
	if err := b.fast.ResourceV1().ResourceClaimTemplates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the ResourceClaimTemplates of %s: %w", ns, err)
	}
	return b.unpublishDevices(ctx)
}
