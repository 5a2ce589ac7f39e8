// Package gang is Tephra's coscheduling plugin. It decides when the pods of a PodGroup may be
// placed: all of a group's minimum (minMember, and minTaskMember per task) at once, or none.
//
//   - PreEnqueue keeps a group's pods out of the active queue until its minimum exists.
//   - QueueSort orders by priority, then by group (creation time, or the last failure for a group
//     that keeps failing), keeping a group's pods together so that gangs do not interleave; a
//     queue may order by runtime estimate (order.go) or by the service its workloads have
//     attained (attained.go) instead.
//   - PreFilter rejects a group at once when its minimum cannot fit the cluster's free capacity,
//     and holds back a group that has just failed.
//   - Permit holds each placed member until the whole minimum is placed, then lets all of them
//     bind together; the wait is bounded by the group's scheduleTimeoutSeconds.
//   - PostFilter and Unreserve release every waiting member of a group that cannot complete, so
//     no partial gang holds resources: two gangs can never deadlock each other.
//
// Pods that name no group are groups of one and pass through untouched.
//
// Gang (gang.go) only adapts the framework: each extension point is one call to the
// groupManager (manager.go), which owns every group's state through the tracker (tracker.go) and
// decides; attempts.go ends and rolls back attempts, hints.go holds the queueing hints,
// reservation.go the SLA reservations, members.go the counting of a group's members, batching.go
// the signatures that let kube-scheduler place a gang's members after the first one's scoring,
// consolidate.go the moves of movable pods that make whole nodes for a gang whose minimum fits the
// free capacity but no set of nodes (plugins/consolidation plans and makes them).
package gang

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/plugins/internal/datawait"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/queueorder"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraGang"

// podGroupIndex indexes the scheduler's pod informer by "namespace/group".
const podGroupIndex = setup.PodGroupIndex

// podGroupEvent is the cluster event resource of Tephra's PodGroups (plural.version.group), which
// the scheduler watches with a dynamic informer.
const podGroupEvent fwk.EventResource = "podgroups.v1alpha1.scheduling.tephra.dev"

// Gang is the coscheduling plugin: the framework's adapter to the groupManager, which decides.
type Gang struct {
	*groupManager
	// refusals keeps a member's refusal message while only its figures change, so that the
	// scheduler does not write its condition on every attempt (plugins/internal/refusal).
	refusals *refusal.Memo
}

var (
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.QueueSortPlugin   = &Gang{}
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.FilterPlugin      = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.PostBindPlugin    = &Gang{}
	_ fwk.PreBindPlugin     = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
	_ fwk.SignPlugin        = &Gang{}

	_ fwk.PodGroupPostFilterPlugin = &Gang{}
	_ fwk.PlacementGeneratePlugin  = &Gang{}
	_ fwk.PlacementScorePlugin     = &Gang{}
	_ fwk.PlacementScoreExtensions = &Gang{}
)

// New builds the plugin: it watches PodGroups with its own informer, and upstream PodGroups where
// they are served (setup.Upstream), and indexes the scheduler's pod informer by group.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	factory, err := setup.Informers(handle.KubeConfig())
	if err != nil {
		return nil, err
	}
	podGroupInformer := factory.Scheduling().V1alpha1().PodGroups()
	topologyInformer := factory.Scheduling().V1alpha1().Topologies()
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := setup.IndexPodsByGroup(podInformer); err != nil {
		return nil, err
	}
	up, err := setup.Upstream(handle)
	if err != nil {
		return nil, err
	}
	g := newGang(handle, args, groups.NewLister(podGroupInformer.Lister(), podInformer.GetIndexer(), up.Lister()), podInformer.GetIndexer())
	g.topologies = topologyInformer.Lister()
	if g.podGroupCycles {
		// kube-scheduler watches upstream PodGroups itself with the gate on: the informer is its.
		g.upstreamGroups = handle.SharedInformerFactory().Scheduling().V1beta1().PodGroups().Lister()
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(g.shares.nodeHandler()); err != nil {
		return nil, err
	}
	// Jobs' dominant shares count the devices of their members' claims, of the devices the
	// ResourceSlices offer.
	if g.devices, err = devices.For(handle); err != nil {
		return nil, err
	}
	g.devices.Notify(nil, g.devicesChanged)
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: g.memberCreated}); err != nil {
		return nil, err
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: g.carrierDeleted}); err != nil {
		return nil, err
	}
	if _, err := podInformer.AddEventHandler(g.serviceHandler()); err != nil {
		return nil, err
	}
	if _, err := podInformer.AddEventHandler(g.groups.freedCapacityHandler()); err != nil {
		return nil, err
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(g.groups.freedNodeCapacityHandler()); err != nil {
		return nil, err
	}
	// Claims name the Fluid datasets members read (docs/io.md); the informer is registered now,
	// before the scheduler starts its informers.
	g.claims = handle.SharedInformerFactory().Core().V1().PersistentVolumeClaims().Lister()
	groupHandlers := g.groupHandlers()
	registration, err := podGroupInformer.Informer().AddEventHandler(groupHandlers)
	if err != nil {
		return nil, err
	}
	if up != nil {
		// Upstream PodGroups are groups as Tephra's are (translated in memory): their creation,
		// change and deletion are their groups'.
		if err := up.Watch(groupHandlers, podGroupInformer.Lister()); err != nil {
			return nil, err
		}
	}
	queues, err := factory.Scheduling().V1alpha1().Queues().Informer().AddEventHandler(g.orders.handler())
	if err != nil {
		return nil, err
	}
	// Topologies are only read; the registration lets the plugin wait for their cache.
	topologies, err := topologyInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, err
	}
	if err := setup.StartAndSync(ctx, Name, handle.KubeConfig(), factory,
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("podgroups"), Registration: registration},
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("topologies"), Registration: topologies},
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("queues"), Registration: queues}); err != nil {
		return nil, err
	}
	return g, nil
}

// groupHandlers follow the groups' creation, change and deletion: PodGroup objects', and upstream
// PodGroups' translations.
func (g *groupManager) groupHandlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    g.podGroupAdded,
		UpdateFunc: g.podGroupChanged,
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				g.forgetGroup(klog.Background(), groupKey{ns, name})
			}
		},
	}
}

func newGang(handle fwk.Handle, args *Args, podGroups schedulinglisters.PodGroupLister, members cache.Indexer) *Gang {
	g := &Gang{groupManager: &groupManager{handle: handle, args: args, podGroups: podGroups, members: members, groups: newTracker(), shares: newJobShares(), attained: newAttainedService(), now: time.Now,
		podGroupCycles: utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)}}
	g.refusals = refusal.NewMemoWithClock(func() time.Time { return g.now() }, refusal.Refresh)
	setup.OnEvictionsFor(handle, g.evictingFor)
	queueorder.Publish(handle, g.groupManager)
	return g
}

// Name of the plugin.
func (g *Gang) Name() string { return Name }

// The extension points, each one call to the group manager.

// PreEnqueue keeps a group's pods out of the active queue until its minimum exists.
func (g *Gang) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	return g.preEnqueue(ctx, pod)
}

// Less orders the active queue (see groupManager.less).
func (g *Gang) Less(a, b fwk.QueuedEntityInfo) bool { return g.less(a, b) }

// SignPod lets the scheduler batch pods, a gang's members with each other.
func (g *Gang) SignPod(ctx context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return g.signPod(ctx, pod)
}

// PreFilter holds back a group that is backing off or whose minimum cannot fit.
func (g *Gang) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	var result *fwk.PreFilterResult
	var status *fwk.Status
	if g.inPodGroupCycles(pod) {
		result, status = g.preFilterInPodGroupCycle(ctx, state, pod, nodes)
	} else {
		result, status = g.preFilter(ctx, state, pod, nodes)
	}
	return result, g.refusals.Steady(pod, refusal.PreFilter, status)
}

// PreFilterExtensions are not needed: the plugin filters no nodes in PreFilter.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps other pods off the nodes reserved for a group past its SLA or at the head of its
// queue, but those that backfill them.
func (g *Gang) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	return g.filter(ctx, state, pod, nodeInfo)
}

// PostFilter releases a group whose member fits no node.
func (g *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	// A pod waiting for a node that caches its data (datawait) is no gang to release or make
	// room for.
	if g.inPodGroupCycles(pod) || datawait.Marked(state) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	result, status := g.postFilter(ctx, state, pod, m)
	return result, g.refusals.Steady(pod, refusal.PostFilter, status)
}

// PodGroupPostFilter lets elastic pods go while a group its pod-group cycle could not place
// waits (podgroupcycles.go).
func (g *Gang) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, group fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	return nil, g.podGroupPostFilter(ctx, group)
}

// Reserve records the member in its group's attempt.
func (g *Gang) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	if g.inPodGroupCycles(pod) {
		return nil
	}
	return g.reserve(ctx, state, pod, nodeName)
}

// Unreserve ends the member's attempt when it will not bind.
func (g *Gang) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	if g.inPodGroupCycles(pod) {
		return
	}
	g.unreserve(ctx, state, pod, nodeName)
}

// Permit holds the member until its group's minimum is placed.
func (g *Gang) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	if g.inPodGroupCycles(pod) {
		g.placedInPodGroupCycle(ctx, pod)
		return nil, 0
	}
	return g.permit(ctx, state, pod, nodeName)
}

// PreBind refuses a member whose attempt failed since Permit.
func (g *Gang) PreBind(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	if g.inPodGroupCycles(pod) {
		return nil
	}
	return g.preBind(ctx, state, pod, nodeName)
}

// PreBindPreFlight skips PreBind for pods without a group.
func (g *Gang) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if g.inPodGroupCycles(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return g.preBindPreFlight(ctx, state, pod, nodeName)
}

// PostBind rolls back a member bound after its attempt failed, and measures whole gangs.
func (g *Gang) PostBind(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	g.reportBackfill(klog.FromContext(ctx), pod, nodeName)
	g.refusals.Forget(pod.UID)
	if g.inPodGroupCycles(pod) {
		g.shares.forget(pod.UID)
		return
	}
	g.postBind(ctx, state, pod, nodeName)
}

// GeneratePlacements offers a pod-group cycle the domains of an upstream PodGroup's topology
// constraint that hold its minimum, best fit first (placements.go).
func (g *Gang) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, group fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	return g.generatePlacements(ctx, state, group, parent)
}

// ScorePlacement counts the pods a feasible placement places.
func (g *Gang) ScorePlacement(ctx context.Context, state fwk.PlacementCycleState, group fwk.PodGroupInfo, assignments *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	return g.scorePlacement(ctx, state, group, assignments)
}

// PlacementScoreExtensions ranks the placements.
func (g *Gang) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return g }

// NormalizePlacementScore ranks the feasible placements: most pods, then best fit.
func (g *Gang) NormalizePlacementScore(ctx context.Context, state fwk.PodGroupCycleState, group fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	return g.normalizePlacementScores(ctx, state, group, scores)
}

// EventsToRegister says which cluster events may let a pod this plugin rejected go on.
func (g *Gang) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	return g.eventsToRegister(ctx)
}
