// Package ioaware is TephraIO, the plugin that places pods by their IO:
//
//   - where their data is: a pod that declares the datasets it reads (internal/datasets:
//     data.tephra.dev/datasets, or a Fluid dataset's claim it mounts) scores higher on the nodes
//     that cache more of them, and with data.tephra.dev/locality: Required runs only on a node
//     that caches every one. A job placed where its data is cached starts at once; placed
//     elsewhere, it first pulls the data over the network.
//   - within the network's bandwidth: a pod that requests IO bandwidth (internal/bandwidth,
//     extended resources io.tephra.dev/<name>) goes only where its domains (a rack's uplink, as
//     the default Topology gives it) carry it beside what the pods there already request, and
//     prefers the nodes and domains its requests leave most free, so that IO-heavy pods spread
//     rather than collide.
//
// Fluid makes pods prefer its cache nodes with affinities that its webhook injects; TephraIO
// reads the same node labels inside the scheduler, so the score is weighed, in one profile,
// against accelerator packing (TephraPlacement) and NUMA fit: the profile's weight of TephraIO
// is the knob (docs/io.md).
package ioaware

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/bandwidth"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/plugins/internal/datawait"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraIO"

// stateKey holds the pod's datasets in the cycle state.
const stateKey fwk.StateKey = "PreFilter" + Name

// signerName keys the pod's datasets in its signature.
const signerName = "data.tephra.dev/datasets"

// Reasons of the Warning events on a pod whose IO cannot be placed as it says.
const (
	// ReasonInvalidDatasets: its declaration of its datasets is malformed.
	ReasonInvalidDatasets = "InvalidDatasets"
	// ReasonBandwidthNotPublished: it requests a bandwidth no node publishes.
	ReasonBandwidthNotPublished = "BandwidthNotPublished"
)

// IO is the plugin.
type IO struct {
	handle fwk.Handle
	claims corelisters.PersistentVolumeClaimLister
	// topologies give the domains' bandwidth: the default Topology's (nil in unit tests: none).
	topologies schedulinglisters.TopologyLister
	// podGroups are the groups whose declaration a member that declares nothing reads (nil: none).
	podGroups schedulinglisters.PodGroupLister
	// waits are the pods that wait for a node that caches their data (nil: localityWait 0).
	waits *localityWaits
}

var (
	_ fwk.PreFilterPlugin   = &IO{}
	_ fwk.FilterPlugin      = &IO{}
	_ fwk.PreScorePlugin    = &IO{}
	_ fwk.ScorePlugin       = &IO{}
	_ fwk.EnqueueExtensions = &IO{}
	_ fwk.SignPlugin        = &IO{}
)

// New builds the plugin on the scheduler's informers of claims (which VolumeBinding reads too),
// of Tephra's Topologies and of the pod groups (Tephra's and upstream's, shared with TephraGang).
// Its args say how long a pod waits for its data; the profile's score weight is what it weighs.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	factory, err := setup.Informers(handle.KubeConfig())
	if err != nil {
		return nil, err
	}
	topologies := factory.Scheduling().V1alpha1().Topologies()
	registration, err := topologies.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, err
	}
	podGroups := factory.Scheduling().V1alpha1().PodGroups()
	groupRegistration, err := podGroups.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, err
	}
	up, err := setup.Upstream(handle)
	if err != nil {
		return nil, err
	}
	p := &IO{handle: handle, claims: handle.SharedInformerFactory().Core().V1().PersistentVolumeClaims().Lister(), topologies: topologies.Lister(),
		podGroups: groups.NewLister(podGroups.Lister(), nil, up.Lister())}
	if args.LocalityWait.Duration > 0 {
		p.waits = newLocalityWaits(args.LocalityWait.Duration, func(pod *corev1.Pod) {
			handle.Activate(klog.FromContext(ctx), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
		})
		if _, err := handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(p.waits.podHandler()); err != nil {
			return nil, err
		}
	}
	if err := setup.StartAndSync(ctx, Name, handle.KubeConfig(), factory,
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("topologies"), Registration: registration},
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("podgroups"), Registration: groupRegistration}); err != nil {
		return nil, err
	}
	return p, nil
}

// limits are the domains' bandwidths, from the default Topology.
func (p *IO) limits() []bandwidth.Limit {
	if p.topologies == nil {
		return nil
	}
	t, err := p.topologies.Get(v1alpha1.DefaultTopology)
	if err != nil {
		return nil
	}
	return bandwidth.LimitsOf(t)
}

// Name of the plugin.
func (p *IO) Name() string { return Name }

// demand is the pod's IO, as its cycle reads it: its datasets, and its bandwidth requests with
// the domains' limits and what the pods on them request (use, which a preemption's dry run
// changes: Clone copies it).
type demand struct {
	datasets.Demand
	requests bandwidth.Amounts
	limits   []bandwidth.Limit
	use      bandwidth.Use
	// waitUntil is when the pod's wait for a node that caches its data ends; zero when it does
	// not wait (localitywait.go).
	waitUntil time.Time
}

func (d *demand) Clone() fwk.StateData {
	if d.use == nil {
		return d
	}
	c := *d
	c.use = bandwidth.Use{}
	for level, byDomain := range d.use {
		c.use[level] = map[string]bandwidth.Amounts{}
		for domain, a := range byDomain {
			c.use[level][domain] = maps.Clone(a)
		}
	}
	return &c
}

// none says whether the pod's IO is nothing TephraIO places by.
func (d *demand) none() bool { return d.None() && len(d.requests) == 0 }

// noDemand is the cycle state of a pod that declares no IO, shared: nothing changes it.
var noDemand = &demand{}

// noSignature is the signature fragment of a pod that reads no dataset, shared.
var noSignature = []fwk.SignFragment{{Key: signerName, Value: ""}}

// declaresNothing says that the pod declares no dataset, nor does its group for it, mounts no
// claim and requests no bandwidth: most pods, for which every extension point has nothing to do.
// It allocates nothing for a pod of no group or one that carries its group.
func (p *IO) declaresNothing(pod *corev1.Pod) bool {
	return podDeclaresNothing(pod) && p.groupDeclaration(pod) == nil
}

// groupDeclaration is the annotations of the pod's group when they declare datasets for it, nil
// when they do not or it declares its own. A pod that carries its group of one (a one-pod Tephra
// Job's) has its job's declaration on itself already.
func (p *IO) groupDeclaration(pod *corev1.Pod) map[string]string {
	if p.podGroups == nil || datasets.Declares(pod.Annotations) || pod.Annotations[v1alpha1.GroupOnPodAnnotation] == "true" {
		return nil
	}
	name, ok := v1alpha1.PodGroupNameOf(pod)
	if !ok {
		return nil
	}
	group, err := p.podGroups.PodGroups(pod.Namespace).Get(name)
	if err != nil || !datasets.Declares(group.Annotations) {
		return nil
	}
	return group.Annotations
}

// podDeclaresNothing is declaresNothing for the pod alone, without allocating.
func podDeclaresNothing(pod *corev1.Pod) bool {
	if datasets.Declares(pod.Annotations) {
		return false
	}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].PersistentVolumeClaim != nil {
			return false
		}
	}
	return bandwidth.Requests(pod) == nil
}

// demandOf reads what the pod declares, or its group for it, its claims from the scheduler's
// informer.
func (p *IO) demandOf(pod *corev1.Pod) (datasets.Demand, error) {
	return datasets.Of(pod, p.groupDeclaration(pod), func(namespace, name string) map[string]string {
		claim, err := p.claims.PersistentVolumeClaims(namespace).Get(name)
		if err != nil {
			return nil
		}
		return claim.Labels
	})
}

// SignPod keys the pod's datasets, so that only pods that read the same data share a scoring.
// A pod that requests bandwidth is not signed: where it may go depends on what the pods placed
// before it took of their domains' bandwidth, which a signature cannot capture.
func (p *IO) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if p.declaresNothing(pod) {
		return noSignature, nil
	}
	if len(bandwidth.Requests(pod)) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods that request IO bandwidth are not signable: TephraIO places them by their domains' use")
	}
	d, err := p.demandOf(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	if p.waits != nil && d.Locality == datasets.Preferred && !d.None() {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods that prefer their data are not signable: whether TephraIO keeps one waiting for it depends on when it began to wait")
	}
	labels := make([]string, 0, len(d.Datasets)+1)
	for _, ds := range d.Datasets {
		labels = append(labels, ds.NodeLabel)
	}
	if !d.None() {
		labels = append(labels, string(d.Locality))
	}
	return []fwk.SignFragment{{Key: signerName, Value: strings.Join(labels, ",")}}, nil
}

// PreFilter reads the pod's IO: its datasets, its bandwidth requests, and what the pods on each
// limited domain request. A malformed declaration, or a bandwidth no node publishes, keeps the
// pod from being placed, with an event that says what is wrong: placing it as if it declared
// nothing would put it where its data is not, silently. Filter has nothing to do unless the pod
// requires its data or requests bandwidth of a limited domain.
func (p *IO) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if p.declaresNothing(pod) {
		state.Write(stateKey, noDemand)
		return nil, fwk.NewStatus(fwk.Skip)
	}
	data, err := p.demandOf(pod)
	if err != nil {
		p.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, ReasonInvalidDatasets, "Scheduling", err.Error())
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	d := &demand{Demand: data, requests: bandwidth.Requests(pod)}
	if len(d.requests) > 0 {
		if name := bandwidth.Unpublished(d.requests, nodes); name != "" {
			msg := fmt.Sprintf("the pod requests %s, which no node publishes (a node publishes its IO bandwidth as allocatable %s)", name, name)
			p.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, ReasonBandwidthNotPublished, "Scheduling", msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		d.limits = p.limits()
		d.use = bandwidth.UseOf(d.limits, nodes)
	}
	if d.waitUntil = p.waitsForData(pod, d, nodes); !d.waitUntil.IsZero() {
		datawait.Mark(state)
	}
	state.Write(stateKey, d)
	if d.Locality != datasets.Required && len(d.limits) == 0 && d.waitUntil.IsZero() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions keeps the domains' use right in a preemption's dry runs.
func (p *IO) PreFilterExtensions() fwk.PreFilterExtensions { return p }

// AddPod counts a pod added to a node in its domains' use.
func (p *IO) AddPod(_ context.Context, state fwk.CycleState, _ *corev1.Pod, added fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	return p.changeUse(state, added, nodeInfo, 1)
}

// RemovePod takes a pod removed from a node out of its domains' use.
func (p *IO) RemovePod(_ context.Context, state fwk.CycleState, _ *corev1.Pod, removed fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	return p.changeUse(state, removed, nodeInfo, -1)
}

func (p *IO) changeUse(state fwk.CycleState, pod fwk.PodInfo, nodeInfo fwk.NodeInfo, sign int64) *fwk.Status {
	d, err := read(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(d.limits) > 0 && nodeInfo.Node() != nil {
		d.use.Add(d.limits, nodeInfo.Node().Labels, bandwidth.Requests(pod.GetPod()), sign)
	}
	return nil
}

// Filter keeps a pod that requires its data off the nodes that do not cache all of it, and a pod
// that requests bandwidth off the nodes whose domains do not carry it.
func (p *IO) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	d, err := read(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	if exceeded := d.use.Exceeded(d.limits, node.Labels, d.requests); exceeded != "" {
		// The domain and its figures stay in the log; the message is one line for all nodes.
		klog.V(5).InfoS("Domain's bandwidth exceeded", "node", klog.KObj(node), "limit", exceeded)
		return fwk.NewStatus(fwk.Unschedulable, "node(s) in a network domain whose bandwidth cannot carry the pod's IO requests (Topology default)")
	}
	_, missing := d.CachedOn(node.Labels)
	if len(missing) > 0 && !d.waitUntil.IsZero() {
		return p.waitingStatus(d)
	}
	if len(missing) > 0 && d.Locality == datasets.Required {
		// One message for every node that lacks some of them, so that the pod's condition
		// counts them on one line.
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node(s) do not cache all the datasets the pod requires (%s; %s: %s)",
			strings.Join(d.names(), ", "), datasets.LocalityAnnotation, datasets.Required))
	}
	return nil
}

func (d *demand) names() []string {
	names := make([]string, len(d.Datasets))
	for i, ds := range d.Datasets {
		names[i] = ds.Name
	}
	return names
}

// PreScore skips the plugin for a pod that reads no dataset it knows of: every node scores the
// same.
func (p *IO) PreScore(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	d, err := read(state)
	if err != nil {
		// PreFilter did not run (a preemption's dry run reads Filter only): read it now.
		dd, err := p.demandOf(pod)
		if err != nil {
			return fwk.NewStatus(fwk.Skip)
		}
		d = &demand{Demand: dd, requests: bandwidth.Requests(pod)}
		state.Write(stateKey, d)
	}
	if d.none() {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score is, out of fwk.MaxScore, the part of the pod's datasets the node caches (all of them
// score the most, none nothing); for a pod that requests bandwidth, the least part of the node's
// and its domains' bandwidth left free once the pod is there, so that IO-heavy pods spread. A
// pod with both gets the mean of the two.
func (p *IO) Score(_ context.Context, state fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := read(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	var parts []float64
	if !d.None() {
		cached, _ := d.CachedOn(node.Labels)
		parts = append(parts, float64(cached)/float64(len(d.Datasets)))
	}
	if len(d.requests) > 0 {
		parts = append(parts, min(nodeFreeShare(nodeInfo, d.requests), d.use.FreeShare(d.limits, node.Labels, d.requests)))
	}
	if len(parts) == 0 {
		return 0, nil
	}
	sum := 0.0
	for _, v := range parts {
		sum += v
	}
	return int64(math.Round(float64(fwk.MaxScore) * sum / float64(len(parts)))), nil
}

// nodeFreeShare is the least part of the node's own bandwidth left free once the requests are
// placed on it, between 0 and 1.
func nodeFreeShare(n fwk.NodeInfo, requests bandwidth.Amounts) float64 {
	free := 1.0
	allocatable, requested := n.GetAllocatable().GetScalarResources(), n.GetRequested().GetScalarResources()
	for name, v := range requests {
		if a := allocatable[name]; a > 0 {
			free = min(free, max(float64(a-requested[name]-v)/float64(a), 0))
		}
	}
	return free
}

// ScoreExtensions: scores are already between 0 and fwk.MaxScore.
func (p *IO) ScoreExtensions() fwk.ScoreExtensions { return nil }

func read(state fwk.CycleState) (*demand, error) {
	data, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", stateKey, err)
	}
	d, ok := data.(*demand)
	if !ok {
		return nil, fmt.Errorf("%+v is not the pod's datasets", data)
	}
	return d, nil
}

// topologyEvent is the cluster event resource of Tephra's Topologies (plural.version.group),
// whose levels give the domains' bandwidth.
const topologyEvent fwk.EventResource = "topologies.v1alpha1.scheduling.tephra.dev"

// podGroupEvent is the cluster event resource of Tephra's PodGroups, whose annotations may
// declare their members' datasets.
const podGroupEvent fwk.EventResource = "podgroups.v1alpha1.scheduling.tephra.dev"

// EventsToRegister says which events may let a pod that Filter rejected run: a node that now
// caches its data (a new node, or a node's labels changed), a claim that is now a Fluid
// dataset's, or the pod's own declaration, or its PodGroup's, fixed; for a pod that requests bandwidth, a pod that
// requested some gone from its domain, or the Topology's bandwidths changed.
func (p *IO) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: isSchedulableAfterBandwidthFreed},
		{Event: fwk.ClusterEvent{Resource: topologyEvent, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: queueIfRequestingBandwidth},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: p.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: queueForClaimOfPod},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: isSchedulableAfterDeclarationChange},
		{Event: fwk.ClusterEvent{Resource: podGroupEvent, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: isSchedulableAfterGroupDeclarationChange},
	}, nil
}

// isSchedulableAfterBandwidthFreed queues a pod that requests bandwidth when a pod that
// requested some of it is gone.
func isSchedulableAfterBandwidthFreed(_ klog.Logger, pod *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	requests := bandwidth.Requests(pod)
	for name := range bandwidth.Requests(deleted) {
		if _, asked := requests[name]; asked {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// queueIfRequestingBandwidth queues a pod that requests bandwidth: the Topology's bandwidths may
// have risen.
func queueIfRequestingBandwidth(_ klog.Logger, pod *corev1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if len(bandwidth.Requests(pod)) > 0 {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterNodeChange queues a pod that requires its data, or waits for it, when the
// node caches all of it, and a pod that requests bandwidth for a new node, or one whose labels
// moved it to another domain. Nothing of a node helps a pod whose declaration is malformed, nor
// one that only prefers its data and does not wait for it (Filter rejects none).
func (p *IO) isSchedulableAfterNodeChange(logger klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	node, ok := newObj.(*corev1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a node, got %T", newObj)
	}
	if len(bandwidth.Requests(pod)) > 0 {
		return fwk.Queue, nil
	}
	d, err := p.demandOf(pod)
	if err != nil || (d.Locality != datasets.Required && (p.waits == nil || !p.waits.has(pod.UID))) {
		return fwk.QueueSkip, nil
	}
	if _, missing := d.CachedOn(node.Labels); len(missing) > 0 {
		logger.V(5).Info("Node does not cache the pod's datasets", "pod", klog.KObj(pod), "node", klog.KObj(node), "missing", missing)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// queueForClaimOfPod queues the pod when a claim it mounts is added or changed.
func queueForClaimOfPod(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	claim, ok := newObj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a claim, got %T", newObj)
	}
	if claim.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterDeclarationChange queues the pod when its annotations that declare its data
// changed.
func isSchedulableAfterDeclarationChange(_ klog.Logger, _ *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	prev, ok1 := oldObj.(*corev1.Pod)
	next, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return fwk.Queue, nil
	}
	for _, key := range []string{datasets.Annotation, datasets.LocalityAnnotation} {
		if prev.Annotations[key] != next.Annotations[key] {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterGroupDeclarationChange queues a pod that declares nothing itself when its
// PodGroup's declaration of its members' datasets came or changed.
func isSchedulableAfterGroupDeclarationChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	group, ok := newObj.(*v1alpha1.PodGroup)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a PodGroup, got %T", newObj)
	}
	if name, in := v1alpha1.PodGroupNameOf(pod); !in || name != group.Name || group.Namespace != pod.Namespace || datasets.Declares(pod.Annotations) {
		return fwk.QueueSkip, nil
	}
	var before map[string]string
	if old, ok := oldObj.(*v1alpha1.PodGroup); ok {
		before = old.Annotations
	}
	for _, key := range []string{datasets.Annotation, datasets.LocalityAnnotation} {
		if before[key] != group.Annotations[key] {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}
