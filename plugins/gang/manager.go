package gang

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulingv1beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
)

// groupManager owns the state of every group (the tracker, the group's attempts, waiting
// members, reservations and timers) and answers each of the framework's extension points for a
// pod in one call: the plugin (Gang) only adapts the framework to it, as scheduler-plugins'
// Coscheduling does over its PodGroupManager.
type groupManager struct {
	handle    fwk.Handle
	args      *Args
	podGroups schedulinglisters.PodGroupLister
	// topologies order the levels of groups' topology constraints (nil in tests without any).
	topologies schedulinglisters.TopologyLister
	members    cache.Indexer
	groups     *tracker
	shares     *jobShares
	// orders are the queues that order their workloads otherwise than by submission (order.go).
	orders queueOrders
	// attained counts the service workloads have received, for queues ordered by it (attained.go).
	attained *attainedService
	// devices charges members for their claims' devices in their job's share (nil in unit tests).
	devices *devices.Devices
	// claims name the Fluid datasets members read (nil in unit tests).
	claims corelisters.PersistentVolumeClaimLister
	// now is time.Now, replaceable in tests.
	now func() time.Time
	// podGroupCycles: kube-scheduler runs with GenericWorkload and schedules the pods of an
	// upstream PodGroup (spec.schedulingGroup) together, in pod-group cycles of its own; those
	// groups get no pilot, which would split them.
	podGroupCycles bool
	// upstreamGroups lists upstream PodGroups, with podGroupCycles only (nil otherwise).
	upstreamGroups schedulingv1beta1listers.PodGroupLister
	// narrowed are the upstream groups offered only their best-fit domain (placements.go).
	narrowed narrowedGroups
	// queueRunning is set by the first preEnqueue: from then on the scheduling queue exists, and
	// the handle may Activate pods.
	queueRunning atomic.Bool
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

// groupOf returns the key of the pod's group; ok is false for a pod without one, and for a
// system pod (v1alpha1.IsSystemPod), which no gang holds back even if it names a group.
func groupOf(pod *corev1.Pod) (groupKey, bool) {
	name, ok := v1alpha1.PodGroupNameOf(pod)
	if ok && v1alpha1.IsSystemPod(pod) {
		return groupKey{}, false
	}
	return groupKey{pod.Namespace, name}, ok
}

// podGroupAdded brings back the waiting members of a group this plugin's informer now shows. The
// scheduler learns of a new PodGroup from an informer of its own, which may be ahead of this one:
// a member it requeued on that event may have been refused again by preEnqueue
// (PodGroupNotFound), with no event left to bring it back.
func (g *groupManager) podGroupAdded(obj any) {
	if pg, ok := obj.(*v1alpha1.PodGroup); ok && g.queueRunning.Load() {
		g.handle.Activate(klog.Background(), g.pendingMembers(groupKey{pg.Namespace, pg.Name}, ""))
	}
}

// podGroupChanged brings back the waiting members of a group whose spec or annotations changed
// (its minimum lowered, its SLA set), as this plugin's informer shows it. kube-scheduler hears of
// the change from an informer of its own, in no set order with this one: a member it requeued
// first met the old PodGroup here (short of members, say) and was held again at PreEnqueue, with
// no event left to bring it back before the periodic flush. Status-only updates bring nobody back
// (isSchedulableAfterPodGroupChange).
func (g *groupManager) podGroupChanged(oldObj, newObj any) {
	old, ok1 := oldObj.(*v1alpha1.PodGroup)
	pg, ok2 := newObj.(*v1alpha1.PodGroup)
	if !ok1 || !ok2 || statusOnly(old, pg) || !g.queueRunning.Load() {
		return
	}
	key := groupKey{pg.Namespace, pg.Name}
	g.groups.clearUnfit(key)
	g.handle.Activate(klog.Background(), g.pendingMembers(key, ""))
}

// carrierDeleted forgets a group of one (v1alpha1.GroupOnPod) that no pod carries any more: the
// deletion of its pod is the deletion of the group, as a PodGroup's is for a group with an object.
func (g *groupManager) carrierDeleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	pg, carried := v1alpha1.GroupOnPod(pod)
	if !carried {
		return
	}
	if _, err := g.podGroups.PodGroups(pg.Namespace).Get(pg.Name); !apierrors.IsNotFound(err) {
		return // another pod carries it now, or a PodGroup object holds it
	}
	g.forgetGroup(klog.Background(), groupKey{pg.Namespace, pg.Name})
}

// preEnqueue keeps a group's pods out of the active queue until the group exists and its
// minimum (and every task's minimum) of pods exists.
func (g *groupManager) preEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	if !g.queueRunning.Load() {
		g.queueRunning.Store(true)
	}
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
		if !groupCreatedBeside(pod, g.now()) {
			g.podEvent(pod, corev1.EventTypeWarning, v1alpha1.ReasonPodGroupNotFound, msg)
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if err != nil {
		return fwk.AsStatus(err)
	}
	if g.inPodGroupCycles(pod) {
		// kube-scheduler's GangScheduling holds it until its group's minCount exists; TephraGang
		// only waits for the upstream PodGroup, which its queue is read from.
		return nil
	}
	g.groups.with(key, func(s *groupState) { s.created = pg.CreationTimestamp.Time })
	count := g.countMembers(key, pg, pod)
	if short := count.shortOf(pg); short != "" {
		g.groups.with(key, func(s *groupState) { s.minimumQueued, s.short = false, true })
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %s", v1alpha1.ReasonWaitingForMembers, short))
	}
	if count.placedMeets(pg) {
		// The minimum is placed: the next attempt (members lost and created again) is tried
		// whole again, without a pilot until it is found unfit.
		g.groups.with(key, func(s *groupState) {
			s.pilot, s.pilotName, s.admitted, s.short, s.piloted = "", "", false, false, false
		})
		return nil
	}
	now := g.now()
	if msg := g.backoffVerdict(klog.FromContext(ctx), key, pg, now); msg != "" {
		// Held here, not refused by PreFilter: a scheduling cycle could only refuse the member
		// again, and the backoff's timer brings every member back when it ends (fail,
		// activateAfterUnreadyBackoff).
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	// The minimum exists and heads for the active queue: from now on, elastic pods of other
	// groups wait for it.
	armed := false
	var pilot string
	g.groups.with(key, func(s *groupState) {
		s.wantsMinimum, s.stalled, s.lastActive, s.short = true, false, now, false
		s.priority = corev1helpers.PodPriority(pod)
		armed, s.slaArmed = s.slaArmed, true
		if int(pg.Spec.MinMember) >= pilotedFromStart {
			s.piloted = true
		}
		pilot = g.pilotLocked(s, pod)
	})
	if !armed {
		g.armSLA(klog.FromContext(ctx), key, pg)
	}
	if pilot != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod %s of pod group %s is tried first; the other members follow once it finds room for the group's minimum",
			v1alpha1.ReasonWaitingForPilot, pilot, key))
	}
	return nil
}

// admit lets the group's other members go on: a member's PreFilter found room for the
// group's minimum.
func (g *groupManager) admit(ctx context.Context, key groupKey, pod *corev1.Pod) {
	admitted := true
	g.groups.with(key, func(s *groupState) { admitted, s.admitted = s.admitted, true })
	if !admitted {
		g.handle.Activate(klog.FromContext(ctx), g.pendingMembers(key, pod.UID))
	}
}

// preFilter rejects a member of a group that is backing off after a failed attempt, and the
// first member of an attempt whose group's minimum cannot fit the cluster's free capacity. The
// nodes it narrows a member to are kept in the cycle state for Filter (see signPod).
func (g *groupManager) preFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	result, status := g.decidePreFilter(ctx, state, pod, nodes)
	if state != nil && status.IsSuccess() && !result.AllNodes() {
		state.Write(allowedNodesKey, &allowedNodes{result.NodeNames})
	}
	return result, status
}

// decidePreFilter is preFilter's decision.
func (g *groupManager) decidePreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
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
	// Read before the verdict below is made or kept: capacity freed from now on makes it stale.
	freed := g.groups.freed.Load()
	if msg := g.backoffVerdict(klog.FromContext(ctx), key, pg, now); msg != "" {
		// A member on its way to its cycle when its group's attempt failed: the others wait at
		// PreEnqueue. UnschedulableAndUnresolvable: evicting pods would not help a group that
		// waits out its backoff, so no PostFilter tries.
		backoffCycles.Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	constraint, problem := g.constraintOf(pg, pod)
	if problem != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %s: %s", v1alpha1.ReasonInvalidPodGroup, key, problem))
	}
	if status := unknownSubGroup(pg, pod, key); status != nil {
		return nil, status
	}
	view := g.viewForPreFilter(key, pg, now, freed)
	if _, refused := admission.Refused(state); refused && view.reserved != nil && view.waiting == 0 {
		// Its queue turned it away in this cycle: no nodes are held for it meanwhile, as they
		// would keep off the very pods the queue waits to admit. It reserves again once admitted.
		g.releaseReservation(klog.FromContext(ctx), key)
		view.reserved = nil
	}
	if view.waiting > 0 {
		// An attempt is under way: members wait at Permit for the rest of the minimum, which
		// this member may complete. Once the minimum is placed none waits (Permit allows them
		// all), so a member tried while the minimum's binds are in flight is counted below, and
		// held back as elastic if another group's minimum is pending.
		if left := leftOut(pod, key, view.subGroupsLeft); left != nil {
			return nil, left
		}
		return onDomain(view.reserved, subGroupDomain(pod, view.assigned, view.subGroupDomains)), nil
	}
	if view.unfit != "" {
		// A member of the group found the minimum unable to fit, and nothing has happened since
		// that could change it: counting the members again would cost O(members) per member.
		// Unschedulable, not UnschedulableAndUnresolvable: TephraQueue's PostFilter evicts for
		// one pod at a time, so every member of a minimum that waits for reclaim must get to it.
		return nil, fwk.NewStatus(fwk.Unschedulable, view.unfit)
	}
	count := g.countMembers(key, pg, nil)
	if count.placedMeets(pg) && ownSubGroupWhole(pg, pod, count.placedBySubGroup) {
		// The minimum runs, and so does this member's sub-group: it is elastic. (A sub-group
		// above the group's minimum of sub-groups is placed as a minimum of its own.)
		return g.decideElastic(key, pod, nodes, constraint, view)
	}
	g.groups.with(key, func(s *groupState) {
		s.wantsMinimum, s.stalled, s.lastActive = true, false, now
		s.priority = corev1helpers.PodPriority(pod)
	})
	subGrouped := len(pg.Spec.SubGroups) > 0
	if count.bound >= int(pg.Spec.MinMember) && !subGrouped {
		g.admit(ctx, key, pod)
		return onDomain(nil, view.assigned), nil // the minimum runs but for a task's; this member completes it
	}
	return g.decideMinimum(ctx, state, &minimumCheck{
		preFilterView: view, key: key, pg: pg, pod: pod, freed: freed,
		constraint: constraint, subGrouped: subGrouped, count: count, nodes: nodes,
	})
}

// preFilterView is the group's state as a member's PreFilter reads it: once for the whole
// decision.
type preFilterView struct {
	waiting         int
	unfit           string
	reserved        []string
	assigned        *domain
	subGroupDomains map[string]*domain
	subGroupsLeft   sets.Set[string]
	inAttempt       bool
}

// viewForPreFilter reads the group's state for a member's PreFilter, under the group's lock.
func (g *groupManager) viewForPreFilter(key groupKey, pg *v1alpha1.PodGroup, now time.Time, freed uint64) preFilterView {
	var v preFilterView
	g.groups.with(key, func(s *groupState) {
		v.waiting = len(s.waiting)
		v.unfit = s.keptUnfit(now, freed)
		v.reserved = s.reserved
		v.assigned = s.domain
		if len(pg.Spec.SubGroups) > 0 {
			// A group whose spec no longer has sub-groups (a Job's task some of whose pods
			// succeeded) places by its own domain alone.
			v.subGroupDomains, v.subGroupsLeft = s.subGroupDomains, s.subGroupsLeft
		}
		v.inAttempt = len(s.waiting) > 0 || len(s.assumed) > 0
	})
	return v
}

// decideElastic decides for a member above its group's running minimum (elastic).
func (g *groupManager) decideElastic(key groupKey, pod *corev1.Pod, nodes []fwk.NodeInfo, constraint *topology.Constraint, view preFilterView) (*fwk.PreFilterResult, *fwk.Status) {
	// It waits while a minimum elsewhere may still take the capacity.
	if other := g.pendingMinimum(key); other != "" {
		g.groups.with(key, func(s *groupState) { s.elasticWaiting = true })
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: pod %s is above the minimum of its group and waits while the minimum of pod group %s is being placed", v1alpha1.ReasonElasticWaiting, pod.Name, refusal.Volatile(other)))
	}
	if mine := subGroupDomain(pod, view.assigned, view.subGroupDomains); mine != nil && (constraint != nil || view.subGroupDomains != nil) {
		// It joins its sub-group's or group's domain if that has room for it, else goes
		// anywhere.
		return elasticInDomain(pod, nodes, mine), nil
	}
	return nil, nil
}

// minimumCheck is a member's PreFilter for a group whose minimum is not placed yet: the group as
// read for it, what the rest of the minimum needs, and the nodes it may take.
type minimumCheck struct {
	preFilterView
	key        groupKey
	pg         *v1alpha1.PodGroup
	pod        *corev1.Pod
	freed      uint64
	constraint *topology.Constraint
	subGrouped bool
	count      memberCount
	// refused: the member's queue turned it away in this cycle (admission.Refused).
	refused          bool
	unplacedRequests []corev1.ResourceList
	need             corev1.ResourceList
	// nodes are those the minimum may take, reservable those a reservation may hold, and allowed
	// the nodes the pod may use, for a topology gang's domains.
	nodes, reservable, allowed []fwk.NodeInfo
}

// decideMinimum admits a member of a minimum not yet placed when the rest of the minimum fits
// the free capacity of the nodes it may take (its reservation's, its domain's), and otherwise
// refuses it (cannotFit).
func (g *groupManager) decideMinimum(ctx context.Context, state fwk.CycleState, c *minimumCheck) (*fwk.PreFilterResult, *fwk.Status) {
	g.needAndNodes(ctx, state, c)
	var status *fwk.Status
	switch {
	case c.subGrouped:
		status = g.placeSubGroups(ctx, state, c)
	case c.constraint != nil:
		status = g.placeInDomain(ctx, c)
	}
	if status != nil {
		return nil, status
	}
	if status = g.checkMinimumFits(ctx, state, c); status != nil {
		return nil, status
	}
	g.admit(ctx, c.key, c.pod)
	return onDomain(c.reserved, subGroupDomain(c.pod, c.assigned, c.subGroupDomains)), nil
}

// needAndNodes works out what the rest of the minimum needs and the nodes it may take: with
// their devices when members claim some, and the group's reserved nodes when it holds (or now
// gets) a reservation.
func (g *groupManager) needAndNodes(ctx context.Context, state fwk.CycleState, c *minimumCheck) {
	c.unplacedRequests = sortedRequests(c.count.unplaced)
	if g.devices != nil && slices.ContainsFunc(c.count.unplaced, devices.UsesDevices) {
		// The minimum's devices are checked against the nodes' as its CPU is: without them, a
		// gang short of devices would be placed and released again and again, and a topology
		// gang kept in a domain whose devices are taken.
		c.unplacedRequests = g.requestsWithDevices(c.count.unplaced)
		c.nodes = g.devices.WithDevices(c.nodes)
	}
	c.need = g.minimumStillNeeded(c.pg, c.count, c.unplacedRequests)
	c.reservable = c.nodes
	if c.constraint != nil || c.subGrouped {
		c.allowed = nodesFor(c.pod, c.nodes)
	}
	if c.constraint != nil {
		if c.reserved == nil {
			// A reservation of a topology gang holds nodes of one domain only.
			c.reservable = reservationDomain(c.constraint, c.allowed, c.need)
		}
	}
	_, c.refused = admission.Refused(state)
	if !c.refused {
		c.reserved = g.reservationFor(ctx, c.key, c.pg, c.pod, c.need, c.reservable, c.reserved)
	}
	if c.reserved != nil {
		c.nodes = onNodes(c.nodes, c.reserved)
		c.allowed = onNodes(c.allowed, c.reserved)
	}
}

// cannotFit refuses the member: the minimum cannot fit now. A group at the head of its queue
// gets nodes reserved then (queuehead.go), if its queue admits it and it holds none yet.
func (g *groupManager) cannotFit(ctx context.Context, c *minimumCheck, msg string) *fwk.Status {
	if c.reserved == nil && !c.refused {
		if held := g.reserveAtQueueHead(ctx, c.key, c.pg, c.pod, c.need, c.reservable); held != nil {
			msg += fmt.Sprintf("; it heads its queue, and nodes %s are reserved for it", strings.Join(held, ", "))
		}
	}
	return g.unfit(c.key, msg, c.freed)
}

// placeInDomain narrows the nodes of a topology gang to its domain. The whole minimum goes to
// one domain, chosen before any member is placed: member by member, a gang would strand
// half-placed in a domain too small for it.
func (g *groupManager) placeInDomain(ctx context.Context, c *minimumCheck) *fwk.Status {
	if c.assigned == nil || !c.inAttempt {
		minimum := g.minimumNeedsOf(c)
		var why string
		// The domain of the group's last attempt (a gang restarted by its Job, say) is kept
		// while it holds the minimum.
		c.assigned, why = chooseDomain(c.constraint, c.allowed, minimum, g.placedOn(c.key), c.assigned)
		if why != "" {
			return g.cannotFit(ctx, c, fmt.Sprintf("%s: the minimum of pod group %s needs %s: %s", v1alpha1.ReasonNotEnoughResources, c.key, formatRequests(c.need), why))
		}
		g.groups.with(c.key, func(s *groupState) { s.domain, s.subGroupDomains, s.subGroupsLeft = c.assigned, nil, nil })
	}
	if c.assigned != nil {
		c.nodes = nodesOf(c.nodes, c.assigned)
	}
	return nil
}

// checkMinimumFits refuses the member (cannotFit) unless the nodes' free capacity holds the rest
// of the minimum: in total, and member by member.
func (g *groupManager) checkMinimumFits(ctx context.Context, state fwk.CycleState, c *minimumCheck) *fwk.Status {
	if lacking := lackingCapacity(c.need, c.nodes); lacking != "" {
		return g.cannotFit(ctx, c, fmt.Sprintf("%s: the minimum of pod group %s needs %s", v1alpha1.ReasonNotEnoughResources, c.key, lacking))
	}
	// Free capacity in total is not enough: members cannot span nodes. A gang that could never be
	// placed whole would otherwise be placed member by member, held at Permit and released, again
	// after every backoff, and every member it holds nominated makes the filters of other pods
	// slower.
	if missing := int(c.pg.Spec.MinMember) - c.count.placed; missing > 0 && len(c.count.unplaced) >= missing {
		smallest := smallestRequests(c.unplacedRequests)
		if fit := membersThatFit(smallest, c.nodes, missing); fit < missing {
			if c.constraint == nil && !c.subGrouped && !slices.ContainsFunc(c.count.unplaced, devices.UsesDevices) {
				// It fits in total: PostFilter may move pods to make whole nodes for it
				// (consolidate.go). Not for a topology gang, nor one that claims devices, whose domains and
				// devices the planner does not see; one with sub-groups is marked by placeSubGroups.
				markFragmented(state, c.unplacedRequests, missing, c.need)
			}
			return g.cannotFit(ctx, c, fmt.Sprintf("%s: the minimum of pod group %s needs %d more pods, and the nodes' free capacity holds at most %d of them (each asks at least %s)",
				v1alpha1.ReasonNotEnoughResources, c.key, missing, fit, formatRequests(smallest)))
		}
	}
	return nil
}

// unfit records that the group's minimum cannot fit now, for its other members to be refused
// with the same message until capacity is freed after freed, and returns the rejection.
func (g *groupManager) unfit(key groupKey, msg string, freed uint64) *fwk.Status {
	now := g.now()
	g.groups.with(key, func(s *groupState) { s.unfit, s.unfitAt, s.unfitFreed, s.piloted = msg, now, freed, true })
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// onReserved sends a group with a reservation to its reserved nodes.
func onReserved(reserved []string) *fwk.PreFilterResult {
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

// groupCreatedBeside says whether the pod's group is on its way, so that its absence is no news:
// a Tephra Job's controller creates a new job's PodGroup and pods at once (and says on the Job
// when it cannot create the group). A warning on each pod would be a write to the apiserver per
// pod, in the burst of Jobs that can least afford it. Past groupGrace, the pod warns as any other.
func groupCreatedBeside(pod *corev1.Pod, now time.Time) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "Job" && strings.HasPrefix(ref.APIVersion, batchv1alpha1.GroupName+"/") &&
		now.Sub(pod.CreationTimestamp.Time) < groupGrace
}

// groupGrace is how long a Tephra Job's pod waits for its group without a warning.
const groupGrace = 30 * time.Second

func (g *groupManager) podEvent(pod *corev1.Pod, eventType, reason, msg string) {
	g.handle.EventRecorder().Eventf(pod, nil, eventType, reason, "Scheduling", msg)
}

// groupEvent records an event on a PodGroup: on Tephra's object, on the upstream PodGroup a group
// is translated from (v1alpha1.FromUpstream), or on the pod that carries a group of one
// (v1alpha1.GroupOnPod), which is all of the group there is to describe.
func (g *groupManager) groupEvent(pg *v1alpha1.PodGroup, eventType, reason, msg string) {
	ref := &corev1.ObjectReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
		Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
	}
	if v1alpha1.FromUpstreamPodGroup(pg) {
		ref.APIVersion = metav1.GetControllerOfNoCopy(pg).APIVersion
	}
	if pod := v1alpha1.CarriedBy(pg); pod != "" {
		ref = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pg.Namespace, Name: pod, UID: pg.UID, ResourceVersion: pg.ResourceVersion}
	}
	g.handle.EventRecorder().Eventf(ref, nil, eventType, reason, "Scheduling", msg)
}

// requestsWithDevices is sortedRequests with each pod's devices (devices.Devices.Charge) too,
// but for the claims it names directly: a gang's members may share those (one interconnect
// channel for all), and counted per member they would make the gang seem to need one each.
// DynamicResources checks them.
func (g *groupManager) requestsWithDevices(pods []*corev1.Pod) []corev1.ResourceList {
	out := make([]corev1.ResourceList, 0, len(pods))
	local := g.devices.OfferedOnNodes()
	for _, pod := range pods {
		requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		charge := g.devices.Charge(pod)
		own := charge.Charged.Clone()
		own.Sub(charge.Direct)
		for name, q := range own.List() {
			// Only devices of a node's own slices are checked against nodes (WithDevices):
			// those of slices for many nodes (a network's) are on no node's books.
			if _, local := local[name]; local {
				requests[name] = q
			}
		}
		out = append(out, requests)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Cpu().Cmp(*out[j].Cpu()) < 0 })
	return out
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
