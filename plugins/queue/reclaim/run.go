package reclaim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
)

// run chooses victims for one pod that fits no node, in one PostFilter: pods of queues
// above their deserved share (reclaim) and lower-priority pods of the pod's own queue (in-queue
// preemption). It is the preemption.Interface of that PostFilter's evaluator, which dry-runs
// candidate nodes in parallel, picks the one whose victims throw away the least work
// (OrderedScoreFuncs), and has the Reclaimer's executor evict them and nominate the node.
// Nothing of it outlives the PostFilter.
type run struct {
	*Reclaimer
	// The preemptor being decided for.
	pod         *corev1.Pod
	work        Workload
	leaf        *quota.Node
	need        quota.Amounts
	state       Queues
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
	// going is the Reclaimer's inFlight as this run sees it: its queues and budgets count them as
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

var _ preemption.Interface = &run{}

// victimsGrace is how long a preemptor waits for the room its victims left before it may
// preempt again.
const victimsGrace = 10 * time.Second

// withGoing counts the victims going that the ledger still shows placed and not terminating as
// terminating in their queues.
func (r *run) withGoing(st Queues) Queues {
	if len(r.going) == 0 {
		return st
	}
	st.View.Terminating = ledger.CloneSums(st.View.Terminating)
	for uid := range r.going {
		if e, ok := r.ledger.Entry(uid); ok && e.Placed() && !e.Terminating && e.Queue != "" {
			ledger.AddSigned(st.View.Terminating, e.Queue, e.Requests, 1)
		}
	}
	return st
}

// forgetDryRuns clears the victims and drainable nodes the dry runs found, for a new pass.
func (r *run) forgetDryRuns() {
	r.victimsMu.Lock()
	r.dryRun, r.drainable = map[string][]*unit{}, map[string]drainOption{}
	r.victimsMu.Unlock()
}

// GetOffsetAndNumCandidates dry-runs a random tenth of the nodes, at least 100.
func (r *run) GetOffsetAndNumCandidates(nodes int32) (int32, int32) {
	return rand.Int32N(max(nodes, 1)), min(nodes, max(100, nodes/10))
}

// CandidatesToVictimsMap maps each candidate node to its victims.
func (r *run) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	m := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		m[c.Name()] = c.Victims()
	}
	return m
}

// PodEligibleToPreemptOthers says whether evicting anybody could help the pod: it must be below
// its queue's deserved share (to reclaim) or outrank a pod of its own queue (to preempt), and it
// must not already be waiting for victims it evicted to go.
func (r *run) PodEligibleToPreemptOthers(_ context.Context, pod *corev1.Pod, nominatedStatus *fwk.Status) (bool, string) {
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
		if info, _ := r.handle.SnapshotSharedLister().NodeInfos().Get(node); info != nil {
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
func (r *run) lastPreemptionPending(pod *corev1.Pod) string {
	e, ok := r.ledger.Entry(pod.UID)
	if !ok || e.Holding || e.NominatedAt.IsZero() || time.Since(e.NominatedAt) >= victimsGrace {
		return ""
	}
	if r.nodeStatus != nil && r.nodeStatus.Get(e.NominatedNode).Code() == fwk.UnschedulableAndUnresolvable {
		return "" // the nominated node can no longer take the pod at all
	}
	return fmt.Sprintf("the pod's last preemption, %v ago, is still taking effect", time.Since(e.NominatedAt).Round(time.Millisecond))
}

// OrderedScoreFuncs prefers the node whose victims break the fewest PodDisruptionBudgets, then
// whose most important victim is the least important, then whose victims throw away the least
// work (their sizes times how long they have run; an elastic pod, above its gang's minimum,
// throws away nothing, as its job runs on), then with the fewest victims, then the fewest that
// are not elastic, then the least run time. Work comes before the count because a reclaim's cost
// is the work it throws away: one 8-GPU member of a gang of two that has run for hours goes with
// its sibling on another node, and costs more than eight 1-GPU jobs that started in the last
// hour. SelectVictimsOnNode orders a node's pods the same way; without the last ones
// the scheduler would choose among equal nodes at random.
func (r *run) OrderedScoreFuncs(_ context.Context, victims map[string]*extenderv1.Victims) []func(string) int64 {
	now := time.Now()
	lost := make(map[string]lostWork, len(victims))
	names := r.neededResources()
	for node, v := range victims {
		lost[node] = r.lostOnEviction(v.Pods, names, now)
	}
	return []func(string) int64{
		func(node string) int64 { return -victims[node].NumPDBViolations },
		func(node string) int64 {
			highest := int64(-1 << 31)
			for _, p := range victims[node].Pods {
				highest = max(highest, int64(corev1helpers.PodPriority(p)))
			}
			return -highest
		},
		func(node string) int64 { return -lost[node].work },
		func(node string) int64 { return -int64(len(victims[node].Pods)) },
		func(node string) int64 { return -lost[node].notElastic },
		func(node string) int64 { return -lost[node].ran.Milliseconds() },
	}
}

// lostWork is what evicting a node's victims throws away: the work of those that are not
// elastic (their dominant shares of the cluster, in the resources the preemptor asks for, times
// the seconds they have run, in millionths), how many they are, and how long they had run.
type lostWork struct {
	work       int64
	notElastic int64
	ran        time.Duration
}

// lostOnEviction counts the victims that are not elastic (a group's pods above its minimum, as
// many as it has spare), sums how long they have run, and weighs each run by the pod's size in
// the resources named.
func (r *run) lostOnEviction(pods []*corev1.Pod, names []corev1.ResourceName, now time.Time) lostWork {
	var out lostWork
	spare := map[string]int{}
	work := 0.0
	for _, pod := range pods {
		e, ok := r.ledger.Entry(pod.UID)
		if ok && e.Group != "" {
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
			ran := now.Sub(pod.Status.StartTime.Time)
			out.ran += ran
			if ok {
				work += sizeOf(e.Requests, r.state.View.Total, names) * ran.Seconds()
			}
		}
	}
	out.work = int64(work * 1e6)
	return out
}

// admit says why need cannot be admitted into leaf ("" if it can), in the run's state of the
// queues: the plugin's admission decides.
func (r *run) admit(leaf *quota.Node, need quota.Amounts, freed map[string]quota.Amounts, withNominated bool) string {
	return r.plugin.Admit(r.state, leaf, need, freed, withNominated)
}

// belowShare says whether the leaf may take need without passing its deserved share, so that it
// may reclaim from queues above theirs.
func (s Queues) belowShare(leaf *quota.Node, need quota.Amounts) bool {
	used := s.View.Allocated[leaf.Name].Clone()
	used.Add(s.View.Nominated[leaf.Name])
	for name, v := range need {
		if v > 0 && s.View.Total[name] > 0 && used[name]+v > s.Deserved[leaf.Name][name] {
			return false
		}
	}
	return true
}
