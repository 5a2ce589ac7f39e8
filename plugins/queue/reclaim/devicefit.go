package reclaim

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// deviceFit decides, in reclaim's dry run, whether a preemptor's ResourceClaims could be
// allocated on a node once its victims are gone. kube-scheduler's DynamicResources plugin cannot
// say so: its Filter allocates against the devices that were allocated when the cycle began,
// whichever pods the dry run removes from the node, so it never sees a victim's devices freed
// (upstream's own preemption frees no devices either). The dry run therefore skips that Filter
// and asks the same allocator with the victims' devices given back: only victims whose claims
// free devices the preemptor can actually be allocated (its class, on that node, under its
// constraints) make room. A claim that other pods still use frees nothing.
type deviceFit struct {
	handle   fwk.Handle
	features structured.Features
	cel      *cel.Cache
	// claims are the preemptor's claims that still need an allocation; allocatedOn the nodes
	// its allocated claims can be used on (DynamicResources' Filter, skipped, checks that too).
	claims      []*resourceapi.ResourceClaim
	allocatedOn []*corev1.NodeSelector
	allocated   *structured.AllocatedState
	slices      []*resourceapi.ResourceSlice
}

// newDeviceFit returns the device check for a preemptor, or nil when none is needed: none of its
// claims waits for an allocation. It also says when the check cannot be made (the scheduler's
// claim for a DRA-backed extended resource exists only once allocated): reclaim then keeps
// DynamicResources' own verdict.
func (r *Reclaimer) newDeviceFit(pod *corev1.Pod) (*deviceFit, error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	dra := r.handle.SharedDRAManager()
	if dra == nil {
		return nil, nil
	}
	f := &deviceFit{handle: r.handle, cel: r.deviceCEL}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue
		}
		claim, err := dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, err
		}
		if claim.Status.Allocation == nil {
			f.claims = append(f.claims, claim)
		} else if claim.Status.Allocation.NodeSelector != nil {
			f.allocatedOn = append(f.allocatedOn, claim.Status.Allocation.NodeSelector)
		}
	}
	if len(f.claims) == 0 {
		return nil, nil
	}
	allocated, err := dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	f.allocated = allocated
	if f.slices, err = dra.ResourceSlices().ListWithDeviceTaintRules(); err != nil {
		return nil, err
	}
	f.features = dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	return f, nil
}

// skipDRAFilter makes the dry run's Filter leave devices to the deviceFit.
func skipDRAFilter(cs fwk.CycleState) {
	skip := sets.New[string](names.DynamicResources)
	if old := cs.GetSkipFilterPlugins(); old != nil {
		skip = skip.Union(old)
	}
	cs.SetSkipFilterPlugins(skip)
}

// fits says whether the preemptor's claims can be allocated on node without the removed pods.
func (f *deviceFit) fits(ctx context.Context, node *corev1.Node, removed map[types.UID]*corev1.Pod) (bool, error) {
	for _, selector := range f.allocatedOn {
		s, err := nodeaffinity.NewNodeSelector(selector)
		if err != nil {
			return false, fmt.Errorf("devices: %w", err)
		}
		if !s.Match(node) {
			return false, nil // an allocated claim of the pod is not available there
		}
	}
	state := structured.AllocatedState{
		AllocatedDevices:         f.allocated.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: f.allocated.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       f.allocated.AggregatedCapacity.Clone(),
	}
	dra := f.handle.SharedDRAManager()
	for _, pod := range removed {
		for i := range pod.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			claim, err := dra.ResourceClaims().Get(pod.Namespace, *name)
			if err != nil || claim.Status.Allocation == nil || !onlyUsedBy(claim, removed) {
				continue
			}
			free(&state, claim.Status.Allocation)
		}
	}
	allocator, err := structured.NewAllocator(ctx, f.features, state, dra.DeviceClasses(), f.slices, f.cel)
	if err != nil {
		return false, fmt.Errorf("devices: %w", err)
	}
	results, err := allocator.Allocate(ctx, node, f.claims)
	if err != nil {
		return false, fmt.Errorf("devices: %w", err)
	}
	return len(results) == len(f.claims), nil
}

// onlyUsedBy says whether every pod that reserved a claim is among the removed.
func onlyUsedBy(claim *resourceapi.ResourceClaim, removed map[types.UID]*corev1.Pod) bool {
	for _, ref := range claim.Status.ReservedFor {
		if _, gone := removed[ref.UID]; !gone {
			return false
		}
	}
	return true
}

// free gives an allocation's devices back to state: a device allocated whole, or the share of a
// device that allows several allocations, with the capacity that share consumed.
func free(state *structured.AllocatedState, allocation *resourceapi.AllocationResult) {
	for _, result := range allocation.Devices.Results {
		id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
		if result.ShareID == nil {
			state.AllocatedDevices.Delete(id)
			continue
		}
		state.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, result.ShareID))
		if len(result.ConsumedCapacity) > 0 {
			state.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
		}
	}
}

// devicesMayFree lets reclaim try the nodes where DynamicResources found no devices for the
// preemptor. It marks them UnschedulableAndUnresolvable, which keeps upstream's evaluator from
// trying them at all; but a victim's devices may be what the preemptor needs there, and the
// dry run's deviceFit tells.
type devicesMayFree struct{ fwk.NodeToStatusReader }

// noDevices is the message of DynamicResources' Filter for a node without the devices asked for.
const noDevices = "cannot allocate all claims"

func lackedDevices(s *fwk.Status) bool {
	return s.Code() == fwk.UnschedulableAndUnresolvable && s.Plugin() == names.DynamicResources && slices.Contains(s.Reasons(), noDevices)
}

func (d devicesMayFree) Get(node string) *fwk.Status {
	s := d.NodeToStatusReader.Get(node)
	if lackedDevices(s) {
		return fwk.NewStatus(fwk.Unschedulable, s.Reasons()...).WithPlugin(s.Plugin())
	}
	return s
}

func (d devicesMayFree) NodesForStatusCode(lister fwk.NodeInfoLister, code fwk.Code) ([]fwk.NodeInfo, error) {
	out, err := d.NodeToStatusReader.NodesForStatusCode(lister, code)
	if err != nil || code != fwk.Unschedulable {
		return out, err
	}
	unresolvable, err := d.NodeToStatusReader.NodesForStatusCode(lister, fwk.UnschedulableAndUnresolvable)
	if err != nil {
		return nil, err
	}
	for _, n := range unresolvable {
		if lackedDevices(d.NodeToStatusReader.Get(n.Node().Name)) {
			out = append(out, n)
		}
	}
	return out, nil
}
