// Package queue is Tephra's capacity-queue plugin (TephraQueue). It decides whether a pod may
// take capacity now, given its queue: the queue must be a usable leaf, the pod must not take the
// queue or any ancestor past its capability, and, while other queues wait for their deserved
// share, it must not take its own queue past its deserved share. A gang's minimum is admitted
// whole or not at all. When a queue below its deserved share cannot place a pod, PostFilter
// reclaims from queues above theirs, and a pod may preempt lower-priority pods of its own queue:
// package reclaim chooses and evicts the victims, under the reclaim rules.
//
// The plugin keeps one in-memory ledger of every queue's usage, fed by the scheduler's informers
// and by Reserve/Unreserve; it writes nothing to Queue objects (the Queue controller reports
// status from the pods, with the same rules from package quota). Devices of Dynamic Resource
// Allocation count as any resource (devices.go, docs/dra.md): reclaim gives victims' devices back
// to DRA's allocator in its dry run (reclaim/devicefit.go), and Filter holds the devices a preemption
// freed for the pod nominated there (held.go).
package queue

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
	"github.com/tephra-dev/tephra/plugins/internal/victimwait"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraQueue"

// queueEvent is the cluster event resource of Tephra's Queues.
const queueEvent fwk.EventResource = "queues.v1alpha1.scheduling.tephra.dev"

// podGroupEvent is the cluster event resource of Tephra's PodGroups.
const podGroupEvent fwk.EventResource = "podgroups.v1alpha1.scheduling.tephra.dev"

// Queue is the capacity-queue plugin.
type Queue struct {
	handle fwk.Handle
	// lastGone is the last deleted pod isSchedulableAfterAssignedPodDeleted took out of the
	// ledger.
	lastGone  atomic.Pointer[types.UID]
	queues    schedulinglisters.QueueLister
	podGroups schedulinglisters.PodGroupLister
	// topologies order the levels of gangs' topology constraints, for reclaim in one domain.
	topologies schedulinglisters.TopologyLister
	// namespaces gives the labels that queues' namespaceSelectors match.
	namespaces corelisters.NamespaceLister
	ledger     *ledger.Ledger
	accounts   *accounts
	// reclaimer chooses and evicts the victims of PostFilter and PodGroupPostFilter (package
	// reclaim).
	reclaimer *reclaim.Reclaimer
	// systemPreemption is upstream's DefaultPreemption, for system pods (v1alpha1.IsSystemPod).
	systemPreemption *defaultpreemption.DefaultPreemption
	// synced says whether the ledger has seen every pod and node the scheduler has.
	synced func() bool
	// loading are the pods turned away until synced, to try again then (loading.go).
	loading loadingWaiters
	// stop is the scheduler's context, which ends the plugin's goroutines.
	stop context.Context
	// queueRunning is set once the scheduling queue calls PreEnqueue: pods may be activated.
	queueRunning atomic.Bool
	// refusals keeps a pod's refusal message while only its figures change, so that the
	// scheduler does not write its condition on every attempt (plugins/internal/refusal).
	refusals *refusal.Memo
	// shareWaiters are the pods PostFilter turned away, brought back when their queue's share
	// rises (queueShareRose).
	shareWaiters shareWaiters
	// holds are the pods PreFilter refused by their queue's state, which PreEnqueue keeps waiting
	// while that state stands (holds.go).
	holds heldPodSet
	// victims holds the preemptors, pods and groups, whose victims are still going, and wakes
	// them when the last is gone (plugins/internal/victimwait).
	victims victimwait.Waits
}

var (
	_ fwk.PreEnqueuePlugin         = &Queue{}
	_ fwk.PreFilterPlugin          = &Queue{}
	_ fwk.FilterPlugin             = &Queue{}
	_ fwk.PostFilterPlugin         = &Queue{}
	_ fwk.PodGroupPostFilterPlugin = &Queue{}
	_ fwk.ReservePlugin            = &Queue{}
	_ fwk.EnqueueExtensions        = &Queue{}
	_ fwk.SignPlugin               = &Queue{}
)

// New builds the plugin and fills its ledger from the informers before the first cycle. The
// pods of the profile's scheduler name count in the queues from now on; the ledger is shared with
// the scheduler's other profiles that enable TephraQueue (accounts).
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	factory, err := setup.Informers(handle.KubeConfig())
	if err != nil {
		return nil, err
	}
	if args.UsageHalfLife != nil {
		klog.FromContext(ctx).Info("TephraQueue's usageHalfLife is ignored: the scheduler reads the half-life that tephra-controllers' --usage-half-life sets from Queue status.usage", "usageHalfLife", args.UsageHalfLife.Duration)
	}
	a, err := accountsFor(handle, factory)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		refusals: refusal.NewMemo(),
		handle:   handle,
		queues:   factory.Scheduling().V1alpha1().Queues().Lister(),
		// The scheduler's own factory: started with the scheduler's informers.
		namespaces: handle.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		podGroups:  a.podGroups,
		topologies: factory.Scheduling().V1alpha1().Topologies().Lister(),
		ledger:     a.ledger,
		accounts:   a,
		synced:     a.synced,
		stop:       ctx,
	}
	q.victims.Wake = func(pods map[string]*corev1.Pod) { handle.Activate(klog.Background(), pods) }
	q.victims.Changed = func(held int) { preemptorsWaitingForVictims.Set(float64(held)) }
	if q.reclaimer, err = reclaim.New(reclaim.Deps{
		Name: Name, Handle: handle, Plugin: reclaimQueries{q}, Ledger: a.ledger, PodGroups: a.podGroups,
		Topologies: q.topologies, Devices: a.devices, Victims: &q.victims, Stop: ctx,
	}, reclaimSettings(args)); err != nil {
		return nil, err
	}
	if _, err := factory.Scheduling().V1alpha1().Queues().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: q.queueAdded, UpdateFunc: q.queueUpdated}); err != nil {
		return nil, err
	}
	if err := a.watchGroups(factory, cache.ResourceEventHandlerFuncs{UpdateFunc: q.podGroupChanged}); err != nil {
		return nil, err
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: q.reclaimer.PodUpdated, DeleteFunc: func(obj any) {
		q.shareWaiters.podDeleted(obj)
		q.holds.podDeleted(obj)
		q.reclaimer.PodDeleted(obj)
		q.victimOrPreemptorDeleted(obj)
	}}); err != nil {
		return nil, err
	}
	if err := setup.StartAndSync(ctx, Name, handle.KubeConfig(), factory,
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("queues"), Registration: a.queueReg},
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("podgroups"), Registration: a.groupReg}); err != nil {
		return nil, err
	}
	// System pods preempt as they would under upstream's kube-scheduler, with its defaults.
	if q.systemPreemption, err = defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, handle, feature.Features{}); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("TephraQueue counts the pods of this profile in the queues", "profile", handle.ProfileName())
	return q, nil
}

// Name of the plugin.
func (q *Queue) Name() string { return Name }

// currentTree returns the queue tree, rebuilt if Queues changed.
func (q *Queue) currentTree() *quota.Tree { return q.accounts.shares.currentTree() }

// workload is the queue-relevant identity of a pod.
type workload = reclaim.Workload

// workloadOf resolves a pod's queue and group.
func (q *Queue) workloadOf(pod *corev1.Pod) (workload, *fwk.Status) {
	name, grouped := v1alpha1.PodGroupNameOf(pod)
	if !grouped {
		return workload{Queue: v1alpha1.QueueOfPod(pod, "")}, nil
	}
	pg, err := q.podGroups.PodGroups(pod.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// TephraGang holds such pods and says why.
		return workload{}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %q does not exist", v1alpha1.ReasonPodGroupNotFound, name))
	}
	if err != nil {
		return workload{}, fwk.AsStatus(err)
	}
	return workload{Queue: v1alpha1.QueueOfPod(pod, pg.Spec.Queue), Group: pod.Namespace + "/" + name, PodGroup: pg}, nil
}

// queueAdded brings back the pending pods of a queue this plugin's informer now shows. The
// scheduler learns of a new Queue from an informer of its own, which may be ahead of this one: a
// pod it requeued on that event may have been refused again by PreEnqueue (QueueUnavailable),
// with no event left to bring it back (as TephraGang's podGroupAdded for PodGroups).
func (q *Queue) queueAdded(obj any) {
	queue, ok := obj.(*v1alpha1.Queue)
	if !ok || !q.queueRunning.Load() {
		return
	}
	// The tree's own handler on this informer may not have run yet (each handler has its own
	// goroutine): a pod activated now must not meet the tree without the queue, be refused again
	// (QueueUnavailable: queue does not exist) and wait for the 5-minute flush. Found when pods
	// came while the Queue informer still backed off from CRDs installed after the scheduler
	// started: scheduler_perf's SchedulingBasic under Tephra's profile in CI.
	q.accounts.shares.invalidateTree()
	q.activatePending(map[string]bool{queue.Name: true})
}

// podGroupChanged brings back the pending pods of a PodGroup whose queue, minimum or minimum
// resources changed. kube-scheduler requeues them on its own informer's event, in no set order
// with this one: a pod tried first met the ledger's old view of its group (the old queue, a
// minimum that no longer holds) and was refused with no event left to bring it back. The ledger
// follows the change first (its own handler may not have run yet).
func (q *Queue) podGroupChanged(oldObj, newObj any) {
	pg, ok := newObj.(*v1alpha1.PodGroup)
	if !ok || !q.accounts.feed.GroupUpdated(oldObj, newObj) || !q.queueRunning.Load() {
		return
	}
	objs, err := q.accounts.pods.ByIndex(setup.PodGroupIndex, pg.Namespace+"/"+pg.Name)
	if err != nil {
		return
	}
	pending := map[string]*corev1.Pod{}
	for _, obj := range objs {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Spec.SchedulerName == q.handle.ProfileName() {
			pending[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	if len(pending) > 0 {
		q.handle.Activate(klog.Background(), pending)
	}
}

// queueUpdated brings back the pending pods a Queue change may let run: see queueReopened and
// queueShareRose.
func (q *Queue) queueUpdated(oldObj, newObj any) {
	q.queueReopened(oldObj, newObj)
	q.queueShareRose(oldObj, newObj)
}

// queueShareRose brings back the pods PostFilter turned away in a queue whose deserved share, as
// the Queue controller reports it, rose, and in every queue below it. With usage history, shares move with
// time alone, without the pod and node events that bring pods back otherwise: a pod that found
// no room, and no victim while its queue was at its share, was turned away by a Filter plugin
// such as NodeResourcesFit, whose events are only those of pods and nodes (a PostFilter that
// finds no victim does not count among the plugins a pod waits for), so it would wait until the
// scheduler's periodic flush of the unschedulable pods. The controller computes the scheduler's
// shares from the same status, so its Deserved rising is when this scheduler's did.
func (q *Queue) queueShareRose(oldObj, newObj any) {
	old, ok := oldObj.(*v1alpha1.Queue)
	queue, ok2 := newObj.(*v1alpha1.Queue)
	if !ok || !ok2 || !q.queueRunning.Load() || !deservedRose(old.Status.Deserved, queue.Status.Deserved) {
		return
	}
	// As in queueAdded: the pods must meet the shares that rose, not the tree from before.
	q.accounts.shares.invalidateTree()
	waiting := q.shareWaiters.take(subtreeNames(q.currentTree().Get(queue.Name)), q.handle.SharedInformerFactory().Core().V1().Pods().Lister())
	if len(waiting) > 0 {
		q.handle.Activate(klog.Background(), waiting)
	}
}

// subtreeNames names the queue and every queue below it (none for nil).
func subtreeNames(n *quota.Node) map[string]bool {
	names := map[string]bool{}
	var walk func(*quota.Node)
	walk = func(n *quota.Node) {
		names[n.Name] = true
		for _, c := range n.Children {
			walk(c)
		}
	}
	if n != nil {
		walk(n)
	}
	return names
}

// deservedRose says whether after is more than before in some resource.
func deservedRose(before, after corev1.ResourceList) bool {
	for name, v := range after {
		if old, ok := before[name]; !ok || v.Cmp(old) > 0 {
			return true
		}
	}
	return false
}

// queueReopened does what queueAdded does for a queue opened or moved, and every queue below it: closing
// and opening a parent closes and opens its whole subtree (quota.Node.ClosedBy).
func (q *Queue) queueReopened(oldObj, newObj any) {
	old, ok := oldObj.(*v1alpha1.Queue)
	queue, ok2 := newObj.(*v1alpha1.Queue)
	if !ok || !ok2 || !q.queueRunning.Load() || old.Spec.State == queue.Spec.State && old.Spec.Parent == queue.Spec.Parent {
		return
	}
	// The tree as this informer shows it now: the shared cache may not have heard of the change.
	all, err := q.queues.List(labels.Everything())
	if err != nil {
		return
	}
	below := subtreeNames(quota.NewTree(all).Get(queue.Name))
	q.accounts.shares.invalidateTree() // as in queueAdded: the pods must meet the queue opened
	q.activatePending(below)
}

// activatePending moves the pending pods of the named queues back to the active queue.
func (q *Queue) activatePending(queues map[string]bool) {
	objs, err := q.handle.SharedInformerFactory().Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		return
	}
	pending := map[string]*corev1.Pod{}
	for _, pod := range objs {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != q.handle.ProfileName() || !q.ledger.Counts(pod) {
			continue
		}
		if w, status := q.workloadOf(pod); status == nil && queues[w.Queue] {
			pending[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	if len(pending) > 0 {
		q.handle.Activate(klog.Background(), pending)
	}
}

// PreEnqueue holds back pods whose queue cannot take them at all: a queue that is missing, not a
// leaf, or closed, or a gang whose minimum is larger than its queue's capability; and, until
// their queue's state changes, the pods PreFilter refused by it (holds.go).
func (q *Queue) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	if !q.queueRunning.Load() {
		q.queueRunning.Store(true)
	}
	if !q.ledger.Counts(pod) {
		return nil // a system pod: no queue holds it
	}
	if q.reclaimer.Preempting(pod.UID) {
		// Its victims are being evicted after its cycle: it comes back when the last one goes.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: waiting for the victims of the pod's preemption to be evicted")
	}
	if q.victims.Holding(pod.UID) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: waiting for the victims of the preemption to be gone")
	}
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil // TephraGang decides about pods whose group is missing
	}
	tree := q.currentTree()
	leaf, why := tree.WorkloadQueue(w.Queue)
	if why != "" {
		msg := fmt.Sprintf("%s: %s; the pod waits", v1alpha1.ReasonQueueUnavailable, why)
		q.podEvent(pod, v1alpha1.ReasonQueueUnavailable, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if msg := q.tenancyVerdict(pod, leaf); msg != "" {
		q.podEvent(pod, v1alpha1.ReasonQueueForbidden, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	c := q.ledger.ChargeOf(pod)
	if msg := q.devicesVerdict(pod, leaf, c); msg != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	need := c.Requests
	if w.PodGroup != nil && len(w.PodGroup.Spec.MinResources) > 0 {
		need = maxOf(need, quota.FromList(w.PodGroup.Spec.MinResources))
	}
	for _, n := range leaf.Ancestry() {
		if over := need.Exceeding(n.Capability); over != "" {
			msg := fmt.Sprintf("%s: the workload needs more than the capability of queue %q (%s); it can never run there", v1alpha1.ReasonNeverFits, n.Name, over)
			q.podEvent(pod, v1alpha1.ReasonNeverFits, msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
	}
	if msg := q.stillHeld(pod, w); msg != "" {
		return fwk.NewStatus(fwk.Unschedulable, msg)
	}
	return nil
}

// PreFilter admits the pod into its queue's capacity, or rejects it with the queue's reason.
// For a gang member, the whole minimum still to be placed must fit, so a gang never takes
// quota unless its minimum can.
func (q *Queue) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	result, status := q.preFilter(ctx, cs, pod, nodes)
	return result, q.refusals.Steady(pod, refusal.PreFilter, status)
}

func (q *Queue) preFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !q.ledger.Counts(pod) {
		return nil, nil // a system pod: no queue holds it
	}
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil, status
	}
	if !q.synced() {
		return nil, q.rejectWhileLoading(ctx, pod)
	}
	if _, known := q.ledger.Entry(pod.UID); !known {
		// The scheduler's queue can hand out a pod before the ledger's handler has seen it; its
		// own demand must count, or its queue would seem to deserve nothing.
		q.accounts.feed.ObservePod(pod)
	}
	s := q.snapshotFor(pod)
	leaf, why := s.tree.WorkloadQueue(w.Queue)
	if why != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %s", v1alpha1.ReasonQueueUnavailable, why))
	}
	// Checked again here: the queue's selector may have been set since the pod's PreEnqueue.
	if msg := q.tenancyVerdict(pod, leaf); msg != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	need := q.needOf(pod, w)
	s = s.withDemandFor(leaf.Name, need)
	var freed map[string]quota.Amounts
	if f := reclaim.Freed(ctx); f != nil {
		freed = f // PodGroupPostFilter places the pod's group without its victims
	}
	v := s.decide(leaf, need, freed, false)
	if v.msg == "" {
		return nil, nil
	}
	admission.MarkRefused(cs, v.msg)
	if freed == nil {
		// The pod's own cycle, not PodGroupPostFilter's dry run of its group.
		stateRefusals.WithLabelValues(leaf.Name, v.reason).Inc()
		q.recordHold(pod, v, s)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, v.msg)
}

// needOf is what admitting the pod takes from its queue: its own requests, or for a gang whose
// minimum is not placed yet, what the rest of the minimum needs (minResources less what is
// placed, or the pod's requests times the members still missing, its directly named claims
// once, as the members may share them).
func (q *Queue) needOf(pod *corev1.Pod, w workload) quota.Amounts {
	c := q.ledger.ChargeOf(pod)
	need := c.Requests
	if len(c.Claims) > 0 {
		// A claim the queue counts placed already (another of its pods uses it) takes nothing.
		need = need.Clone()
		placed := q.ledger.PlacedClaimsIn(w.Queue, pod.Namespace, c.Claims)
		need.Sub(placed)
		c.Direct = c.Direct.Clone()
		c.Direct.Sub(placed)
	}
	if w.PodGroup == nil {
		return need
	}
	placed, count := q.ledger.GroupPlacement(w.Group)
	missing := int64(w.PodGroup.Spec.MinMember) - int64(count)
	if missing <= 0 {
		return need
	}
	rest := quota.Amounts{}
	if len(w.PodGroup.Spec.MinResources) > 0 {
		rest = quota.FromList(w.PodGroup.Spec.MinResources)
		rest.Sub(placed)
	} else {
		for name, v := range need {
			rest[name] = (v-c.Direct[name])*missing + c.Direct[name]
		}
	}
	return maxOf(need, rest)
}

func maxOf(a, b quota.Amounts) quota.Amounts {
	out := a.Clone()
	for name, v := range b {
		out[name] = max(out[name], v)
	}
	return out
}

// PreFilterExtensions are not needed: the plugin filters no nodes.
func (q *Queue) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// SignPod lets the scheduler batch pods: the plugin's verdict does not depend on the node, but
// for pods that claim devices, which Filter keeps off the devices held for nominated pods.
func (q *Queue) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if devices.UsesDevices(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods that claim devices are not signable: TephraQueue's Filter reads the devices held on each node")
	}
	return nil, nil
}

// Reserve records the pod in its queue's ledger, before the next cycle can look.
func (q *Queue) Reserve(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	if !q.ledger.Counts(pod) {
		return nil
	}
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil
	}
	q.ledger.Assume(pod, w.Queue, w.Group)
	q.refusals.Forget(pod.UID)
	q.shareWaiters.forget(pod.UID)
	q.holds.forget(pod.UID)
	return nil
}

// Unreserve gives the pod's share back.
func (q *Queue) Unreserve(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	q.ledger.Unassume(pod.UID)
}

// EventsToRegister says which cluster events may let a pod this plugin rejected go on.
func (q *Queue) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A queue created, opened, or given more capability or weight.
		{Event: fwk.ClusterEvent{Resource: queueEvent, ActionType: fwk.All}},
		// A pod bound into the queue a held pod yields to may be the workload it waits for.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}, QueueingHintFn: q.isSchedulableAfterPodBound},
		// A pod that stops gives its queue's share back.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: q.isSchedulableAfterAssignedPodDeleted},
		// A pending pod deleted lowers its queue's demand, and so raises other queues' shares.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}},
		// A node added raises root's capacity.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
		// A PodGroup's queue is read when it is created.
		{Event: fwk.ClusterEvent{Resource: podGroupEvent, ActionType: fwk.Add | fwk.Update}},
		// A namespace relabelled may match a queue's namespaceSelector now.
		{Event: fwk.ClusterEvent{Resource: namespaceEvent, ActionType: fwk.Update}, QueueingHintFn: isSchedulableAfterNamespaceChange},
	}, nil
}

// isSchedulableAfterAssignedPodDeleted queues every pod TephraQueue refused when a placed pod
// goes, as the share it held may be what the pod waits for. It first takes the deleted pod out of
// the ledger: the scheduling queue and the ledger's own handler hear of the deletion in no set
// order, and a pod brought back before the ledger's handler ran met its queue still charged for
// the victim it had waited on, was refused again, and waited for the periodic flush.
func (q *Queue) isSchedulableAfterAssignedPodDeleted(_ klog.Logger, _ *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if tombstone, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = tombstone.Obj
	}
	// The scheduling queue asks once per pod TephraQueue refused, with the same deleted pod: only
	// the first asks the ledger.
	if deleted, ok := oldObj.(*corev1.Pod); ok {
		if last := q.lastGone.Load(); last == nil || *last != deleted.UID {
			q.lastGone.Store(&deleted.UID)
			q.ledger.GoneBeforeHandler(deleted)
		}
	}
	return fwk.Queue, nil
}

func (q *Queue) podEvent(pod *corev1.Pod, reason, msg string) {
	q.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, reason, "Scheduling", msg)
}

// queueNameOf returns the queue a pod counts in, as it resolves now.
func (q *Queue) queueNameOf(pod *corev1.Pod) string {
	if w, status := q.workloadOf(pod); status == nil {
		return w.Queue
	}
	return v1alpha1.QueueOfPod(pod, "")
}
