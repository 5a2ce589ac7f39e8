package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Victim kinds, for events and metrics.
const (
	kindReclaim = "reclaim"
	kindPreempt = "preempt"
)

// reclaimer is what reclaim keeps from one preemption to the next: the executor that evicts
// victims after their cycle, the victims on their way out, and the gangs reclaim could not make
// room for. Each PostFilter's choice of victims is a reclaimRun of its own.
type reclaimer struct {
	q       *Queue
	members cache.Indexer
	// executor evicts the chosen victims asynchronously (the upstream evaluator's async mode):
	// the scheduling cycle never waits on the API. PreEnqueue holds the preemptor back until its
	// last victim is being deleted.
	executor  *preemption.Executor
	podLister corelisters.PodLister
	pdbs      policylisters.PodDisruptionBudgetLister
	// victimsMu guards inFlight, the victims of recent preemptions, which are evicted after the
	// cycle (async) and may not show as terminating yet, and limitNotes; and a run's dryRun and
	// drainable, which its parallel dry runs fill.
	victimsMu sync.Mutex
	inFlight  map[types.UID]time.Time
	// limitNotes say, for the events of victims being evicted, that the patience limit let them
	// be reclaimed (patiencelimit.go).
	limitNotes map[types.UID]string
	// gangPlans keeps the gangs whose whole minimum reclaim could not make room for (gangroom.go).
	gangPlans gangPlanMemo
}

// reclaimRun chooses victims for one pod that fits no node, in one PostFilter: pods of queues
// above their deserved share (reclaim) and lower-priority pods of the pod's own queue (in-queue
// preemption). It is the preemption.Interface of that PostFilter's evaluator, which dry-runs
// candidate nodes in parallel, picks the one with the fewest victims, and has the reclaimer's
// executor evict them and nominate the node. Nothing of it outlives the PostFilter.
type reclaimRun struct {
	*reclaimer
	// The preemptor being decided for.
	pod         *corev1.Pod
	work        workload
	leaf        *quota.Node
	need        quota.Amounts
	state       state
	belowShare  bool
	lowestPrior int32
	nodeStatus  fwk.NodeToStatusReader
	// elastic: the preemptor is above its group's minimum (it evicts nobody). elasticInQueue:
	// its queue runs pods above their groups' minimums, which a minimum may preempt.
	elastic, elasticInQueue bool
	// budgetsNow are the PodDisruptionBudgets as this preemption sees them.
	budgetsNow []budget
	// devices checks the preemptor's claims in the dry runs (nil when it has none to allocate).
	devices *deviceFit
	// dryRun holds the victims SelectVictimsOnNode chose on each node (under victimsMu).
	dryRun map[string][]*unit
	// drainable are the nodes on which patience alone spares the victims that would make room
	// (drain.go), with TephraQueue's reclaimDrain (under victimsMu).
	drainable map[string]drainOption
	// going is the reclaimer's inFlight as this run sees it: its queues and budgets count them as
	// gone, and none is chosen again.
	going map[types.UID]bool
	// protected are the units this run spared as too young to reclaim (minruntime.go), or too
	// costly (reclaimcost.go).
	protected protection
	// patience is the preemptor's, for the dry runs, which each copy it.
	patience patience
	// avoidBreaking keeps the dry runs from victims that break a PodDisruptionBudget (the first
	// pass), and skippedBreaking says that one was left out for it.
	avoidBreaking   bool
	skippedBreaking atomic.Bool
}

// victimsGrace is how long a preemptor waits for the room its victims left before it may
// preempt again.
const victimsGrace = 10 * time.Second

func newReclaimer(q *Queue, handle fwk.Handle) (*reclaimer, error) {
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := setup.IndexPodsByGroup(podInformer); err != nil {
		return nil, err
	}
	factory := handle.SharedInformerFactory()
	r := &reclaimer{
		q: q, members: podInformer.GetIndexer(), podLister: factory.Core().V1().Pods().Lister(),
		pdbs: factory.Policy().V1().PodDisruptionBudgets().Lister(), inFlight: map[types.UID]time.Time{},
	}
	r.executor = preemption.NewExecutor(handle, feature.Features{EnableAsyncPreemption: true})
	r.executor.PreemptPod = func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *corev1.Pod, plugin string) (bool, error) {
		// A pod preemptor is its one pod (its Obj is a wrapper of it).
		var pod *corev1.Pod
		if pods := preemptor.Pods(); len(pods) == 1 {
			for _, p := range pods {
				pod = p
			}
		}
		if pod == nil {
			return false, fmt.Errorf("preemption for %s %s: only pods preempt in TephraQueue", preemptor.Type(), preemptor.UID())
		}
		evicted, err := r.evict(ctx, pod, victim, plugin, c.Victims().NumPDBViolations)
		if err != nil {
			q.victims.Gone(victim.UID) // it stays: the preemptor does not wait for it
		}
		return evicted, err
	}
	return r, nil
}

// evict removes a victim for a preemptor as kube-scheduler's own preemption does (a pod waiting
// at Permit or in PreBind is rejected in memory; a bound one gets a DisruptionTarget condition
// and is deleted), with one event that names the queue it made room for. It runs after the
// scheduling cycle (async), so it reads nothing the next cycle's PostFilter sets.
func (r *reclaimer) evict(ctx context.Context, pod, victim *corev1.Pod, plugin string, violating int64) (bool, error) {
	queue := r.q.queueNameOf(pod)
	if waiting := r.q.handle.GetWaitingPod(victim.UID); waiting != nil && waiting.Preempt(plugin, "preempted") {
		r.evicted(pod, queue, victim, "")
		return true, nil
	}
	if binding := r.q.handle.GetPodInPreBind(victim.UID); binding != nil && binding.CancelPod("preempted by "+plugin) {
		r.evicted(pod, queue, victim, "")
		return true, nil
	}
	condition := &corev1.PodCondition{
		Type:    corev1.DisruptionTarget,
		Status:  corev1.ConditionTrue,
		Reason:  corev1.PodReasonPreemptionByScheduler,
		Message: fmt.Sprintf("%s: making room in queue %q for pod %s/%s", pod.Spec.SchedulerName, queue, pod.Namespace, pod.Name),
	}
	status := victim.Status.DeepCopy()
	if apipod.UpdatePodCondition(status, condition) {
		if err := schedutil.PatchPodStatus(ctx, r.q.handle.ClientSet(), victim.Name, victim.Namespace, &victim.Status, status); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
	}
	if err := schedutil.DeletePod(ctx, r.q.handle.ClientSet(), victim); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	r.evicted(pod, queue, victim, r.budgetNote(victim, violating))
	return false, nil
}

// victimsGoing returns the victims of recent preemptions, forgetting those whose eviction has
// long had time to show.
func (r *reclaimer) victimsGoing() map[types.UID]bool {
	r.victimsMu.Lock()
	defer r.victimsMu.Unlock()
	going := make(map[types.UID]bool, len(r.inFlight))
	for uid, at := range r.inFlight {
		if time.Since(at) > victimsGrace {
			delete(r.inFlight, uid)
			delete(r.limitNotes, uid)
			continue
		}
		going[uid] = true
	}
	return going
}

// withGoing counts the victims going that the ledger still shows placed and not terminating as
// terminating in their queues.
func (r *reclaimRun) withGoing(st state) state {
	if len(r.going) == 0 {
		return st
	}
	st.view.Terminating = ledger.CloneSums(st.view.Terminating)
	for uid := range r.going {
		if e, ok := r.q.ledger.Entry(uid); ok && e.Placed() && !e.Terminating && e.Queue != "" {
			ledger.AddSigned(st.view.Terminating, e.Queue, e.Requests, 1)
		}
	}
	return st
}

// forgetDryRuns clears the victims and drainable nodes the dry runs found, for a new pass.
func (r *reclaimRun) forgetDryRuns() {
	r.victimsMu.Lock()
	r.dryRun, r.drainable = map[string][]*unit{}, map[string]drainOption{}
	r.victimsMu.Unlock()
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
func (r *reclaimRun) PodEligibleToPreemptOthers(_ context.Context, pod *corev1.Pod, nominatedStatus *fwk.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, "the pod's preemptionPolicy is Never"
	}
	if !r.belowShare && corev1helpers.PodPriority(pod) <= r.lowestPrior && !r.elasticInQueue {
		return false, fmt.Sprintf("queue %q is at its deserved share and holds no pod of lower priority", r.leaf.Name)
	}
	if msg := r.lastPreemptionPending(pod); msg != "" {
		return false, msg
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

// lastPreemptionPending says why the pod's last preemption may still be taking effect ("" if
// not): the victims may be gone from the API before the scheduler's cache shows their room, so
// the pod is given a moment rather than evict a second time or give up its nomination.
func (r *reclaimRun) lastPreemptionPending(pod *corev1.Pod) string {
	e, ok := r.q.ledger.Entry(pod.UID)
	if !ok || e.Holding || e.NominatedAt.IsZero() || time.Since(e.NominatedAt) >= victimsGrace {
		return ""
	}
	if r.nodeStatus != nil && r.nodeStatus.Get(e.NominatedNode).Code() == fwk.UnschedulableAndUnresolvable {
		return "" // the nominated node can no longer take the pod at all
	}
	return fmt.Sprintf("the pod's last preemption, %v ago, is still taking effect", time.Since(e.NominatedAt).Round(time.Millisecond))
}

// OrderedScoreFuncs prefers the node whose victims break the fewest PodDisruptionBudgets, then
// with the fewest victims, then with the least important, then the node whose victims lose least:
// the fewest that are not elastic pods (pods above their gang's minimum, whose job runs on), then
// the least run time thrown away (the victims started last). SelectVictimsOnNode orders a node's
// pods the same way; without the last two the scheduler would choose among equal nodes at random,
// and an old job or a gang's minimum would go where an elastic pod or a young job could.
func (r *reclaimRun) OrderedScoreFuncs(_ context.Context, victims map[string]*extenderv1.Victims) []func(string) int64 {
	now := time.Now()
	lost := make(map[string]lostWork, len(victims))
	for node, v := range victims {
		lost[node] = r.lostOnEviction(v.Pods, now)
	}
	return []func(string) int64{
		func(node string) int64 { return -victims[node].NumPDBViolations },
		func(node string) int64 { return -int64(len(victims[node].Pods)) },
		func(node string) int64 {
			highest := int64(-1 << 31)
			for _, p := range victims[node].Pods {
				highest = max(highest, int64(corev1helpers.PodPriority(p)))
			}
			return -highest
		},
		func(node string) int64 { return -lost[node].notElastic },
		func(node string) int64 { return -lost[node].ran.Milliseconds() },
	}
}

// lostWork is what evicting a node's victims throws away: how many of them are not elastic, and
// how long those had run.
type lostWork struct {
	notElastic int64
	ran        time.Duration
}

// lostOnEviction counts the victims that are not elastic (a group's pods above its minimum, as
// many as it has spare) and sums how long they have run.
func (r *reclaimRun) lostOnEviction(pods []*corev1.Pod, now time.Time) lostWork {
	var out lostWork
	spare := map[string]int{}
	for _, pod := range pods {
		if e, ok := r.q.ledger.Entry(pod.UID); ok && e.Group != "" {
			if _, counted := spare[e.Group]; !counted {
				elastic, n, _, _ := r.gangUnit(e.Group)
				spare[e.Group] = 0
				if elastic {
					spare[e.Group] = n
				}
			}
			if spare[e.Group] > 0 {
				spare[e.Group]--
				continue
			}
		}
		out.notElastic++
		if pod.Status.StartTime != nil {
			out.ran += now.Sub(pod.Status.StartTime.Time)
		}
	}
	return out
}

// evicted records a victim evicted for a pod of a queue: an event naming the queue that took its
// place (and the budgets it breaks, if it must), and the metric.
func (r *reclaimer) evicted(pod *corev1.Pod, queue string, victim *corev1.Pod, note string) {
	e, _ := r.q.ledger.Entry(victim.UID)
	kind := kindPreempt
	if e.Queue != queue {
		kind = kindReclaim
	}
	evictions.WithLabelValues(kind, e.Queue, queue).Inc()
	reason, msg := "Preempted", fmt.Sprintf("Preempted by pod %s/%s of higher priority in queue %q", pod.Namespace, pod.Name, queue)
	if kind == kindReclaim {
		reason = "Reclaimed"
		msg = fmt.Sprintf("Reclaimed by queue %q for pod %s/%s: queue %q used more than its deserved share", queue, pod.Namespace, pod.Name, e.Queue)
	}
	r.q.handle.EventRecorder().Eventf(victim, pod, corev1.EventTypeWarning, reason, "Evicting", msg+note+r.limitNote(victim.UID))
}

var _ preemption.Interface = &reclaimRun{}
