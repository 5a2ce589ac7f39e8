// Package placement is Tephra's accelerator placement plugin. It scores nodes so that
// accelerators are packed and whole nodes stay free for gangs: upstream's profile scores CPU and
// memory only (NodeResourcesFit LeastAllocated), which spreads 1-GPU pods over every node until
// no node is free for a gang of whole nodes.
//
//   - A pod that asks for accelerators (the extended resources named in the args, or DRA devices
//     through its ResourceClaims) goes to nodes whose accelerators are already partly used, the
//     fullest that fits first (MostAllocated), or spreads (LeastAllocated).
//   - A pod that asks for none keeps off nodes with accelerators where others fit.
//
// Filtering is left to NodeResourcesFit and DynamicResources: the plugin only scores.
package placement

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraPlacement"

// stateKey holds the pod's accelerator demand in the cycle state.
const stateKey fwk.StateKey = "PreScore" + Name

// signerName keys the pod's accelerator requests in its signature.
const signerName = "v1.Pod.Spec.Containers.Resources.Requests.Accelerators()"

// deviceView is what the plugin reads of DRA: what a node's ResourceSlices offer and what is
// free of it, and what a pod's claims are charged, as DeviceClass resources
// (quota.DevicesName). devices.Devices, shared with TephraQueue and TephraGang, is one.
type deviceView interface {
	OnNode(node string) quota.Amounts
	OfferedOnNodes() quota.Amounts
	FreeOn(node fwk.NodeInfo) quota.Amounts
	Charge(pod *corev1.Pod) quota.PodDevices
}

// Placement is the accelerator placement plugin.
type Placement struct {
	args         *Args
	accelerators []corev1.ResourceName
	scorer       scorer
	devices      deviceView
	// mix is the recent mix of accelerator pod shapes, under Fragmentation (else nil).
	mix *shapeMix
	// acceleratorNodes are the nodes that offer accelerators (nil: not watched; look at the nodes).
	acceleratorNodes *acceleratorNodes
}

var (
	_ fwk.PreScorePlugin = &Placement{}
	_ fwk.ScorePlugin    = &Placement{}
	_ fwk.SignPlugin     = &Placement{}
)

// New builds the plugin on the scheduler's shared view of DRA devices, and keeps the gauge of
// free accelerators.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	d, err := devices.For(handle)
	if err != nil {
		return nil, err
	}
	p := newPlacement(args, d)
	p.acceleratorNodes = newAcceleratorNodes(p.accelerators)
	if err := p.acceleratorNodes.watch(handle.SharedInformerFactory().Core().V1().Nodes().Informer()); err != nil {
		return nil, err
	}
	p.countFreeEvery(ctx, handle, freePeriod)
	if p.mix != nil {
		if err := p.learnShapes(handle); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func newPlacement(args *Args, d deviceView) *Placement {
	p := &Placement{args: args, scorer: scorerFor(args.ScoringStrategy), devices: d}
	if args.ScoringStrategy == Fragmentation {
		p.mix = newShapeMix()
	}
	for _, name := range args.Accelerators {
		p.accelerators = append(p.accelerators, corev1.ResourceName(name))
	}
	return p
}

// Name of the plugin.
func (p *Placement) Name() string { return Name }

// demand is what a pod asks for of accelerators: extended resources, and DRA devices as
// DeviceClass resources.
type demand struct {
	extended map[corev1.ResourceName]int64
	devices  quota.Amounts
	// mix is, under Fragmentation, the mix of shapes of each resource the pod asks for, read once
	// in PreScore for every node's Score.
	mix map[corev1.ResourceName]map[int64]float64
}

func (d *demand) Clone() fwk.StateData { return d }

func (d *demand) none() bool { return len(d.extended) == 0 && len(d.devices) == 0 }

// acceleratorRequests are the pod's requests of accelerator extended resources (nil for none).
func (p *Placement) acceleratorRequests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	var out map[corev1.ResourceName]int64
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for _, name := range p.accelerators {
		if q, ok := requests[name]; ok && q.Value() > 0 {
			if out == nil {
				out = map[corev1.ResourceName]int64{}
			}
			out[name] = q.Value()
		}
	}
	return out
}

// demandOf is the pod's demand. Of its claims only device counts are taken (a consumable
// capacity or counter is not a device a node runs out of whole).
func (p *Placement) demandOf(pod *corev1.Pod) *demand {
	d := &demand{extended: p.acceleratorRequests(pod)}
	if p.devices == nil || !devices.UsesDevices(pod) {
		return d
	}
	for name, v := range p.devices.Charge(pod).Charged {
		if _, amount, ok := quota.DeviceClassOf(name); ok && amount == "devices" && v > 0 {
			if d.devices == nil {
				d.devices = quota.Amounts{}
			}
			d.devices[name] = v
		}
	}
	return d
}

// SignPod lets the scheduler batch pods that claim no devices: their score depends on their
// accelerator requests only, which the fragment carries. A pod's claims are charged from claim
// objects (their allocation, who reserved them first), which a signature cannot capture.
func (p *Placement) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if devices.UsesDevices(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods that claim devices are not signable: TephraPlacement scores them by their claims")
	}
	requests := p.acceleratorRequests(pod)
	if requests == nil {
		requests = map[corev1.ResourceName]int64{}
	}
	return []fwk.SignFragment{{Key: signerName, Value: requests}}, nil
}

// PreScore computes the pod's demand, and skips the plugin where it has nothing to say: for an
// accelerator pod under None; for other pods when they need not avoid accelerator nodes; for a
// pod whose claims charge it no device (it shares a claim another pod was charged, and goes
// where that claim's devices are).
func (p *Placement) PreScore(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	d := p.demandOf(pod)
	switch {
	case !d.none() && p.scorer == nil:
		return fwk.NewStatus(fwk.Skip)
	case d.none() && devices.UsesDevices(pod):
		return fwk.NewStatus(fwk.Skip)
	case d.none() && !*p.args.AvoidAcceleratorNodes:
		return fwk.NewStatus(fwk.Skip)
	case d.none() && !p.anyAcceleratorNode(nodes):
		// Every node scores the same: the pods of a cluster without accelerators cost nothing.
		return fwk.NewStatus(fwk.Skip)
	}
	if p.mix != nil && len(d.devices) > 0 {
		// A pod's devices are known from its claims, which may come after the pod: they are
		// learnt here, once the claims are there (extended resources from the pod informer).
		p.mix.observe(pod.UID+"/devices", &demand{devices: d.devices})
	}
	if p.mix != nil && !d.none() {
		d.mix = p.mix.sharesOf(d)
	}
	state.Write(stateKey, d)
	return nil
}

// Score scores the node by the strategy on the accelerators the pod asks for, or, for a pod that
// asks for none, by how much of the node's accelerators is free (avoidScore).
func (p *Placement) Score(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(stateKey)
	if err != nil {
		return 0, fwk.AsStatus(fmt.Errorf("reading %q from cycle state: %w", stateKey, err))
	}
	d, ok := data.(*demand)
	if !ok {
		return 0, fwk.AsStatus(fmt.Errorf("%+v is not a placement demand", data))
	}
	if nodeInfo.Node() == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	if d.none() {
		used, total := p.acceleratorsOn(nodeInfo)
		return avoidScore(used, total), nil
	}
	n := len(d.extended) + len(d.devices)
	names := make([]corev1.ResourceName, 0, n)
	requested, allocated, allocatable := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	alloc, req := nodeInfo.GetAllocatable().GetScalarResources(), nodeInfo.GetRequested().GetScalarResources()
	for name, v := range d.extended {
		names = append(names, name)
		requested, allocated, allocatable = append(requested, req[name]+v), append(allocated, req[name]), append(allocatable, alloc[name])
	}
	if len(d.devices) > 0 {
		offered, free := p.devices.OnNode(nodeInfo.Node().Name), p.devices.FreeOn(nodeInfo)
		for name, v := range d.devices {
			used := max(offered[name]-free[name], 0)
			names = append(names, name)
			requested, allocated, allocatable = append(requested, used+v), append(allocated, used), append(allocatable, offered[name])
		}
	}
	if p.mix != nil {
		return fragmentationScore(d.mix, names, requested, allocated, allocatable), nil
	}
	return p.scorer(requested, allocated, allocatable), nil
}

// anyAcceleratorNode says whether a node offers accelerators: extended ones in its allocatable
// (the first such node ends the search, so a GPU cluster pays for one node), or DRA devices in
// node-local slices.
func (p *Placement) anyAcceleratorNode(nodes []fwk.NodeInfo) bool {
	if p.devices != nil && len(p.devices.OfferedOnNodes()) > 0 {
		return true
	}
	if p.acceleratorNodes.noneKnown() {
		return false
	}
	for _, n := range nodes {
		alloc := n.GetAllocatable().GetScalarResources()
		for _, name := range p.accelerators {
			if alloc[name] > 0 {
				return true
			}
		}
	}
	return false
}

// acceleratorsOn counts a node's accelerators, used and in all: its accelerator extended
// resources and the devices its ResourceSlices offer. A device two classes select counts under
// each, which the share of them used does not mind.
func (p *Placement) acceleratorsOn(nodeInfo fwk.NodeInfo) (used, total int64) {
	alloc, req := nodeInfo.GetAllocatable().GetScalarResources(), nodeInfo.GetRequested().GetScalarResources()
	for _, name := range p.accelerators {
		if alloc[name] > 0 {
			total += alloc[name]
			used += min(req[name], alloc[name])
		}
	}
	if p.devices == nil {
		return used, total
	}
	offered := p.devices.OnNode(nodeInfo.Node().Name)
	if len(offered) == 0 {
		return used, total
	}
	free := p.devices.FreeOn(nodeInfo)
	for name, v := range offered {
		if _, amount, ok := quota.DeviceClassOf(name); ok && amount == "devices" && v > 0 {
			total += v
			used += min(max(v-free[name], 0), v)
		}
	}
	return used, total
}

// ScoreExtensions are not needed: scores are already 0 to MaxScore.
func (p *Placement) ScoreExtensions() fwk.ScoreExtensions { return nil }
