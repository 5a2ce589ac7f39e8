// Package ioaware is TephraIO, the plugin that places pods where their data is: a pod that
// declares the datasets it reads (internal/datasets: data.tephra.dev/datasets, or a Fluid
// dataset's claim it mounts) scores higher on the nodes that cache more of them, and with
// data.tephra.dev/locality: Required runs only on a node that caches every one. A job placed
// where its data is cached starts at once; placed elsewhere, it first pulls the data over the
// network.
//
// Fluid makes pods prefer its cache nodes with affinities that its webhook injects; TephraIO
// reads the same node labels inside the scheduler, so the score is weighed, in one profile,
// against accelerator packing (TephraPlacement) and NUMA fit: the profile's weight of TephraIO
// is the knob (docs/io.md).
package ioaware

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/datasets"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraIO"

// stateKey holds the pod's datasets in the cycle state.
const stateKey fwk.StateKey = "PreFilter" + Name

// signerName keys the pod's datasets in its signature.
const signerName = "data.tephra.dev/datasets"

// ReasonInvalidDatasets is the reason of the Warning event on a pod whose declaration of its
// datasets is malformed.
const ReasonInvalidDatasets = "InvalidDatasets"

// IO is the plugin.
type IO struct {
	handle fwk.Handle
	claims corelisters.PersistentVolumeClaimLister
}

var (
	_ fwk.PreFilterPlugin   = &IO{}
	_ fwk.FilterPlugin      = &IO{}
	_ fwk.PreScorePlugin    = &IO{}
	_ fwk.ScorePlugin       = &IO{}
	_ fwk.EnqueueExtensions = &IO{}
	_ fwk.SignPlugin        = &IO{}
)

// New builds the plugin on the scheduler's informers of claims (which VolumeBinding reads too).
// It takes no args: the profile's score weight is what it weighs.
func New(_ context.Context, _ runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	return &IO{handle: handle, claims: handle.SharedInformerFactory().Core().V1().PersistentVolumeClaims().Lister()}, nil
}

// Name of the plugin.
func (p *IO) Name() string { return Name }

// demand is the pod's datasets, as its cycle reads them.
type demand struct{ datasets.Demand }

func (d *demand) Clone() fwk.StateData { return d }

// demandOf reads what the pod declares, its claims from the scheduler's informer.
func (p *IO) demandOf(pod *corev1.Pod) (datasets.Demand, error) {
	return datasets.Of(pod, func(namespace, name string) map[string]string {
		claim, err := p.claims.PersistentVolumeClaims(namespace).Get(name)
		if err != nil {
			return nil
		}
		return claim.Labels
	})
}

// SignPod keys the pod's datasets, so that only pods that read the same data share a scoring.
func (p *IO) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	d, err := p.demandOf(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
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

// PreFilter reads the pod's datasets. A malformed declaration keeps the pod from being placed,
// with an event that says what is wrong: placing it as if it declared nothing would put it where
// its data is not, silently. Filter has nothing to do unless the pod requires its data.
func (p *IO) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	d, err := p.demandOf(pod)
	if err != nil {
		p.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, ReasonInvalidDatasets, "Scheduling", err.Error())
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	state.Write(stateKey, &demand{d})
	if d.Locality != datasets.Required {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions: the plugin's Filter reads nothing of other pods.
func (p *IO) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a pod that requires its data off the nodes that do not cache all of it.
func (p *IO) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	d, err := read(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	if _, missing := d.CachedOn(node.Labels); len(missing) > 0 {
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
		d = &demand{dd}
		state.Write(stateKey, d)
	}
	if d.None() {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score is the part of the pod's datasets the node caches, out of fwk.MaxScore: a node that
// caches every one scores the most, one that caches none nothing.
func (p *IO) Score(_ context.Context, state fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := read(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	cached, _ := d.CachedOn(node.Labels)
	return fwk.MaxScore * int64(cached) / int64(len(d.Datasets)), nil
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

// EventsToRegister says which events may let a pod that Filter rejected run: a node that now
// caches its data (a new node, or a node's labels changed), a claim that is now a Fluid
// dataset's, or the pod's own declaration fixed.
func (p *IO) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: p.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: queueForClaimOfPod},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: isSchedulableAfterDeclarationChange},
	}, nil
}

// isSchedulableAfterNodeChange queues a pod that requires its data when the node caches all of
// it. Nothing of a node helps a pod whose declaration is malformed, nor one that only prefers
// its data (Filter rejects none).
func (p *IO) isSchedulableAfterNodeChange(logger klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	node, ok := newObj.(*corev1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a node, got %T", newObj)
	}
	d, err := p.demandOf(pod)
	if err != nil || d.Locality != datasets.Required {
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
