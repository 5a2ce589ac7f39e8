package reclaim

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// nothingEvictable says why reclaim evicts nothing for a pod whose queue holds no pod it may
// preempt. It is one message whether the queue is at its deserved share (and so may reclaim from
// none) or no other queue uses more than its own: a queue near its share passes from one to the
// other between attempts, and two messages would make the scheduler write the pod's condition
// at each pass (plugins/internal/refusal).
func nothingEvictable(queue string) string {
	return fmt.Sprintf("reclaim: no pod may be evicted for it: queue %q holds no pod of lower priority or above a gang's minimum, and it may reclaim from no other queue (it is at its deserved share, or none uses more than its own)", queue)
}

// Preempt reclaims or preempts for the preemptor, a pod that fits no node (the plugin's
// PostFilter).
func (r *Reclaimer) Preempt(ctx context.Context, cs fwk.CycleState, p Preemptor, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	one, minimum, status := r.startReclaim(p.Pod, p.Workload, p.Queues, p.Leaf, m)
	if status != nil {
		return nil, status
	}
	return one.preempt(ctx, cs, minimum, m)
}

// preempt chooses the victims of the run, has them evicted and nominates the pod, or holds a
// node for it while it drains, or says why nothing is evicted.
func (r *run) preempt(ctx context.Context, cs fwk.CycleState, minimum quota.Amounts, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	pod, w := r.pod, r.work
	if result, status := r.refuseIfNothingEvictable(pod, w, minimum); status != nil {
		return result, status
	}
	m, status := r.setUpDryRuns(pod, w, minimum, m)
	if status != nil {
		return nil, status
	}
	if node, err := r.roomComing(ctx, cs, pod, m); err != nil {
		return nil, fwk.AsStatus(err)
	} else if node != "" {
		r.ledger.Nominate(pod.UID, node, time.Now())
		setup.EvictingFor(ctx, r.handle, pod)
		return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
			fwk.NewStatus(fwk.Success, fmt.Sprintf("reclaim: node %s has room for the pod once the pods on their way out are gone; nothing more is evicted", node))
	}
	if w.PodGroup != nil && !minimumEqual(minimum, r.need) {
		if why := r.planGang(ctx, pod, w, m); why != "" {
			return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: "+why)
		}
	}
	result, status := r.preemptSparingBudgets(ctx, cs, pod, m)
	if status.IsSuccess() && result != nil && result.NominatingInfo != nil {
		r.notePreemption(ctx, pod, w, result.NominatedNodeName)
	}
	if !status.IsSuccess() && (w.PodGroup == nil || minimumEqual(minimum, r.need)) {
		// A gang whose minimum needs more than this pod drains nothing: one member's hold would
		// keep room idle that the rest may never join.
		if node, option := r.drainTarget(); node != "" {
			r.ledger.Hold(pod.UID, node, time.Now())
			return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
				fwk.NewStatus(fwk.Success, "reclaim: "+drainMessage(node, option)+r.sparedJobsNote(klog.FromContext(ctx), &r.protected, []*corev1.Pod{pod}, time.Now()))
		}
	}
	msg := status.Message()
	if !status.IsSuccess() {
		msg += r.sparedJobsNote(klog.FromContext(ctx), &r.protected, []*corev1.Pod{pod}, time.Now())
	}
	if msg != "" {
		return result, fwk.NewStatus(status.Code(), "reclaim: "+msg)
	}
	return result, status
}

// startReclaim starts a run of reclaim for the pod: what it needs, and the queues' state with
// the rest of its gang's minimum asked for and the victims still going counted as gone. It
// returns the run and the minimum, or why the pod may evict nobody: it is above its group's
// minimum.
func (r *Reclaimer) startReclaim(pod *corev1.Pod, w Workload, st Queues, leaf *quota.Node, m fwk.NodeToStatusReader) (*run, quota.Amounts, *fwk.Status) {
	one := &run{Reclaimer: r, pod: pod, work: w, leaf: leaf, nodeStatus: m}
	one.elastic = r.isElastic(w)
	if one.elastic {
		return nil, nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the pod is above its group's minimum and only takes free capacity")
	}
	if r.minimumArranged(pod, w) {
		return nil, nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: the rest of pod group %s's minimum is placed or has room on its way; the pod is above the minimum and only takes free capacity", w.Group))
	}
	// Victims are chosen for this pod alone; the rest of a gang's minimum is checked in bulk
	// before anything is evicted.
	one.need = r.ledger.PodRequests(pod)
	minimum := r.plugin.NeedOf(pod, w)
	st = r.plugin.WithDemandFor(st, leaf.Name, minimum)
	// Victims of the last preemptions may not show as terminating yet (they are evicted after
	// their cycle): they are going, and count so.
	one.going = r.victimsGoing()
	st = one.withGoing(st)
	one.state = st
	one.belowShare = st.belowShare(leaf, one.need)
	one.lowestPrior = r.ledger.LowestPlacedPriority(leaf.Name)
	one.elasticInQueue = r.hasElasticPods(leaf.Name, w.Group)
	return one, minimum, nil
}

// refuseIfNothingEvictable refuses the pod, with the result that goes with the refusal, when
// nothing may be evicted for it, or not enough for the rest of its gang's minimum; nil if
// reclaim may go on.
func (r *run) refuseIfNothingEvictable(pod *corev1.Pod, w Workload, minimum quota.Amounts) (*fwk.PostFilterResult, *fwk.Status) {
	if !r.belowShare && corev1helpers.PodPriority(pod) <= r.lowestPrior && !r.elasticInQueue {
		if msg := r.lastPreemptionPending(pod); msg != "" {
			// Its victims are still going (terminating pods are not counted above): keep the
			// room for the pod, or a pod of lower priority takes it and the preemption was for
			// nothing.
			return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: "+msg)
		}
		// Nothing may be evicted for the pod. Drop a nomination it holds from an earlier
		// preemption: the scheduler would otherwise keep that room for it, and the room was meant
		// for the queue's share, which others of the queue have taken since.
		clear := &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}
		return clear, fwk.NewStatus(fwk.Unschedulable, nothingEvictable(r.leaf.Name))
	}
	evictable, victims := r.evictable()
	if victims == 0 {
		// Nothing in reach may be evicted: the dry run would try every candidate node for nothing
		// (for each member of a gang that cannot fit, one after another). A nomination the pod
		// holds is kept: the victims of its last preemption, terminating, are not counted here.
		return nil, fwk.NewStatus(fwk.Unschedulable, nothingEvictable(r.leaf.Name))
	}
	if w.PodGroup != nil && !minimumEqual(minimum, r.need) {
		if short := r.roomForMinimum(minimum, evictable); short != "" {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: evicting what may be evicted would not make room for the minimum of pod group %s (%s short); nothing is evicted", w.Group, short))
		}
	}
	return nil, nil
}

// setUpDryRuns sets up what the evaluator's dry runs read besides the run's queues: the
// nodes in reach, the PodDisruptionBudgets, and the pod's claims. It returns the nodes' statuses
// as the dry runs see them, or why nothing is evicted.
func (r *run) setUpDryRuns(pod *corev1.Pod, w Workload, minimum quota.Amounts, m fwk.NodeToStatusReader) (fwk.NodeToStatusReader, *fwk.Status) {
	// A topology gang reclaims in one domain only, the one its minimum can be made to fit.
	domain, why := r.reclaimDomain(w, minimum)
	if why != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: %s for the minimum of pod group %s; nothing is evicted", why, w.Group))
	}
	if domain != nil {
		m = inDomain{NodeToStatusReader: m, nodes: domain}
		r.nodeStatus = m
	}
	pdbs, err := r.pdbs.List(labels.Everything())
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	r.budgetsNow = r.budgets(pdbs, r.going)
	if r.devices, err = r.newDeviceFit(pod); err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: the pod's resource claims: %v", err))
	}
	if r.devices != nil {
		m = devicesMayFree{m}
		r.nodeStatus = m
	}
	return m, nil
}

// preemptSparingBudgets runs kube-scheduler's preemption evaluator for the pod, with the dry
// runs' victims and drainable nodes of an earlier pass forgotten.
// Budgets are broken only when nothing else makes room, now or once the victims spared for a
// while (too young, patience) may go: upstream's preemption prefers the node of fewest
// violations, but a node whose respecting victims are spared offers none, and its
// neighbour's guarded pod would go at once. So a first pass takes no victim that breaks a
// budget; only if it finds none, and none that respects them was spared, a second does.
func (r *run) preemptSparingBudgets(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	evaluator := preemption.NewEvaluator(r.name, r.handle, r, r.executor)
	r.forgetDryRuns()
	r.patience = r.patienceFor([]*corev1.Pod{pod}, r.need, time.Now())
	r.avoidBreaking = len(r.budgetsNow) > 0
	r.skippedBreaking.Store(false)
	result, status := evaluator.Preempt(ctx, cs, pod, m)
	if r.skippedBreaking.Load() && !status.IsSuccess() && !r.protected.sparedRespecting() {
		r.avoidBreaking = false
		r.forgetDryRuns()
		result, status = evaluator.Preempt(ctx, cs, pod, m)
	}
	return result, status
}

// notePreemption records a preemption that nominated the pod to node: its victims are going,
// and count as reclaimed, and the nomination counts at once.
func (r *run) notePreemption(ctx context.Context, pod *corev1.Pod, w Workload, node string) {
	r.victimsMu.Lock()
	victims := r.dryRun[node]
	var pods []*corev1.Pod
	for _, u := range victims {
		for _, victim := range u.pods {
			r.inFlight[victim.UID] = time.Now()
			pods = append(pods, victim)
		}
	}
	r.noteLimitLifted(victims)
	r.victimsMu.Unlock()
	// Tried while its victims go, the pod would fail and build up backoff: it waits at
	// PreEnqueue until the last of them is gone, and is tried at once then.
	r.holdForVictims([]*corev1.Pod{pod}, pods)
	r.countReclaims(victims, gangNeed(r.need, w.PodGroup), time.Now())
	// The nomination reaches the informer only after the scheduler writes it: count it at
	// once, so the next preemptor of the queue does not make room a second time.
	r.ledger.Nominate(pod.UID, node, time.Now())
	// TephraGang lets the pod's group go on: its other members need evictions of their own.
	setup.EvictingFor(ctx, r.handle, pod)
}

func minimumEqual(a, b quota.Amounts) bool {
	for name, v := range a {
		if b[name] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// isElastic says whether a pod is above its group's minimum: the group has its minimum placed.
func (r *Reclaimer) isElastic(w Workload) bool {
	if w.PodGroup == nil {
		return false
	}
	_, placed := r.ledger.GroupPlacement(w.Group)
	return placed >= int(w.PodGroup.Spec.MinMember)
}

// hasElasticPods says whether a queue runs pods above their group's minimum, other than group
// skip's: a member of a minimum may preempt them whatever their priority's equality.
func (r *Reclaimer) hasElasticPods(queue, skip string) bool {
	for group, count := range r.ledger.GroupCounts(queue) {
		if group == skip {
			continue
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(group)
		if pg, err := r.podGroups.PodGroups(ns).Get(name); err == nil && count > int(pg.Spec.MinMember) {
			return true
		}
	}
	return false
}

// roomForMinimum checks, before anything is evicted, that the free capacity plus what may be
// evicted covers the rest of the gang's minimum, in total per resource ("" if it does, else what
// is short). Victims are then chosen pod by pod as the members are tried.
func (r *Reclaimer) roomForMinimum(minimum, evictable quota.Amounts) string {
	room := quota.Amounts{}
	infos, _ := r.handle.SnapshotSharedLister().NodeInfos().List()
	for _, info := range infos {
		for name := range minimum {
			a, u := capacity.Of(info, name)
			room[name] += max(a-u, 0)
		}
	}
	room.Add(evictable)
	var short []string
	for _, name := range minimum.Names() {
		if minimum[name] > room[name] {
			short = append(short, fmt.Sprintf("%s %s", name, quota.Format(name, minimum[name]-room[name])))
		}
	}
	return strings.Join(short, ", ")
}

// evictable sums what the preemptor may evict: from other queues, what each reclaimable queue
// holds above its deserved share and guarantee; from its own queue, the pods of lower priority
// and the pods above their gang's minimum. victims is 0 when nothing may be evicted (else a
// lower bound of how many pods may be): an upper bound of what SelectVictimsOnNode may choose.
func (r *run) evictable() (out quota.Amounts, victims int) {
	out = quota.Amounts{}
	if r.belowShare {
		for _, n := range r.state.Tree.Nodes() {
			if !n.Leaf() || n.Name == r.leaf.Name || !n.Reclaimable {
				continue
			}
			alloc := r.state.View.Allocated[n.Name].Clone()
			alloc.Sub(r.state.View.Terminating[n.Name])
			over := false
			for name, v := range alloc {
				floor := max(r.state.Deserved[n.Name][name], n.Guarantee[name])
				out[name] += max(v-floor, 0)
				over = over || v > floor
			}
			if over {
				victims++
			}
		}
	}
	priority := corev1helpers.PodPriority(r.pod)
	elasticLeft := map[string]int{}
	for group, count := range r.ledger.GroupCounts(r.leaf.Name) {
		ns, name, _ := cache.SplitMetaNamespaceKey(group)
		if pg, err := r.podGroups.PodGroups(ns).Get(name); err == nil && group != r.work.Group {
			elasticLeft[group] = count - int(pg.Spec.MinMember)
		}
	}
	for _, e := range r.ledger.PlacedIn(r.leaf.Name) {
		if e.Terminating || (e.Group != "" && e.Group == r.work.Group) {
			continue
		}
		switch {
		case e.Priority < priority:
			out.Add(e.Requests)
			victims++
		case e.Group != "" && elasticLeft[e.Group] > 0 && e.Priority <= priority:
			elasticLeft[e.Group]--
			out.Add(e.Requests)
			victims++
		}
	}
	return out, victims
}
