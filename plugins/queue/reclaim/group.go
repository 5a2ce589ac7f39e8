package reclaim

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// With kube-scheduler's GenericWorkload gate on, the pods of an upstream PodGroup are scheduled
// together in a pod-group cycle, and when the cycle cannot place the group, PodGroupPostFilter
// may make room for the whole group at once. TephraQueue chooses the victims under the same rules
// as for a single pod (SelectVictimsOnNode): reclaim only from queues above their deserved share
// and never below a guarantee, in-queue preemption of lower priority only, pods above their gang's
// minimum before any minimum, a minimum broken whole or not at all, PodDisruptionBudgets respected
// before they are broken. As upstream's workload-aware preemption does, it first takes away every
// victim it may, asks kube-scheduler's pod-group algorithm to place the group, and then gives back
// the most important victims the group does not need: nothing is evicted for a group that would
// still not fit, and every member is nominated to the node the algorithm chose for it.

// freedKey is the context key of what the victims of a group's preemption free (Freed).
type freedKey struct{}

// Freed is what the victims of a group's preemption free, by leaf queue, while PreemptGroup asks
// the pod-group algorithm whether the group fits without them: the plugin's PreFilter admits the
// group's pods against it. nil outside that simulation.
func Freed(ctx context.Context) map[string]quota.Amounts {
	freed, _ := ctx.Value(freedKey{}).(map[string]quota.Amounts)
	return freed
}

// PreemptGroup preempts for an upstream PodGroup that its pod-group cycle could not place (the
// plugin's PodGroupPostFilter): members are its unplaced pods, and p the first of them.
func (r *Reclaimer) PreemptGroup(ctx context.Context, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc, p Preemptor, members []*corev1.Pod) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	pod, w, st, leaf := p.Pod, p.Workload, p.Queues, p.Leaf
	if r.isElastic(w) {
		// The group grows above its placed minimum: elastic pods evict nobody (docs/elastic.md).
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: pod group %s has its minimum placed; its pods above it only take free capacity", w.Group))
	}
	if pending := r.groupPreemptionPending(members); pending != nil {
		// The victims of its last preemption are still going: keep the room for the group.
		return &fwk.PodGroupPostFilterResult{NominatingInfos: pending}, fwk.NewStatus(fwk.Success, "reclaim: the group's last preemption is still taking effect")
	}
	// What the group asks, all its unplaced members together.
	need := quota.Amounts{}
	for _, m := range members {
		need.Add(r.ledger.PodRequests(m))
	}
	one := &run{Reclaimer: r, pod: pod, work: w, leaf: leaf, need: need}
	one.going = one.victimsGoing()
	st = r.plugin.WithDemandFor(st, leaf.Name, need)
	st = one.withGoing(st)
	one.state = st
	one.belowShare = st.belowShare(leaf, need)
	one.lowestPrior = r.ledger.LowestPlacedPriority(leaf.Name)
	one.elasticInQueue = r.hasElasticPods(leaf.Name, w.Group)
	if !one.belowShare && corev1helpers.PodPriority(pod) <= one.lowestPrior && !one.elasticInQueue {
		return nil, fwk.NewStatus(fwk.Unschedulable, nothingEvictable(leaf.Name))
	}
	pdbs, err := one.pdbs.List(labels.Everything())
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	one.budgetsNow = one.budgets(pdbs, one.going)

	lister := r.handle.MutableSnapshotSharedLister()
	if err := lister.StartMutations(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("reclaim for pod group: %w", err))
	}
	defer func() {
		if err := lister.EndMutations(); err != nil {
			klog.FromContext(ctx).Error(err, "Ending the snapshot's mutations", "podGroup", pgInfo.GetKey())
		}
	}()
	one.patience = one.patienceFor(members, need, time.Now())
	victims, assignments, msg, err := one.chooseForGroup(ctx, lister, schedule, r.handle)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("reclaim for pod group: %w", err))
	}
	if msg != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: "+msg+r.sparedJobsNote(klog.FromContext(ctx), &one.protected, members, time.Now()))
	}
	now := time.Now()
	one.countReclaims(victims, need, now)
	one.victimsMu.Lock()
	var pods []*corev1.Pod
	for _, u := range victims {
		for _, p := range u.pods {
			one.inFlight[p.UID] = now
			pods = append(pods, p)
		}
	}
	one.noteLimitLifted(victims)
	one.victimsMu.Unlock()
	r.evictForGroup(klog.FromContext(ctx), members, pods, violations(victims, one.budgetsNow), pgInfo.GetKey())
	nominations := map[types.NamespacedName]*fwk.NominatingInfo{}
	for _, a := range assignments {
		p := a.GetPod()
		nominations[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: a.GetNodeName()}
		r.ledger.Nominate(p.UID, a.GetNodeName(), now)
	}
	setup.EvictingFor(ctx, r.handle, pod)
	return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations},
		fwk.NewStatus(fwk.Success, fmt.Sprintf("reclaim: evicting %d pods for pod group %s, whose %d pods then fit", len(pods), w.Group, len(assignments)))
}

// evictForGroup evicts the victims of a group's preemption, which breaks broken budgets, after
// the cycle, as kube-scheduler's own preemption does (async): the cycle never waits on the API.
// In parallel, as its executor does: one after another, a thousand victims (two requests each)
// kept the group waiting half a minute in upstream's benchmark. Tried while its victims go, the
// group would fail and build up backoff: its members wait at PreEnqueue until the last of them is
// gone, and are tried at once then.
func (r *Reclaimer) evictForGroup(logger klog.Logger, members, victims []*corev1.Pod, broken int, group string) {
	r.holdForVictims(members, victims)
	go r.handle.Parallelizer().Until(r.stop, len(victims), func(i int) {
		if _, err := r.evict(r.stop, members[0], victims[i], r.name, int64(broken)); err != nil {
			logger.Error(err, "Evicting a victim for a pod group", "victim", klog.KObj(victims[i]), "podGroup", group)
			r.victims.Gone(victims[i].UID) // it stays: the group does not wait for it
		}
	}, r.name)
}

// placedChecker is what giving a victim back asks of the framework (the scheduler's fwk.Handle):
// the members checked again on the nodes the pod-group algorithm proposed for them.
type placedChecker interface {
	RunPreFilterExtensionAddPod(ctx context.Context, state fwk.CycleState, podToSchedule *corev1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state fwk.CycleState, podToSchedule *corev1.Pod, podInfoToRemove fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	RunFilterPluginsWithNominatedPods(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, info fwk.NodeInfo) *fwk.Status
	RunReservePluginsReserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status
	RunReservePluginsUnreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string)
}

// chooseForGroup takes every unit the group may evict off the snapshot, asks the pod-group
// algorithm to place the group once, and gives back the most important units the group still
// fits beside where the algorithm placed it. It returns the victims, least important first, and
// the members' nodes, or why nothing may be evicted.
func (r *run) chooseForGroup(ctx context.Context, lister fwk.MutableSnapshotSharedLister, schedule fwk.PodGroupSchedulingFunc, check placedChecker) ([]*unit, []fwk.ProposedAssignment, string, error) {
	candidates, podInfos, err := r.groupCandidates(ctx, lister)
	if err != nil {
		return nil, nil, "", err
	}
	pool := r.groupPool(candidates)
	if len(pool) == 0 {
		return nil, nil, fmt.Sprintf("no pod may be evicted for pod group %s: no other queue it may reclaim from uses more than its deserved share, and queue %q holds no pod of lower priority or above a gang's minimum", r.work.Group, r.leaf.Name), nil
	}
	// From here freed is what the units off the snapshot free, kept by move: the sum the pool was
	// checked against starts again from nothing (counted twice, it let PreFilter admit the group
	// against twice what its victims free).
	d := &groupDryRun{lister: lister, logger: klog.FromContext(ctx), podInfos: podInfos, freed: map[string]quota.Amounts{}}
	for _, u := range pool {
		if err := d.move(u, -1); err != nil {
			return nil, nil, "", err
		}
	}
	assignments, ok := r.placeGroup(ctx, schedule, d.freed)
	if !ok {
		return nil, nil, fmt.Sprintf("evicting every pod that may be evicted (%d) would not make room for pod group %s; nothing is evicted", podsIn(pool), r.work.Group), nil
	}
	// Give back the most important units first: each one the group still fits beside stays. As
	// upstream's workload-aware preemption reprieves, the members are checked again on the nodes
	// the algorithm proposed (one Filter per member), not placed again: placing the whole group
	// for every unit filtered every member on every node, once per unit (a thousand victims in
	// upstream's benchmark), with every nominated pod added to each node.
	var victims []*unit
	for i := len(pool) - 1; i >= 0; i-- {
		u := pool[i]
		stays, err := r.giveBack(ctx, lister, u, assignments, d.freed, d.podInfos, d.move, check)
		if err != nil {
			return nil, nil, "", err
		}
		if !stays {
			victims = append(victims, u)
		}
	}
	// The pool passed the queues' convergence rule unit by unit, on everything taken before each;
	// the victims left are fewer, and the rule is not monotone: the preemptor gains the same
	// either way, so a queue far above its share may give up many pods where it may not give up a
	// few (quota.MoveConverges). Evicting more than the group needs to pass it would be absurd:
	// the group then waits for room instead.
	if !r.victimsConverge(d.freed) {
		return nil, nil, fmt.Sprintf("the %d pods pod group %s needs evicted would not bring the queues closer to their deserved shares; nothing is evicted", podsIn(victims), r.work.Group), nil
	}
	slices.Reverse(victims)
	return victims, assignments, "", nil
}

// groupCandidates returns the pods on the snapshot's nodes the group may take, and their
// PodInfos, after it takes the pods on their way out off the snapshot.
func (r *run) groupCandidates(ctx context.Context, lister fwk.MutableSnapshotSharedLister) ([]fwk.PodInfo, map[types.UID]fwk.PodInfo, error) {
	infos, err := lister.NodeInfos().List()
	if err != nil {
		return nil, nil, err
	}
	// Pods on their way out free their room whatever is chosen: the group is placed without them.
	var candidates []fwk.PodInfo
	// The snapshot's PodInfos, kept to put the victims given back again.
	podInfos := map[types.UID]fwk.PodInfo{}
	var leaving []*corev1.Pod
	for _, info := range infos {
		for _, pi := range info.GetPods() {
			p := pi.GetPod()
			if p.DeletionTimestamp != nil || r.going[p.UID] {
				leaving = append(leaving, p)
				continue
			}
			candidates = append(candidates, pi)
			podInfos[p.UID] = pi
		}
	}
	// Removed once the nodes are read: RemovePod changes the node's list of pods in place.
	for _, p := range leaving {
		if err := lister.RemovePod(klog.FromContext(ctx), p, p.Spec.NodeName); err != nil {
			return nil, nil, err
		}
	}
	return candidates, podInfos, nil
}

// groupPool is every unit the group may take, least important first, as SelectVictimsOnNode
// would take them one after another.
func (r *run) groupPool(candidates []fwk.PodInfo) []*unit {
	var pool []*unit
	freed := map[string]quota.Amounts{}
	taken := newElasticCount()
	patience := r.patience
	spared := false
	for _, u := range orderByBudgets(r.units(candidates), r.budgetsNow) {
		if !r.allowed(u, freed) || taken.full(u) {
			continue
		}
		if ok, from := patience.take(u); !ok {
			r.protected.spare(u, from, spareCost)
			spared = spared || !u.breaksBudget
			continue
		}
		if u.breaksBudget && spared {
			continue // as PostFilter: no budget broken for a victim patience keeps a while yet
		}
		taken.add(u)
		ledger.AddSigned(freed, u.queue, u.freed, 1)
		pool = append(pool, u)
	}
	return pool
}

// groupDryRun is the group's preemption on the scheduler's snapshot: the units taken off it,
// and what they free.
type groupDryRun struct {
	lister fwk.MutableSnapshotSharedLister
	logger klog.Logger
	// podInfos are the snapshot's PodInfos, kept to put the victims given back again.
	podInfos map[types.UID]fwk.PodInfo
	// freed is what the units off the snapshot free, by queue.
	freed map[string]quota.Amounts
}

// move takes the unit's pods off the snapshot (sign < 0) or puts them back (sign > 0), and
// counts what the unit frees accordingly.
func (d *groupDryRun) move(u *unit, sign int) error {
	for _, p := range u.pods {
		if sign < 0 {
			if err := d.lister.RemovePod(d.logger, p, p.Spec.NodeName); err != nil {
				return err
			}
			continue
		}
		info, err := d.lister.NodeInfos().Get(p.Spec.NodeName)
		if err != nil {
			return err
		}
		pi, ok := d.podInfos[p.UID]
		if !ok {
			return fmt.Errorf("pod %s/%s is not on node %s in the scheduler's snapshot", p.Namespace, p.Name, p.Spec.NodeName)
		}
		if err := d.lister.AddPod(pi, info.Node().Name); err != nil {
			return err
		}
	}
	ledger.AddSigned(d.freed, u.queue, u.freed, int64(-sign))
	return nil
}

// placeGroup asks the pod-group algorithm to place the group once, its queue admitting it
// against what the units off the snapshot free (Freed). It returns the members it
// placed on a node, or false if the group does not fit.
func (r *Reclaimer) placeGroup(ctx context.Context, schedule fwk.PodGroupSchedulingFunc, freed map[string]quota.Amounts) ([]fwk.ProposedAssignment, bool) {
	f := map[string]quota.Amounts{}
	for q, a := range freed {
		f[q] = a.Clone()
	}
	result, status := schedule(context.WithValue(ctx, freedKey{}, f))
	if !status.IsSuccess() || result == nil {
		return nil, false
	}
	var placed []fwk.ProposedAssignment
	for _, a := range result.ProposedAssignments {
		if a.GetNodeName() != "" {
			placed = append(placed, a)
		}
	}
	return placed, true
}

// giveBack puts a unit's pods back on the snapshot and keeps them there if the group still fits
// beside them: its queue admits it with what the other victims free, and each member, in the
// algorithm's order, passes Filter on its proposed node with the members before it placed and
// reserved (their cycle states were made with the unit's pods away: PreFilter's extensions are
// told of them, as the scheduler tells them of a pod added). Otherwise the unit goes off again.
func (r *run) giveBack(ctx context.Context, lister fwk.MutableSnapshotSharedLister, u *unit, assignments []fwk.ProposedAssignment,
	freed map[string]quota.Amounts, podInfos map[types.UID]fwk.PodInfo, move func(*unit, int) error, check placedChecker) (stays bool, err error) {
	logger := klog.FromContext(ctx)
	if err := move(u, 1); err != nil {
		return false, err
	}
	extend := func(add bool) error {
		for _, p := range u.pods {
			info, err := lister.NodeInfos().Get(p.Spec.NodeName)
			if err != nil {
				return err
			}
			for _, a := range assignments {
				var status *fwk.Status
				if add {
					status = check.RunPreFilterExtensionAddPod(ctx, a.GetCycleState(), a.GetPod(), podInfos[p.UID], info)
				} else {
					status = check.RunPreFilterExtensionRemovePod(ctx, a.GetCycleState(), a.GetPod(), podInfos[p.UID], info)
				}
				if !status.IsSuccess() {
					return status.AsError()
				}
			}
		}
		return nil
	}
	if err := extend(true); err != nil {
		return false, err
	}
	fits := r.admit(r.leaf, r.need, freed, false) == ""
	var placed []fwk.ProposedAssignment
	for _, a := range assignments {
		if !fits {
			break
		}
		info, err := lister.NodeInfos().Get(a.GetNodeName())
		if err != nil {
			return false, err
		}
		if !check.RunFilterPluginsWithNominatedPods(ctx, a.GetCycleState(), a.GetPod(), info).IsSuccess() {
			fits = false
			break
		}
		// As the algorithm placed it: the members after it were checked with it there.
		if err := lister.AddPod(a.GetPodInfo(), a.GetNodeName()); err != nil {
			return false, err
		}
		placed = append(placed, a)
		if !check.RunReservePluginsReserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName()).IsSuccess() {
			fits = false
		}
	}
	for i := len(placed) - 1; i >= 0; i-- {
		a := placed[i]
		check.RunReservePluginsUnreserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
		if err := lister.RemovePod(logger, a.GetPod(), a.GetNodeName()); err != nil {
			return false, err
		}
	}
	if fits {
		return true, nil
	}
	if err := move(u, -1); err != nil {
		return false, err
	}
	return false, extend(false)
}

// victimsConverge says whether victims freeing freed (by queue) together pass the queues'
// convergence rule; victims of the preemptor's own queue only (preemption by priority) always do.
func (r *run) victimsConverge(freed map[string]quota.Amounts) bool {
	taken := map[string]quota.Amounts{}
	for q, a := range freed {
		if q != r.leaf.Name && !a.IsZero() {
			taken[q] = a
		}
	}
	return len(taken) == 0 || r.moveConverges(taken, r.neededResources(), r.need)
}

// groupPreemptionPending returns the members' nominations while the victims of the group's last
// preemption may still be going (nil if there is none).
func (r *Reclaimer) groupPreemptionPending(members []*corev1.Pod) map[types.NamespacedName]*fwk.NominatingInfo {
	var out map[types.NamespacedName]*fwk.NominatingInfo
	for _, m := range members {
		e, ok := r.ledger.Entry(m.UID)
		if !ok || e.Holding || e.NominatedAt.IsZero() || time.Since(e.NominatedAt) >= victimsGrace {
			continue
		}
		if out == nil {
			out = map[types.NamespacedName]*fwk.NominatingInfo{}
		}
		out[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}] = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: e.NominatedNode}
	}
	return out
}

func podsIn(units []*unit) int {
	n := 0
	for _, u := range units {
		n += len(u.pods)
	}
	return n
}
