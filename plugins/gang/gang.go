// Package gang is Tephra's coscheduling plugin. It decides when the pods of a PodGroup may be
// placed: all of a group's minimum (minMember, and minTaskMember per task) at once, or none.
//
//   - PreEnqueue keeps a group's pods out of the active queue until its minimum exists.
//   - QueueSort orders by priority, then by group (creation time, or the last failure for a group
//     that keeps failing), keeping a group's pods together so that gangs do not interleave.
//   - PreFilter rejects a group at once when its minimum cannot fit the cluster's free capacity,
//     and holds back a group that has just failed.
//   - Permit holds each placed member until the whole minimum is placed, then lets all of them
//     bind together; the wait is bounded by the group's scheduleTimeoutSeconds.
//   - PostFilter and Unreserve release every waiting member of a group that cannot complete, so
//     no partial gang holds resources: two gangs can never deadlock each other.
//
// Pods that name no group are groups of one and pass through untouched.
package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraGang"

// podGroupIndex indexes the scheduler's pod informer by "namespace/group".
const podGroupIndex = setup.PodGroupIndex

// podGroupEvent is the cluster event resource of Tephra's PodGroups (plural.version.group), which
// the scheduler watches with a dynamic informer.
const podGroupEvent fwk.EventResource = "podgroups.v1alpha1.scheduling.tephra.dev"

// Gang is the coscheduling plugin.
type Gang struct {
	handle    fwk.Handle
	args      *Args
	podGroups schedulinglisters.PodGroupLister
	members   cache.Indexer
	groups    *tracker
	shares    *jobShares
	// now is time.Now, replaceable in tests.
	now func() time.Time
	// memberAdded is the last answer of isSchedulableAfterMemberAdded. The scheduling queue asks
	// once per queued member of the added pod's group; the answer depends on the group and the
	// added pod only, so a gang of n created while the scheduler runs costs O(n²), not O(n³).
	memberAdded struct {
		sync.Mutex
		group groupKey
		pod   types.UID
		rv    string
		hint  fwk.QueueingHint
	}
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
)

// New builds the plugin: it watches PodGroups with its own informer and indexes the scheduler's
// pod informer by group.
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
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := setup.IndexPodsByGroup(podInformer); err != nil {
		return nil, err
	}
	g := newGang(handle, args, podGroupInformer.Lister(), podInformer.GetIndexer())
	if _, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(g.shares.nodeHandler()); err != nil {
		return nil, err
	}
	registration, err := podGroupInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				g.forgetGroup(klog.Background(), groupKey{ns, name})
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := setup.StartAndSync(ctx, Name, factory, registration); err != nil {
		return nil, err
	}
	return g, nil
}

func newGang(handle fwk.Handle, args *Args, podGroups schedulinglisters.PodGroupLister, members cache.Indexer) *Gang {
	return &Gang{handle: handle, args: args, podGroups: podGroups, members: members, groups: newTracker(), shares: newJobShares(), now: time.Now}
}

// Name of the plugin.
func (g *Gang) Name() string { return Name }

// groupOf returns the key of the pod's group; ok is false for a pod without one, and for a
// system pod (v1alpha1.IsSystemPod), which no gang holds back even if it names a group.
func groupOf(pod *corev1.Pod) (groupKey, bool) {
	name, ok := v1alpha1.PodGroupNameOf(pod)
	if ok && v1alpha1.IsSystemPod(pod) {
		return groupKey{}, false
	}
	return groupKey{pod.Namespace, name}, ok
}

// PreEnqueue keeps a group's pods out of the active queue until the group exists and its
// minimum (and every task's minimum) of pods exists.
func (g *Gang) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	key, ok := groupOf(pod)
	if !ok {
		return nil
	}
	if problem := v1alpha1.InvalidPodGroupName(key.name); problem != "" {
		msg := fmt.Sprintf("%s: pod group name %q is not valid: %s", v1alpha1.ReasonInvalidPodGroup, key.name, problem)
		g.podEvent(pod, corev1.EventTypeWarning, v1alpha1.ReasonInvalidPodGroup, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if apierrors.IsNotFound(err) {
		msg := fmt.Sprintf("%s: pod group %q does not exist in namespace %q; the pod waits for it", v1alpha1.ReasonPodGroupNotFound, key.name, key.namespace)
		g.podEvent(pod, corev1.EventTypeWarning, v1alpha1.ReasonPodGroupNotFound, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if err != nil {
		return fwk.AsStatus(err)
	}
	g.groups.with(key, func(s *groupState) { s.created = pg.CreationTimestamp.Time })
	count := g.countMembers(key, pg, pod)
	if short := count.shortOf(pg); short != "" {
		g.groups.with(key, func(s *groupState) { s.minimumQueued = false })
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %s", v1alpha1.ReasonWaitingForMembers, short))
	}
	if !count.placedMeets(pg) {
		// The minimum exists and heads for the active queue: from now on, elastic pods of other
		// groups wait for it.
		now := g.now()
		armed := false
		g.groups.with(key, func(s *groupState) {
			s.wantsMinimum, s.stalled, s.lastActive = true, false, now
			armed, s.slaArmed = s.slaArmed, true
		})
		if !armed {
			g.armSLA(klog.FromContext(ctx), key, pg)
		}
	}
	return nil
}

// Less orders the active queue: higher priority first; then jobs by their dominant resource
// share (DRF, frozen while a pod is queued, see jobShares), the smallest first; then groups by
// their sort time (creation, or last failure) and plain pods by their queue time; members of one
// group stay together.
func (g *Gang) Less(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	if sa, sb := g.shareOf(a), g.shareOf(b); sa != sb {
		return sa < sb
	}
	ta, ka := g.sortKey(a)
	tb, kb := g.sortKey(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka < kb
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

type podInfoGetter interface{ GetPodInfo() fwk.PodInfo }

func (g *Gang) sortKey(e fwk.QueuedEntityInfo) (time.Time, string) {
	if getter, ok := e.(podInfoGetter); ok {
		if key, ok := groupOf(getter.GetPodInfo().GetPod()); ok {
			if t, ok := g.groups.sortTime(key); ok {
				return t, key.String()
			}
		}
	}
	return e.GetTimestamp(), ""
}

// SignPod lets the scheduler batch pods without a group, which this plugin leaves alone (an
// enabled PreFilter plugin that signs nothing turns batching off for every pod). Members of a
// group are not batched: whether they may go on depends on their group's state.
func (g *Gang) SignPod(ctx context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, ok := groupOf(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a pod group member's placement depends on its group")
	}
	return nil, nil
}

// PreFilter rejects a member of a group that is backing off after a failed attempt, and the
// first member of an attempt whose group's minimum cannot fit the cluster's free capacity.
func (g *Gang) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := groupOf(pod)
	if !ok {
		if g.groups.reservationCount() > 0 && !v1alpha1.IsSystemPod(pod) {
			return nil, nil // Filter keeps it off reserved nodes
		}
		// Skip also skips Filter for the pod, which has nothing to check.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %v", v1alpha1.ReasonPodGroupNotFound, err))
	}
	now := g.now()
	if wait := g.unreadyBackoff(pg, now); wait > 0 {
		g.activateAfterUnreadyBackoff(klog.FromContext(ctx), key, now.Add(wait))
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %s is backing off for %v: its bound pods were evicted %d times in a row for missing its ready timeout",
			v1alpha1.ReasonBackingOff, key, wait.Round(time.Millisecond), pg.Status.UnreadyEvictions))
	}
	var backoff time.Duration
	var waiting int
	var unfit string
	g.groups.with(key, func(s *groupState) {
		backoff = s.backoffUntil.Sub(now)
		waiting = len(s.waiting)
		unfit = s.keptUnfit(now)
	})
	if backoff > 0 {
		// UnschedulableAndUnresolvable: evicting pods would not help a group that waits out its
		// backoff, so no PostFilter tries.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %s is backing off for %v after a failed attempt", v1alpha1.ReasonNotEnoughResources, key, backoff.Round(time.Millisecond)))
	}
	if waiting > 0 {
		// An attempt is under way: members wait at Permit for the rest of the minimum, which
		// this member may complete. Once the minimum is placed none waits (Permit allows them
		// all), so a member tried while the minimum's binds are in flight is counted below, and
		// held back as elastic if another group's minimum is pending.
		return g.onReserved(key), nil
	}
	if unfit != "" {
		// A member of the group found the minimum unable to fit, and nothing has happened since
		// that could change it: counting the members again would cost O(members) per member.
		// Unschedulable, not UnschedulableAndUnresolvable: TephraQueue's PostFilter evicts for
		// one pod at a time, so every member of a minimum that waits for reclaim must get to it.
		return nil, fwk.NewStatus(fwk.Unschedulable, unfit)
	}
	count := g.countMembers(key, pg, nil)
	if count.placedMeets(pg) {
		// The minimum runs: this member is elastic. It waits while a minimum elsewhere may
		// still take the capacity.
		if other := g.pendingMinimum(key); other != "" {
			g.groups.with(key, func(s *groupState) { s.elasticWaiting = true })
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: pod %s is above the minimum of its group and waits while the minimum of pod group %s is being placed", v1alpha1.ReasonElasticWaiting, pod.Name, other))
		}
		return nil, nil
	}
	g.groups.with(key, func(s *groupState) { s.wantsMinimum, s.stalled, s.lastActive = true, false, now })
	if count.bound >= int(pg.Spec.MinMember) {
		return nil, nil // the minimum runs but for a task's; this member completes it
	}
	unplacedRequests := sortedRequests(count.unplaced)
	need := g.minimumStillNeeded(pg, count, unplacedRequests)
	if reserved := g.reservationFor(ctx, key, pg, pod, need, nodes); reserved != nil {
		nodes = onNodes(nodes, reserved)
	}
	if lacking := lackingCapacity(need, nodes); lacking != "" {
		return nil, g.unfit(key, fmt.Sprintf("%s: the minimum of pod group %s needs %s", v1alpha1.ReasonNotEnoughResources, key, lacking))
	}
	// Free capacity in total is not enough: members cannot span nodes. A gang that could never be
	// placed whole would otherwise be placed member by member, held at Permit and released, again
	// after every backoff, and every member it holds nominated makes the filters of other pods
	// slower.
	if missing := int(pg.Spec.MinMember) - count.placed; missing > 0 && len(count.unplaced) >= missing {
		smallest := smallestRequests(unplacedRequests)
		if fit := membersThatFit(smallest, nodes, missing); fit < missing {
			return nil, g.unfit(key, fmt.Sprintf("%s: the minimum of pod group %s needs %d more pods, and the nodes' free capacity holds at most %d of them (each asks at least %s)",
				v1alpha1.ReasonNotEnoughResources, key, missing, fit, formatRequests(smallest)))
		}
	}
	return g.onReserved(key), nil
}

// unfit records that the group's minimum cannot fit now, for its other members to be refused
// with the same message, and returns the rejection.
func (g *Gang) unfit(key groupKey, msg string) *fwk.Status {
	now := g.now()
	g.groups.with(key, func(s *groupState) { s.unfit, s.unfitAt = msg, now })
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// onReserved sends a group with a reservation to its reserved nodes.
func (g *Gang) onReserved(key groupKey) *fwk.PreFilterResult {
	var reserved []string
	g.groups.with(key, func(s *groupState) { reserved = s.reserved })
	if reserved == nil {
		return nil
	}
	return &fwk.PreFilterResult{NodeNames: sets.New(reserved...)}
}

func onNodes(nodes []fwk.NodeInfo, names []string) []fwk.NodeInfo {
	keep := sets.New(names...)
	var out []fwk.NodeInfo
	for _, n := range nodes {
		if keep.Has(n.Node().Name) {
			out = append(out, n)
		}
	}
	return out
}

// PreFilterExtensions are not needed: the plugin filters no nodes.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PostFilter runs when a member fits no node and TephraQueue's PostFilter, which runs first,
// evicted nothing for it. If its group's minimum cannot be completed in this attempt, every
// waiting member is released, so the partial gang holds nothing, and the group backs off.
//
// It answers Unschedulable, not UnschedulableAndUnresolvable: the framework then keeps the
// reasons of every PostFilter plugin, where UnschedulableAndUnresolvable would keep only this
// one's, and the pod's event should also say why TephraQueue evicted nothing for it.
func (g *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := groupOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	settled := false
	now := g.now()
	g.groups.with(key, func(s *groupState) {
		settled = s.stalled && len(s.assumed) == 0 && s.keptUnfit(now) != ""
	})
	if settled {
		// The member was refused with its group's kept verdict, and the member that made it found
		// nothing of the group placed here: nothing has happened since (an event would have
		// cleared the verdict), so counting the members again would come to the same.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	count := g.countMembers(key, pg, nil)
	if count.placed >= int(pg.Spec.MinMember) {
		// The minimum is placed; this member is extra and simply waits for room.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if count.placed == 0 {
		// Nothing of the group is held (e.g. PreFilter found no room): nothing to release, and
		// the pods wait for capacity events. Meanwhile the minimum cannot use what is free, so
		// elastic pods may.
		g.groups.with(key, func(s *groupState) { s.stalled = true })
		g.releaseElastic(klog.FromContext(ctx))
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	msg := fmt.Sprintf("%s: %d of %d pods of pod group %s could be placed; releasing them", v1alpha1.ReasonNotEnoughResources, count.placed, pg.Spec.MinMember, key)
	g.fail(klog.FromContext(ctx), key, pg, msg, "post-filter", 0)
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// Reserve records the member as assumed for its group's attempt.
func (g *Gang) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	if key, ok := groupOf(pod); ok {
		g.groups.with(key, func(s *groupState) {
			s.assumed[pod.UID] = v1alpha1.TaskOf(pod)
			s.attemptOf[pod.UID] = s.attempt
		})
	}
	return nil
}

// Unreserve runs when a reserved member will not bind: Permit rejected it or timed out, or
// binding failed. If its group's minimum is not bound yet, the other waiting members are released
// too, so that no partial gang keeps holding resources.
func (g *Gang) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	wasWaiting, stale := false, false
	var failing uint64
	var count memberCount
	g.groups.with(key, func(s *groupState) {
		_, wasWaiting = s.waiting[pod.UID]
		attempt, reserved := s.attemptOf[pod.UID]
		allowedIn, wasAllowed := s.allowed[pod.UID]
		switch {
		case wasAllowed:
			// Permit let it through and its bind or PreBind failed: the attempt that allowed
			// it fails, though a later one may have begun.
			failing, stale = allowedIn, s.hasFailed(allowedIn)
		case reserved && attempt == s.attempt:
			failing = attempt
		default:
			// A member of an attempt that has ended already must not end the next one.
			stale = true
		}
		delete(s.assumed, pod.UID)
		delete(s.waiting, pod.UID)
		delete(s.attemptOf, pod.UID)
		delete(s.allowed, pod.UID)
		if err == nil && !stale {
			count = g.countMembersLocked(s, key, pg, nil)
		}
	})
	waitingPods.Set(float64(g.groups.waitingCount()))
	if err != nil || stale {
		return
	}
	if count.bound >= int(pg.Spec.MinMember) {
		return // the gang runs; this member retries on its own
	}
	reason := "unreserve"
	msg := fmt.Sprintf("%s: %d of %d pods of pod group %s could be placed; releasing them", v1alpha1.ReasonNotEnoughResources, count.placed, pg.Spec.MinMember, key)
	if wasWaiting {
		reason = "timeout"
		msg = fmt.Sprintf("%s: %d of %d pods of pod group %s were placed within %v; releasing them", v1alpha1.ReasonTimeout, count.placed+1, pg.Spec.MinMember, key, g.timeout(pg))
	}
	g.fail(klog.FromContext(ctx), key, pg, msg, reason, failing)
}

// Permit lets a member bind once its group's minimum, and every task's minimum, is placed; until
// then the member waits, at most the group's schedule timeout.
func (g *Gang) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key, ok := groupOf(pod)
	if !ok {
		return nil, 0
	}
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %v", v1alpha1.ReasonPodGroupNotFound, err)), 0
	}
	// Counting the placed members and allowing the waiting ones happen under the group's lock, in
	// the member's own attempt: an Unreserve that ends the attempt meanwhile (a sibling timed
	// out) either comes first, and this member is refused, or after, and finds them allowed.
	var allowed []types.UID
	var count memberCount
	meets, stale, first := false, false, false
	g.groups.with(key, func(s *groupState) {
		if attempt, ok := s.attemptOf[pod.UID]; ok && attempt != s.attempt {
			stale = true
			return
		}
		count = g.countMembersLocked(s, key, pg, nil)
		if meets = count.placedMeets(pg); meets {
			for uid := range s.waiting {
				allowed = append(allowed, uid)
				s.allowed[uid] = s.attempt
			}
			s.allowed[pod.UID] = s.attempt
			// The attempt has done its part; members placed from now on (elastic ones, or
			// replacements) belong to the next.
			s.attempt++
			clear(s.waiting)
			s.failures = 0
			s.backoffUntil = time.Time{}
			return
		}
		first = len(s.waiting) == 0
		s.waiting[pod.UID] = struct{}{}
	})
	if stale {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the attempt of pod group %s that placed this pod has failed", v1alpha1.ReasonNotEnoughResources, key)), 0
	}
	if meets {
		for _, uid := range allowed {
			if waiting := g.handle.GetWaitingPod(uid); waiting != nil {
				waiting.Allow(Name)
			}
		}
		g.groups.with(key, func(s *groupState) { s.wantsMinimum = false })
		g.releaseReservation(klog.FromContext(ctx), key)
		waitingPods.Set(float64(g.groups.waitingCount()))
		klog.FromContext(ctx).V(4).Info("Gang minimum placed; allowing its members", "podGroup", key.String(), "placed", count.placed, "allowed", len(allowed)+1)
		g.releaseElastic(klog.FromContext(ctx))
		return nil, 0
	}
	waitingPods.Set(float64(g.groups.waitingCount()))
	if first {
		// The rest of the group may sit in backoff or among the unschedulable pods: bring them
		// forward so that the attempt completes within its timeout.
		g.handle.Activate(klog.FromContext(ctx), g.pendingMembers(key, pod.UID))
	}
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d of %d pods of pod group %s to be placed", count.placed, pg.Spec.MinMember, key)), g.timeout(pg)
}

// PostBind measures the time from a group's first member created to its minimum bound.
func (g *Gang) PostBind(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	pg, _ := g.podGroups.PodGroups(key.namespace).Get(key.name)
	members, _ := g.members.ByIndex(podGroupIndex, key.String())
	var first time.Time
	observe, rollback := false, false
	g.shares.forget(pod.UID)
	g.groups.with(key, func(s *groupState) {
		attempt, allowed := s.allowed[pod.UID]
		delete(s.assumed, pod.UID)
		delete(s.attemptOf, pod.UID)
		delete(s.allowed, pod.UID)
		s.bound[pod.UID] = attempt
		// Bound after its attempt failed (it was past PreBind when a sibling's bind failed): it
		// is rolled back unless the group's minimum is bound anyway.
		if allowed && s.hasFailed(attempt) && pg != nil && g.countMembersLocked(s, key, pg, nil).bound < int(pg.Spec.MinMember) {
			rollback = true
		}
		if pg == nil || s.fullObserved {
			return
		}
		bound := 0
		for _, obj := range members {
			member := obj.(*corev1.Pod)
			// The pod informer may not show this scheduler's binds yet.
			if _, ours := s.bound[member.UID]; ours || member.Spec.NodeName != "" {
				bound++
			}
			if first.IsZero() || member.CreationTimestamp.Time.Before(first) {
				first = member.CreationTimestamp.Time
			}
		}
		observe = bound >= int(pg.Spec.MinMember) && !first.IsZero()
		s.fullObserved = observe
	})
	if observe {
		timeToFull.Observe(g.now().Sub(first).Seconds())
	}
	if rollback {
		g.rollBack(klog.FromContext(ctx), key, pg, []*corev1.Pod{pod}, fmt.Sprintf("pod %s was bound after its group's attempt failed", pod.Name))
	}
}

// PreBind refuses a member whose attempt has failed since Permit let it through: a sibling's bind
// or PreBind failed, so the group's minimum will not be bound in this attempt.
func (g *Gang) PreBind(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	key, ok := groupOf(pod)
	if !ok {
		return nil
	}
	failed := false
	g.groups.with(key, func(s *groupState) {
		attempt, allowed := s.allowed[pod.UID]
		failed = allowed && s.hasFailed(attempt)
	})
	if failed {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the attempt of pod group %s failed before this pod was bound", v1alpha1.ReasonNotEnoughResources, key))
	}
	return nil
}

// PreBindPreFlight skips PreBind for pods without a group.
func (g *Gang) PreBindPreFlight(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, ok := groupOf(pod); !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// EventsToRegister says which cluster events may let a pod this plugin rejected go on.
func (g *Gang) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A new member may complete its group's minimum.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: g.forgettingUnfit(g.isSchedulableAfterMemberAdded)},
		// A pod that stops frees capacity a group may need.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: g.forgettingUnfit(g.isSchedulableAfterPodDeleted)},
		// A node added or grown adds capacity.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}, QueueingHintFn: g.forgettingUnfit(queueGroupMembers)},
		// A PodGroup created, or its minimum lowered, lets its waiting members go on.
		{Event: fwk.ClusterEvent{Resource: podGroupEvent, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.forgettingUnfit(isSchedulableAfterPodGroupChange)},
	}, nil
}

// forgettingUnfit wraps a queueing hint: when it queues a group's member, the event may let the
// group fit, so the group's kept capacity verdict is forgotten and its next member counts again.
func (g *Gang) forgettingUnfit(hint fwk.QueueingHintFn) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		h, err := hint(logger, pod, oldObj, newObj)
		if key, ok := groupOf(pod); ok && h == fwk.Queue {
			g.groups.clearUnfit(key)
		}
		return h, err
	}
}

// isSchedulableAfterMemberAdded queues a group's pods when the added member completes the
// group's minimum (or a task's). Members added before that cannot help, nor can members beyond
// it: queueing on every addition would retry a big group's pods once per member. An addition
// completes the minimum when the count reaches it exactly (a replacement of a lost member), or
// when it is the first seen with the minimum present since a member found it short: the
// informer's store may already hold pods whose additions the queue has not seen yet, so the exact
// count can be passed unseen.
func (g *Gang) isSchedulableAfterMemberAdded(logger klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T", newObj)
	}
	mine, ok := groupOf(pod)
	theirs, ok2 := groupOf(added)
	if !ok || !ok2 || mine != theirs {
		return fwk.QueueSkip, nil
	}
	memo := &g.memberAdded
	memo.Lock()
	defer memo.Unlock()
	if memo.group == mine && memo.pod == added.UID && memo.rv == added.ResourceVersion {
		return memo.hint, nil
	}
	hint := g.memberAddedHint(mine, added)
	memo.group, memo.pod, memo.rv, memo.hint = mine, added.UID, added.ResourceVersion, hint
	return hint, nil
}

// memberAddedHint decides isSchedulableAfterMemberAdded for one added member of group key.
func (g *Gang) memberAddedHint(key groupKey, added *corev1.Pod) fwk.QueueingHint {
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return fwk.QueueSkip // the PodGroup's own creation will queue the pod
	}
	count := g.countMembers(key, pg, added)
	if count.shortOf(pg) != "" {
		return fwk.QueueSkip
	}
	first := false
	g.groups.with(key, func(s *groupState) { first, s.minimumQueued = !s.minimumQueued, true })
	task := v1alpha1.TaskOf(added)
	if first || count.existing == int(pg.Spec.MinMember) || (pg.Spec.MinTaskMember[task] > 0 && count.existingByTask[task] == int(pg.Spec.MinTaskMember[task])) {
		return fwk.Queue
	}
	return fwk.QueueSkip
}

func (g *Gang) isSchedulableAfterPodDeleted(logger klog.Logger, pod *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if _, ok := groupOf(pod); !ok {
		return fwk.QueueSkip, nil
	}
	deleted, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil // a tombstone: assume it freed something
	}
	if len(resourcehelper.PodRequests(deleted, resourcehelper.PodResourcesOptions{})) == 0 {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

func queueGroupMembers(_ klog.Logger, pod *corev1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, ok := groupOf(pod); ok {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func isSchedulableAfterPodGroupChange(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	key, ok := groupOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	obj, ok := newObj.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return fwk.Queue, nil
	}
	if obj.GetNamespace() == key.namespace && obj.GetName() == key.name {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// fail ends a group's attempt (0: the current one): its waiting members are released, what it
// bound is rolled back while the group's minimum is not bound, the group backs off, and it moves
// behind the groups that have not failed since.
func (g *Gang) fail(logger klog.Logger, key groupKey, pg *v1alpha1.PodGroup, msg, reason string, attempt uint64) {
	now := g.now()
	var waiting []types.UID
	var rollback []*corev1.Pod
	alreadyFailed := false
	g.groups.with(key, func(s *groupState) {
		alreadyFailed = !s.lastFailure.IsZero() && s.backoffUntil.After(now)
		if attempt == 0 {
			attempt = s.attempt
		}
		// The attempt ends: its members still reserved or allowed can no longer be let through
		// (Permit, PreBind), and those it bound are rolled back while the minimum is not bound.
		s.markFailed(attempt)
		if attempt == s.attempt {
			for uid := range s.waiting {
				waiting = append(waiting, uid)
			}
			clear(s.waiting)
			s.attempt++
		}
		if c := g.countMembersLocked(s, key, pg, nil); c.bound < int(pg.Spec.MinMember) {
			rollback = g.boundInAttempt(s, key, attempt)
		}
		if alreadyFailed {
			return
		}
		s.lastFailure = now
		s.failures++
		backoff := time.Duration(*g.args.GroupBackoffSeconds) * time.Second << min(s.failures-1, 10)
		backoff = min(backoff, time.Duration(*g.args.MaxGroupBackoffSeconds)*time.Second)
		s.backoffUntil = now.Add(backoff)
	})
	for _, uid := range waiting {
		if w := g.handle.GetWaitingPod(uid); w != nil {
			w.Reject(Name, msg)
		}
	}
	waitingPods.Set(float64(g.groups.waitingCount()))
	if len(rollback) > 0 {
		g.rollBack(logger, key, pg, rollback, msg)
	}
	if alreadyFailed {
		return
	}
	groupsRejected.WithLabelValues(reason).Inc()
	g.releaseElastic(logger)
	logger.V(3).Info("Gang attempt failed", "podGroup", key.String(), "reason", reason, "released", len(waiting), "message", msg)
	g.groupEvent(pg, corev1.EventTypeWarning, strings.SplitN(msg, ":", 2)[0], msg)
	// Bring the group back once its backoff is over, whatever events happened meanwhile.
	backoff := time.Duration(0)
	g.groups.with(key, func(s *groupState) { backoff = s.backoffUntil.Sub(now) })
	g.groups.after(key, backoff, func() { g.handle.Activate(logger, g.pendingMembers(key, "")) })
}

// boundInAttempt lists the members this scheduler bound in the given attempt that are still
// bound and alive, under the group's lock.
func (g *Gang) boundInAttempt(s *groupState, key groupKey, attempt uint64) []*corev1.Pod {
	objs, _ := g.members.ByIndex(podGroupIndex, key.String())
	var out []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if a, ok := s.bound[pod.UID]; ok && a == attempt && pod.DeletionTimestamp == nil &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			out = append(out, pod)
		}
	}
	return out
}

// ReasonRollback is the reason of the event on a PodGroup whose failed attempt had bound members,
// and of the DisruptionTarget condition of those members, which are deleted.
const ReasonRollback = "GangAttemptRolledBack"

// rollBack deletes members bound in a group's failed attempt, so that no partial gang stays
// bound: a bind or PreBind of a sibling failed after Permit let them all through. Each gets a
// DisruptionTarget condition first, as preemption victims do; their controllers create them
// again, and the group is tried whole after its backoff. The API calls run in the background:
// binding cycles do not wait on them.
func (g *Gang) rollBack(logger klog.Logger, key groupKey, pg *v1alpha1.PodGroup, pods []*corev1.Pod, why string) {
	names := make([]string, len(pods))
	for i, pod := range pods {
		names[i] = pod.Name
	}
	sort.Strings(names)
	msg := fmt.Sprintf("%s: %s; deleting the %d members it had bound (%s) so that no partial gang stays bound", ReasonRollback, why, len(pods), strings.Join(names, ", "))
	logger.V(2).Info("Rolling back a failed gang attempt", "podGroup", key.String(), "pods", names)
	g.groupEvent(pg, corev1.EventTypeWarning, ReasonRollback, msg)
	groupsRolledBack.Inc()
	client := g.handle.ClientSet()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, pod := range pods {
			condition := &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonRollback,
				Message: fmt.Sprintf("%s: pod group %s did not bind its minimum in this attempt", pod.Spec.SchedulerName, key)}
			status := pod.Status.DeepCopy()
			if apipod.UpdatePodCondition(status, condition) {
				if err := schedutil.PatchPodStatus(ctx, client, pod.Name, pod.Namespace, &pod.Status, status); err != nil && !apierrors.IsNotFound(err) {
					logger.Error(err, "Marking a pod of a failed gang attempt", "pod", klog.KObj(pod))
				}
			}
			if err := schedutil.DeletePod(ctx, client, pod); err != nil && !apierrors.IsNotFound(err) {
				logger.Error(err, "Deleting a pod of a failed gang attempt", "pod", klog.KObj(pod))
			}
		}
	}()
}

// forgetGroup drops a deleted PodGroup: its members waiting at Permit are rejected at once, its
// reservation is given back, and its state and timers go.
func (g *Gang) forgetGroup(logger klog.Logger, key groupKey) {
	g.releaseReservation(logger, key)
	for _, uid := range g.groups.forget(key) {
		if w := g.handle.GetWaitingPod(uid); w != nil {
			w.Reject(Name, fmt.Sprintf("%s: pod group %s was deleted", v1alpha1.ReasonPodGroupNotFound, key))
		}
	}
	waitingPods.Set(float64(g.groups.waitingCount()))
}

// unreadyBackoff is how long a group whose bound pods tephra-controllers evicted for missing its
// ready timeout (status.unreadyEvictions in a row, the last at lastUnreadyEvictionTime) still
// waits before it is placed again: the group backoff doubled per eviction, capped as failed
// attempts are. 0: it need not wait.
func (g *Gang) unreadyBackoff(pg *v1alpha1.PodGroup, now time.Time) time.Duration {
	n := pg.Status.UnreadyEvictions
	if n <= 0 || pg.Status.LastUnreadyEvictionTime == nil {
		return 0
	}
	backoff := time.Duration(*g.args.GroupBackoffSeconds) * time.Second << min(n-1, 10)
	backoff = min(backoff, time.Duration(*g.args.MaxGroupBackoffSeconds)*time.Second)
	return pg.Status.LastUnreadyEvictionTime.Add(backoff).Sub(now)
}

// activateAfterUnreadyBackoff brings the group's pending members back when its unready backoff
// ends, once per backoff: no event may come to retry them.
func (g *Gang) activateAfterUnreadyBackoff(logger klog.Logger, key groupKey, until time.Time) {
	armed := false
	g.groups.with(key, func(s *groupState) {
		armed = !s.unreadyUntil.Before(until)
		s.unreadyUntil = until
	})
	if !armed {
		g.groups.after(key, until.Sub(g.now())+50*time.Millisecond, func() { g.handle.Activate(logger, g.pendingMembers(key, "")) })
	}
}

func (g *Gang) timeout(pg *v1alpha1.PodGroup) time.Duration {
	if pg.Spec.ScheduleTimeoutSeconds != nil {
		return time.Duration(*pg.Spec.ScheduleTimeoutSeconds) * time.Second
	}
	return time.Duration(*g.args.DefaultScheduleTimeoutSeconds) * time.Second
}

// pendingMembers are the group's members not yet bound, but the one being scheduled, keyed as
// Activate wants.
func (g *Gang) pendingMembers(key groupKey, scheduling types.UID) map[string]*corev1.Pod {
	members, _ := g.members.ByIndex(podGroupIndex, key.String())
	pods := map[string]*corev1.Pod{}
	for _, obj := range members {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.UID != scheduling {
			pods[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	return pods
}

func (g *Gang) podEvent(pod *corev1.Pod, eventType, reason, msg string) {
	g.handle.EventRecorder().Eventf(pod, nil, eventType, reason, "Scheduling", msg)
}

func (g *Gang) groupEvent(pg *v1alpha1.PodGroup, eventType, reason, msg string) {
	ref := &corev1.ObjectReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
		Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
	}
	g.handle.EventRecorder().Eventf(ref, nil, eventType, reason, "Scheduling", msg)
}

// sortedRequests returns the requests of pods, smallest CPU first.
func sortedRequests(pods []*corev1.Pod) []corev1.ResourceList {
	out := make([]corev1.ResourceList, 0, len(pods))
	for _, pod := range pods {
		out = append(out, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Cpu().Cmp(*out[j].Cpu()) < 0 })
	return out
}
