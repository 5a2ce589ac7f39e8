// Package numa is Tephra's NUMA placement plugin. It decides on which nodes a pod fits with
// kubelet's Topology Manager, from each node's NodeResourceTopology (published by an exporter such
// as NFD's topology-updater), so that pods are not bound to nodes whose kubelet then rejects them
// with TopologyAffinityError.
//
//   - PreFilter works out what kubelet aligns to NUMA zones: devices for any pod; whole CPUs,
//     memory and hugepages for Guaranteed pods. A pod that needs nothing aligned skips the plugin.
//   - Filter rejects a node whose zones cannot hold the pod as its policy demands: each container
//     (or, in pod scope, the pod) on one zone under single-numa-node, on the fewest zones it could
//     ever need under restricted. best-effort and none admit anything.
//   - Score prefers nodes where the pod takes fewer zones, then packs (MostAllocated) or spreads
//     (LeastAllocated) over the zones it takes.
//   - Reserve counts what the pod takes of its zones until the node's object shows it.
//
// Nodes without a NodeResourceTopology are NUMA-unaware: they pass, and score neutral.
package numa

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	topologylisters "github.com/tephra-dev/tephra/apis/client/listers/topology/v1alpha2"
	topologyv1alpha2 "github.com/tephra-dev/tephra/apis/topology/v1alpha2"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraNUMA"

// topologyEvent is the cluster event resource of NodeResourceTopologies (plural.version.group),
// which the scheduler watches with a dynamic informer.
const topologyEvent fwk.EventResource = "noderesourcetopologies.v1alpha2.topology.node.k8s.io"

// stateKey holds the pod's demand in the cycle state.
const stateKey fwk.StateKey = "PreFilter" + Name

// unawarePeriod is how often the unaware-nodes gauge is recomputed.
const unawarePeriod = 30 * time.Second

// neutralScore is the score of a node where NUMA zones do not matter for the pod.
const neutralScore = fwk.MaxScore / 2

// viewBuffer sizes the buffer Filter and Score copy a node's zones into, so that common nodes
// (up to 8 zones, 4 aligned resources) cost no allocation.
const viewBuffer = 64

// NUMA is the NUMA placement plugin.
type NUMA struct {
	handle     fwk.Handle
	args       *Args
	topologies *topologies
	// nrts and nodes count the NUMA-unaware nodes.
	nrts  topologylisters.NodeResourceTopologyLister
	nodes corelisters.NodeLister
}

var (
	_ fwk.PreFilterPlugin   = &NUMA{}
	_ fwk.FilterPlugin      = &NUMA{}
	_ fwk.PreScorePlugin    = &NUMA{}
	_ fwk.ScorePlugin       = &NUMA{}
	_ fwk.ReservePlugin     = &NUMA{}
	_ fwk.SignPlugin        = &NUMA{}
	_ fwk.EnqueueExtensions = &NUMA{}
)

// New builds the plugin: it watches NodeResourceTopologies with its own informer, and the
// scheduler's pods to drop the reservations of pods that end.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	factory, err := setup.Informers(handle.KubeConfig())
	if err != nil {
		return nil, err
	}
	nrtInformer := factory.Topology().V1alpha2().NodeResourceTopologies()
	// The scheduler's node informer, registered now: the scheduler starts its informers once
	// every plugin is built.
	nodeInformer := handle.SharedInformerFactory().Core().V1().Nodes()
	nodesSynced := nodeInformer.Informer().HasSynced
	n := newNUMA(handle, args, nrtInformer.Lister(), nodeInformer.Lister())
	registration, err := nrtInformer.Informer().AddEventHandler(n.topologyHandler())
	if err != nil {
		return nil, err
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(n.podHandler()); err != nil {
		return nil, err
	}
	if err := setup.StartAndSync(ctx, Name, handle.KubeConfig(), factory,
		setup.Watch{Resource: topologyv1alpha2.SchemeGroupVersion.WithResource("noderesourcetopologies"), Registration: registration}); err != nil {
		return nil, err
	}
	go func() {
		if cache.WaitForNamedCacheSyncWithContext(ctx, nodesSynced) {
			wait.UntilWithContext(ctx, n.countUnawareNodes, unawarePeriod)
		}
	}()
	return n, nil
}

func newNUMA(handle fwk.Handle, args *Args, nrts topologylisters.NodeResourceTopologyLister, nodes corelisters.NodeLister) *NUMA {
	return &NUMA{handle: handle, args: args, topologies: newTopologies(), nrts: nrts, nodes: nodes}
}

// Name of the plugin.
func (n *NUMA) Name() string { return Name }

// topologyHandler keeps the plugin's view of the nodes' NodeResourceTopologies.
func (n *NUMA) topologyHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if nrt, ok := obj.(*topologyv1alpha2.NodeResourceTopology); ok {
				n.topologies.set(nrt)
			}
		},
		UpdateFunc: func(_, obj any) {
			if nrt, ok := obj.(*topologyv1alpha2.NodeResourceTopology); ok {
				n.topologies.set(nrt)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				n.topologies.remove(key) // cluster-scoped: the key is the name
			}
		},
	}
}

// podHandler drops the reservation of a pod that ends or is deleted.
func (n *NUMA) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
				n.topologies.release(pod.UID)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				n.topologies.release(pod.UID)
			}
		},
	}
}

// countUnawareNodes sets the gauge of nodes without a NodeResourceTopology.
func (n *NUMA) countUnawareNodes(ctx context.Context) {
	nodes, err := n.nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing nodes to count NUMA-unaware ones")
		return
	}
	unaware := 0
	for _, node := range nodes {
		if _, err := n.nrts.Get(node.Name); apierrors.IsNotFound(err) {
			unaware++
		}
	}
	unawareNodes.Set(float64(unaware))
}

// SignPod lets the scheduler batch pods that need nothing aligned; the placement of the others
// depends on the plugin's reservations, which a signature cannot capture.
func (n *NUMA) SignPod(ctx context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, annotated := pod.Annotations[PolicyAnnotation]; annotated || needsAlignment(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the pod's NUMA placement depends on reservations")
	}
	return nil, nil
}

// PreFilter computes what the pod needs aligned, and skips the plugin's Filter when nothing.
func (n *NUMA) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	d, err := demandOf(pod)
	if err != nil {
		n.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, reasonInvalidPolicy, "Scheduling", err.Error())
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	state.Write(stateKey, d)
	if len(d.names) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions are not needed: what other pods hold does not change the pod's demand.
func (n *NUMA) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node on which kubelet's Topology Manager would not admit the pod.
func (n *NUMA) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	d, err := readDemand(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	var buf [viewBuffer]int64
	v, found := n.topologies.view(nodeInfo.Node().Name, d, buf[:])
	if !found || v.managed == 0 {
		return nil
	}
	// pol is set from constants rather than from v, so that the messages below do not move buf
	// to the heap.
	var pol policy
	switch v.policy {
	case policyRestricted:
		pol = policyRestricted
	case policySingleNUMANode:
		pol = policySingleNUMANode
	default:
		return nil // best-effort and none admit anything
	}
	_, failed := v.assign(d, pol)
	if failed == nil {
		return nil
	}
	rejections.WithLabelValues(string(pol)).Inc()
	what := d.describe(failed, v.managed)
	if pol == policySingleNUMANode {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: no NUMA zone can hold %s under %s", Name, what, pol))
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %s does not fit in the fewest NUMA zones it needs under %s", Name, what, pol))
}

// PreScore skips scoring for a pod that needs nothing aligned, or when no node publishes its
// topology.
func (n *NUMA) PreScore(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	d, err := readDemand(state)
	if err != nil {
		// PreFilter is not enabled in the profile.
		if d, err = demandOf(pod); err != nil {
			return fwk.NewStatus(fwk.Skip)
		}
		state.Write(stateKey, d)
	}
	// On a cluster where no node publishes its topology, every node would be looked up for
	// nothing (5000 lookups a pod in make bench-upstream's SchedulingBasic).
	if len(d.names) > 0 && !n.topologies.none() {
		for _, node := range nodes {
			if n.topologies.has(node.Node().Name) {
				return nil
			}
		}
	}
	return fwk.NewStatus(fwk.Skip)
}

// Score prefers the node where the pod takes the fewest NUMA zones, then by the scoring strategy
// over those zones. NUMA-unaware nodes score neutral.
func (n *NUMA) Score(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := readDemand(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	var buf [viewBuffer]int64
	v, found := n.topologies.view(nodeInfo.Node().Name, d, buf[:])
	if !found || v.managed == 0 {
		return neutralScore, nil
	}
	used, _ := v.assign(d, policyBestEffort)
	return v.score(used, n.args.ScoringStrategy), nil
}

// ScoreExtensions are not needed: scores are already in range.
func (n *NUMA) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts what the pod takes of the node's zones until the node's object shows it.
func (n *NUMA) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	if d, err := readDemand(state); err == nil && len(d.names) > 0 {
		n.topologies.reserve(nodeName, pod.UID, d)
	}
	return nil
}

// Unreserve gives back what Reserve counted.
func (n *NUMA) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	n.topologies.release(pod.UID)
}

func readDemand(state fwk.CycleState) (*demand, error) {
	data, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", stateKey, err)
	}
	d, ok := data.(*demand)
	if !ok {
		return nil, fmt.Errorf("%q in cycle state is a %T", stateKey, data)
	}
	return d, nil
}

// needsAlignment says whether kubelet aligns any of the pod's requests.
func needsAlignment(pod *corev1.Pod) bool {
	d, err := demandOf(pod)
	return err == nil && len(d.names) > 0
}

// EventsToRegister says which cluster events may let a pod this plugin rejected go on.
func (n *NUMA) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A topology published, changed or withdrawn: zones may have room, the policy may have
		// changed, or the node has become NUMA-unaware.
		{Event: fwk.ClusterEvent{Resource: topologyEvent, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: isSchedulableAfterTopologyChange},
		// A pod that goes gives back what it held of its zones.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: isSchedulableAfterPodDeleted},
		// A new node may have room, or be NUMA-unaware.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, QueueingHintFn: queue},
		// The pod's own PolicyAnnotation fixed or changed.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: isSchedulableAfterPolicyChange},
	}, nil
}

// isSchedulableAfterTopologyChange queues the pod for any new version of a node's object; only
// the same version seen again (a relist) cannot help.
func isSchedulableAfterTopologyChange(_ klog.Logger, _ *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	type versioned interface {
		GetName() string
		GetResourceVersion() string
	}
	prev, ok1 := oldObj.(versioned)
	next, ok2 := newObj.(versioned)
	if ok1 && ok2 && prev.GetName() == next.GetName() && prev.GetResourceVersion() == next.GetResourceVersion() {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

func isSchedulableAfterPodDeleted(_ klog.Logger, _ *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil // a tombstone: assume it freed something
	}
	if needsAlignment(deleted) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func isSchedulableAfterPolicyChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	prev, ok1 := oldObj.(*corev1.Pod)
	next, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return fwk.Queue, fmt.Errorf("unexpected objects %T, %T", oldObj, newObj)
	}
	if prev.Annotations[PolicyAnnotation] != next.Annotations[PolicyAnnotation] {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func queue(klog.Logger, *corev1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.Queue, nil }
