package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
	"github.com/tephra-dev/tephra/plugins/queue/quota"
)

// gangPlugin is TephraGang's name: a pod it rejected before any node was tried (its group is
// backing off, or its minimum does not fit) is not a reason to evict anybody.
const gangPlugin = "TephraGang"

// Victim kinds, for events and metrics.
const (
	kindReclaim = "reclaim"
	kindPreempt = "preempt"
)

// reclaimer chooses victims for a pod that fits no node: pods of queues above their deserved
// share (reclaim) and lower-priority pods of the pod's own queue (in-queue preemption). It plugs
// into kube-scheduler's preemption evaluator, which dry-runs candidate nodes, picks the one with
// the fewest victims, evicts them and nominates the node.
type reclaimer struct {
	q       *Queue
	members cache.Indexer
	// The preemptor being decided for: set by PostFilter, which runs one at a time, and read by
	// the evaluator's parallel dry runs.
	pod         *corev1.Pod
	work        workload
	leaf        *quota.Node
	need        quota.Amounts
	state       state
	belowShare  bool
	lowestPrior int32
	nodeStatus  fwk.NodeToStatusReader
}

// victimsGrace is how long a preemptor waits for the room its victims left before it may
// preempt again.
const victimsGrace = 10 * time.Second

func newEvaluator(q *Queue, handle fwk.Handle) (*preemption.Evaluator, *reclaimer, error) {
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := setup.IndexPodsByGroup(podInformer); err != nil {
		return nil, nil, err
	}
	r := &reclaimer{q: q, members: podInformer.GetIndexer()}
	executor := preemption.NewExecutor(handle, feature.Features{})
	evict := executor.PreemptPod
	executor.PreemptPod = func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *corev1.Pod, plugin string) (bool, error) {
		inMemory, err := evict(ctx, c, preemptor, victim, plugin)
		if err == nil {
			r.evicted(victim)
		}
		return inMemory, err
	}
	return preemption.NewEvaluator(Name, handle, r, executor), r, nil
}

// PostFilter reclaims or preempts for a pod that fits no node.
func (q *Queue) PostFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if s := m.Get(""); s != nil && s.Plugin() == gangPlugin {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// Unschedulable rather than UnschedulableAndUnresolvable when evicting cannot help, so that
	// TephraGang's PostFilter still runs after this one.
	w, status := q.workloadOf(pod)
	if status != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, status.Message())
	}
	st := q.snapshotFor(pod)
	leaf, why := st.tree.WorkloadQueue(w.queue)
	if why != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, why)
	}
	r := q.reclaimer
	r.pod, r.work, r.leaf, r.state, r.nodeStatus = pod, w, leaf, st, m
	r.need = q.needOf(pod, w)
	st = st.withDemandFor(leaf.Name, r.need)
	r.state = st
	r.belowShare = st.belowShare(leaf, r.need)
	r.lowestPrior = q.lowestPlacedPriority(leaf.Name)
	if !r.belowShare && corev1helpers.PodPriority(pod) <= r.lowestPrior {
		// Nothing may be evicted for the pod. Drop a nomination it holds from an earlier
		// preemption: the scheduler would otherwise keep that room for it, and the room was meant
		// for the queue's share, which others of the queue have taken since.
		clear := &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}
		return clear, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: queue %q is at its deserved share and holds no pod of lower priority", leaf.Name))
	}
	result, status := q.evaluator.Preempt(ctx, cs, pod, m)
	if status.IsSuccess() && result != nil && result.NominatingInfo != nil {
		// The nomination reaches the informer only after the scheduler writes it: count it at
		// once, so the next preemptor of the queue does not make room a second time.
		q.ledger.nominate(pod.UID, result.NominatingInfo.NominatedNodeName, time.Now())
	}
	if msg := status.Message(); msg != "" {
		return result, fwk.NewStatus(status.Code(), "reclaim: "+msg)
	}
	return result, status
}

// belowShare says whether the leaf may take need without passing its deserved share, so that it
// may reclaim from queues above theirs.
func (s state) belowShare(leaf *quota.Node, need quota.Amounts) bool {
	used := s.view.allocated[leaf.Name].Clone()
	used.Add(s.view.nominated[leaf.Name])
	for name, v := range need {
		if v > 0 && s.view.total[name] > 0 && used[name]+v > s.deserved[leaf.Name][name] {
			return false
		}
	}
	return true
}

func (q *Queue) lowestPlacedPriority(queue string) int32 {
	q.ledger.mu.RLock()
	defer q.ledger.mu.RUnlock()
	lowest := int32(1<<31 - 1)
	for _, e := range q.ledger.pods {
		if e.queue == queue && e.placed() && !e.terminating {
			lowest = min(lowest, e.priority)
		}
	}
	return lowest
}

// GetOffsetAndNumCandidates dry-runs a random tenth of the nodes, at least 100.
func (r *reclaimer) GetOffsetAndNumCandidates(nodes int32) (int32, int32) {
	return rand.Int32N(max(nodes, 1)), min(nodes, max(100, nodes/10))
}

// CandidatesToVictimsMap maps each candidate node to its victims.
func (r *reclaimer) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	m := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		m[c.Name()] = c.Victims()
	}
	return m
}

// PodEligibleToPreemptOthers says whether evicting anybody could help the pod: it must be below
// its queue's deserved share (to reclaim) or outrank a pod of its own queue (to preempt), and it
// must not already be waiting for victims it evicted to go.
func (r *reclaimer) PodEligibleToPreemptOthers(_ context.Context, pod *corev1.Pod, nominatedStatus *fwk.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, "the pod's preemptionPolicy is Never"
	}
	if !r.belowShare && corev1helpers.PodPriority(pod) <= r.lowestPrior {
		return false, fmt.Sprintf("queue %q is at its deserved share and holds no pod of lower priority", r.leaf.Name)
	}
	// The victims of the pod's last preemption may be gone from the API before the scheduler's
	// cache shows their room: give the cache a moment rather than evict a second time.
	if e, ok := r.q.ledger.entry(pod.UID); ok && !e.nominatedAt.IsZero() && time.Since(e.nominatedAt) < victimsGrace {
		if r.nodeStatus == nil || r.nodeStatus.Get(e.nominatedNode).Code() != fwk.UnschedulableAndUnresolvable {
			return false, fmt.Sprintf("the pod's last preemption, %v ago, is still taking effect", time.Since(e.nominatedAt).Round(time.Millisecond))
		}
	}
	if node := pod.Status.NominatedNodeName; node != "" && nominatedStatus.Code() != fwk.UnschedulableAndUnresolvable {
		if info, _ := r.q.handle.SnapshotSharedLister().NodeInfos().Get(node); info != nil {
			for _, p := range info.GetPods() {
				if preemption.PodTerminatingByPreemption(p.GetPod()) {
					return false, "victims on the nominated node are still terminating"
				}
			}
		}
	}
	return true, ""
}

// OrderedScoreFuncs prefers the node with the fewest victims, then with the least important.
func (r *reclaimer) OrderedScoreFuncs(_ context.Context, victims map[string]*extenderv1.Victims) []func(string) int64 {
	return []func(string) int64{
		func(node string) int64 { return -int64(len(victims[node].Pods)) },
		func(node string) int64 {
			highest := int64(-1 << 31)
			for _, p := range victims[node].Pods {
				highest = max(highest, int64(corev1helpers.PodPriority(p)))
			}
			return -highest
		},
	}
}

// unit is what is evicted together: one pod, or a whole gang whose minimum would break.
type unit struct {
	pods     []*corev1.Pod
	queue    string
	kind     string
	priority int32
	elastic  bool
	started  int64
	freed    quota.Amounts
}

// SelectVictimsOnNode chooses the fewest victims on the node that make room for the preemptor,
// least important first: lowest priority, then elastic pods (above their gang's minimum), then
// the most recently started. A victim is allowed only when evicting it keeps its queue at or
// above its deserved share and its guarantee (reclaim), or it is a lower-priority pod of the
// preemptor's own queue (preemption). Then every victim that is not needed is spared.
func (r *reclaimer) SelectVictimsOnNode(ctx context.Context, cs fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo, possible []*preemption.DomainVictim, _ []*policy.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	units := r.units(nodeInfo, possible)
	if len(units) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no pod on the node may be reclaimed or preempted")
	}
	node := nodeInfo.Node().Name
	freed := map[string]quota.Amounts{}
	remove := func(u *unit, sign int64) *fwk.Status {
		for _, p := range u.pods {
			if p.Spec.NodeName != node {
				continue
			}
			if sign < 0 {
				if err := nodeInfo.RemovePod(klog.FromContext(ctx), p); err != nil {
					return fwk.AsStatus(err)
				}
				continue
			}
			info, err := r.q.handle.SnapshotSharedLister().NodeInfos().Get(node)
			if err != nil {
				return fwk.AsStatus(err)
			}
			for _, pi := range info.GetPods() {
				if pi.GetPod().UID == p.UID {
					nodeInfo.AddPodInfo(pi)
				}
			}
		}
		addSigned(freed, u.queue, u.freed, -sign)
		return nil
	}
	fits := func() bool {
		if r.state.admit(r.leaf, r.need, freed, true) != "" {
			return false
		}
		return r.q.handle.RunFilterPluginsWithNominatedPods(ctx, cs, preemptor, nodeInfo).IsSuccess()
	}
	var chosen []*unit
	for _, u := range units {
		if !r.allowed(u, freed) {
			continue
		}
		if s := remove(u, -1); s != nil {
			return nil, 0, s
		}
		chosen = append(chosen, u)
		if fits() {
			break
		}
	}
	if len(chosen) == 0 || !fits() {
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "evicting what may be evicted on the node does not make room")
	}
	// Spare the most important victims that are not needed after all.
	var victims []*unit
	for i := len(chosen) - 1; i >= 0; i-- {
		u := chosen[i]
		if s := remove(u, 1); s != nil {
			return nil, 0, s
		}
		if fits() {
			continue
		}
		if s := remove(u, -1); s != nil {
			return nil, 0, s
		}
		victims = append(victims, u)
	}
	var pods []*corev1.Pod
	for _, u := range victims {
		pods = append(pods, u.pods...)
	}
	return pods, 0, nil
}

// units turns the pods on the node into eviction units the preemptor may take, least important
// first.
func (r *reclaimer) units(nodeInfo fwk.NodeInfo, possible []*preemption.DomainVictim) []*unit {
	preemptorPriority := corev1helpers.PodPriority(r.pod)
	seenGroups := map[string]bool{}
	var units []*unit
	for _, dv := range possible {
		for _, pi := range dv.Pods() {
			pod := pi.GetPod()
			if pod.DeletionTimestamp != nil {
				continue
			}
			e, ok := r.q.ledger.entry(pod.UID)
			if !ok || e.queue == "" || (e.group != "" && e.group == r.work.group) {
				continue
			}
			kind := ""
			switch {
			case e.queue == r.leaf.Name && e.priority < preemptorPriority:
				kind = kindPreempt
			case e.queue != r.leaf.Name && r.belowShare && r.reclaimable(e.queue):
				kind = kindReclaim
			default:
				continue
			}
			u := &unit{pods: []*corev1.Pod{pod}, queue: e.queue, kind: kind, priority: e.priority, freed: e.requests.Clone()}
			if e.group != "" {
				elastic, members := r.gangUnit(e.group)
				if !elastic {
					if seenGroups[e.group] {
						continue
					}
					seenGroups[e.group] = true
					u.pods, u.freed = members, quota.Amounts{}
					for _, m := range members {
						u.freed.Add(podRequests(m))
					}
				}
				u.elastic = elastic
			}
			if pod.Status.StartTime != nil {
				u.started = pod.Status.StartTime.UnixNano()
			}
			units = append(units, u)
		}
	}
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i], units[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.elastic != b.elastic {
			return a.elastic
		}
		return a.started > b.started
	})
	return units
}

// gangUnit says whether a member of the group is elastic (the group runs more than its
// minimum), and otherwise returns all its bound members, which go together.
func (r *reclaimer) gangUnit(group string) (bool, []*corev1.Pod) {
	objs, _ := r.members.ByIndex(setup.PodGroupIndex, group)
	var bound []*corev1.Pod
	for _, obj := range objs {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil {
			bound = append(bound, pod)
		}
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(group)
	if pg, err := r.q.podGroups.PodGroups(ns).Get(name); err == nil && len(bound) > int(pg.Spec.MinMember) {
		return true, nil
	}
	return false, bound
}

// reclaimable says whether the queue lets others take back what it borrowed.
func (r *reclaimer) reclaimable(queue string) bool {
	n := r.state.tree.Get(queue)
	return n != nil && n.Reclaimable
}

// allowed says whether the unit may be evicted on top of what is freed already: a preempted pod
// always may; a reclaimed one only while its queue stays at or above its deserved share and its
// guarantee in every resource the preemptor needs that the queue uses beyond its share.
func (r *reclaimer) allowed(u *unit, freed map[string]quota.Amounts) bool {
	if u.kind == kindPreempt {
		return true
	}
	n := r.state.tree.Get(u.queue)
	if n == nil {
		return false
	}
	alloc := r.state.view.allocated[u.queue].Clone()
	alloc.Sub(r.state.view.terminating[u.queue])
	deserved := r.state.deserved[u.queue]
	overInNeeded := false
	for name, v := range r.need {
		if v <= 0 || u.freed[name] <= 0 {
			continue
		}
		if alloc[name] <= deserved[name] {
			continue // not over its share in this resource
		}
		overInNeeded = true
		left := alloc[name] - freed[u.queue][name] - u.freed[name]
		if left < deserved[name] || left < n.Guarantee[name] {
			return false
		}
	}
	return overInNeeded
}

// evicted records a victim the evaluator has evicted: an event naming the queue that took its
// place, and the metric.
func (r *reclaimer) evicted(victim *corev1.Pod) {
	e, _ := r.q.ledger.entry(victim.UID)
	kind := kindPreempt
	if e.queue != r.leaf.Name {
		kind = kindReclaim
	}
	evictions.WithLabelValues(kind, e.queue, r.leaf.Name).Inc()
	reason, msg := "Preempted", fmt.Sprintf("Preempted by pod %s/%s of higher priority in queue %q", r.pod.Namespace, r.pod.Name, r.leaf.Name)
	if kind == kindReclaim {
		reason = "Reclaimed"
		msg = fmt.Sprintf("Reclaimed by queue %q for pod %s/%s: queue %q used more than its deserved share", r.leaf.Name, r.pod.Namespace, r.pod.Name, e.queue)
	}
	r.q.handle.EventRecorder().Eventf(victim, r.pod, corev1.EventTypeWarning, reason, "Evicting", msg)
}

var _ preemption.Interface = &reclaimer{}
