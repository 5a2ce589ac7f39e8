package queue

// What a queue admits. A decision reads one state (the tree, the ledger's sums, the deserved
// shares) and admits a pod's need into its leaf queue only within the capability of the queue and
// of every ancestor, and, while other queues wait, within the queue's deserved share, unless the
// room the share keeps free could be used by no other queue's waiting workload (othersCouldUse).

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/queueorder"
)

// state is what one decision reads: the tree, the ledger's sums, and the deserved shares.
type state struct {
	tree     *quota.Tree
	view     ledger.View
	deserved map[string]quota.Amounts
	// pendingFits returns a queue's pending workload that fits in room and on the nodes as
	// placeable says (ledger), for the rule that keeps idle capacity from being held for queues
	// that could not use it; placeable (nil: any) reads the scheduler's snapshot (placeable.go).
	pendingFits func(queue string, room quota.Amounts, placeable func(e *ledger.Entry, count int) bool) ledger.Waiting
	placeable   func() func(e *ledger.Entry, count int) bool
}

// verdict is a decision on a need: why it cannot be admitted ("" if it can), and, for a refusal
// by share outside preemption, the other queue's workload that the room is kept for.
type verdict struct {
	msg         string
	reason      string
	yieldsTo    ledger.Waiting
	yieldsQueue string
}

// snapshot reads the tree and the ledger, computing deserved shares only when either changed
// (once for every profile: the cache is the scheduler's, with the ledger).
func (q *Queue) snapshot() state {
	tree := q.currentTree()
	v := q.ledger.View()
	// A closed queue's pending pods cannot be admitted: as demand, or as queues that wait,
	// they would hold a share of the cluster that nobody uses.
	for queue := range v.Pending {
		if !tree.Admits(queue) {
			delete(v.Pending, queue)
		}
	}
	return state{tree: tree, view: v, deserved: q.accounts.shares.deserved(tree, v), pendingFits: q.pendingFitsInQueueOrder, placeable: q.placeableOnNodes}
}

// pendingFitsInQueueOrder is the ledger's pendingFits, trying the workloads as TephraGang orders
// them when the profile has it; the ranker is looked up only here, when a refusal by share needs
// it, not on every decision.
func (q *Queue) pendingFitsInQueueOrder(queue string, room quota.Amounts, placeable func(e *ledger.Entry, count int) bool) ledger.Waiting {
	ranker := queueorder.Of(q.handle)
	if ranker == nil {
		return q.ledger.PendingFits(queue, room, placeable)
	}
	return ledger.PendingFitsInOrder(q.ledger, queue, room, placeable, q.rankBy(ranker))
}

// rankBy ranks the ledger's waiting pods as ranker (TephraGang's order of the active queue) does;
// a pod the informer no longer shows ranks first, as it would leave the queue at once.
func (q *Queue) rankBy(ranker queueorder.Ranker) func(e *ledger.Entry) queueorder.Rank {
	pods := q.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	return func(e *ledger.Entry) queueorder.Rank {
		pod, err := pods.Pods(e.Namespace).Get(e.Name)
		if err != nil {
			return queueorder.Rank{}
		}
		return ranker.Rank(pod)
	}
}

// snapshotFor is snapshot as the pod sees it: a pod nominated by an earlier preemption does not
// compete with its own nomination.
func (q *Queue) snapshotFor(pod *corev1.Pod) state {
	s := q.snapshot()
	if e, ok := q.ledger.Entry(pod.UID); ok && e.Nominated && !e.Placed() && s.view.Nominated[e.Queue] != nil {
		// The nominated sums leave out the claims pods name directly (the ledger's account).
		own := e.Requests.Clone()
		own.Sub(e.Direct)
		s.view.Nominated[e.Queue].Sub(own)
	}
	return s
}

// withDemandFor makes sure the leaf's demand covers what is being admitted: the ledger may not
// have seen every member of a gang yet, and a queue must not seem to deserve less than the
// minimum it is asked to admit only because its pods were counted late.
func (s state) withDemandFor(leaf string, need quota.Amounts) state {
	demand := s.view.Allocated[leaf].Clone()
	demand.Add(s.view.Pending[leaf])
	short := quota.Amounts{}
	for name, v := range need {
		if want := s.view.Allocated[leaf][name] + v; want > demand[name] {
			short[name] = want - demand[name]
		}
	}
	if len(short) == 0 {
		return s
	}
	s.view.Pending = ledger.CloneSums(s.view.Pending)
	if s.view.Pending[leaf] == nil {
		s.view.Pending[leaf] = quota.Amounts{}
	}
	s.view.Pending[leaf].Add(short)
	s.deserved = quota.Deserved(s.tree, s.view.Total, demandOf(s.view))
	return s
}

// demandOf is each leaf's demand: what it has placed and what waits.
func demandOf(v ledger.View) map[string]quota.Amounts {
	demand := make(map[string]quota.Amounts, len(v.Allocated)+len(v.Pending))
	for queue, a := range v.Allocated {
		demand[queue] = a.Clone()
	}
	for queue, p := range v.Pending {
		if demand[queue] == nil {
			demand[queue] = quota.Amounts{}
		}
		demand[queue].Add(p)
	}
	return demand
}

// admit says why need cannot be admitted into leaf ("" if it can): decide's message.
func (s state) admit(leaf *quota.Node, need quota.Amounts, freed map[string]quota.Amounts, withNominated bool) string {
	return s.decide(leaf, need, freed, withNominated).msg
}

// decide decides whether need can be admitted into leaf. freed is what victims would give back,
// by leaf queue (nil outside preemption). withNominated counts the queue's pods that wait for
// victims to go: a preemption must not make room beyond the queue's share for them and the
// preemptor together; placing a pod, though, must not wait on them, or several nominated pods of
// one queue could hold each other back forever.
func (s state) decide(leaf *quota.Node, need quota.Amounts, freed map[string]quota.Amounts, withNominated bool) verdict {
	for _, n := range leaf.Ancestry() {
		if n.Capability == nil {
			continue
		}
		used := s.usedUnder(n, freed)
		used.Add(relevant(need, n.Capability))
		if over := used.Exceeding(n.Capability); over != "" {
			return verdict{reason: v1alpha1.ReasonQueueCapability, msg: fmt.Sprintf("%s: queue %q would exceed its capability (%s)", v1alpha1.ReasonQueueCapability, n.Name, over)}
		}
	}
	// The deserved share bounds a queue only in the resources the pod asks for and the cluster
	// has; a share is already capped at the queue's demand, so when nobody else waits, a queue
	// deserves all it asks for and borrows freely.
	if !s.othersWait(leaf.Name, need) {
		return verdict{}
	}
	used := s.view.Allocated[leaf.Name].Clone()
	if withNominated {
		used.Add(s.view.Nominated[leaf.Name])
	}
	used.Sub(freed[leaf.Name])
	deserved := s.deserved[leaf.Name]
	var over []string
	for _, name := range need.Names() {
		if need[name] <= 0 || s.view.Total[name] <= 0 {
			continue
		}
		if used[name]+need[name] > deserved[name] {
			over = append(over, fmt.Sprintf("%s %s of %s deserved", name, quota.Format(name, used[name]+need[name]), quota.Format(name, deserved[name])))
		}
	}
	if len(over) == 0 {
		return verdict{}
	}
	v := verdict{reason: v1alpha1.ReasonQueueOverShare, msg: fmt.Sprintf("%s: queue %q would use more than its deserved share while other queues wait (%s)", v1alpha1.ReasonQueueOverShare, leaf.Name, joinComma(over))}
	if freed != nil || withNominated {
		return v
	}
	v.yieldsTo, v.yieldsQueue = s.othersCouldUse(leaf.Name, need)
	switch {
	case v.yieldsQueue != "":
		v.msg += fmt.Sprintf("; it yields to %s of queue %q, which could use the room", v.yieldsTo.Name, v.yieldsQueue)
	case v.yieldsTo.Name != "":
		v.msg += "; it yields to " + v.yieldsTo.Name
	default:
		return verdict{}
	}
	return v
}

// othersCouldUse returns another queue's waiting workload, for a resource of need, whose next
// step fits in what is left of its queue's deserved share and on the nodes' free capacity, and
// that queue ("" if there is none). A queue over its share is held back only
// for such a workload: when each waiting queue's next workload is larger than what its share has
// left (gangs of 64 GPUs in three queues of 128 GPUs, each deserving 42), holding every queue to
// its share would leave the cluster idle for good (make replay found it); and when it fits in its
// share but not on the nodes as they are (its members need whole nodes, and the free GPUs are
// scattered), the hold keeps GPUs idle that it cannot use either. Then the workload goes, beyond
// its share; it is placed, never preempted for (reclaim keeps the strict rule, with freed or
// nominated pods, so that no queue reclaims back what another just took this way), and it may be
// reclaimed like any pod of a queue above its share.
func (s state) othersCouldUse(leaf string, need quota.Amounts) (ledger.Waiting, string) {
	if s.pendingFits == nil {
		return ledger.Waiting{Name: "another queue's workload"}, ""
	}
	var placeable func(e *ledger.Entry, count int) bool
	if s.placeable != nil {
		placeable = s.placeable()
	}
	for queue, pending := range s.view.Pending {
		if queue == leaf || !asksFor(pending, need) {
			continue
		}
		// What the queue holds for good: its terminating pods' room comes back to it, and the room
		// its preemptions freed is held for the pods nominated to it.
		room := quota.Amounts{}
		for name, v := range s.deserved[queue] {
			held := s.view.Allocated[queue][name] - s.view.Terminating[queue][name] + s.view.Nominated[queue][name]
			room[name] = max(v-held, 0)
		}
		if w := s.pendingFits(queue, room, placeable); w.Name != "" {
			return w, queue
		}
	}
	return ledger.Waiting{}, ""
}

// asksFor says whether pending asks for a resource of need.
func asksFor(pending, need quota.Amounts) bool {
	for name, v := range pending {
		if v > 0 && need[name] > 0 {
			return true
		}
	}
	return false
}

// othersWait says whether another queue has pending pods that ask for a resource of need: only
// then does the deserved share bound the queue. Alone, a queue may take anything that is free,
// even beyond the cluster's total, which the nodes' own filters then refuse.
func (s state) othersWait(leaf string, need quota.Amounts) bool {
	for queue, pending := range s.view.Pending {
		if queue != leaf && asksFor(pending, need) {
			return true
		}
	}
	return false
}

// usedUnder sums the allocation of every leaf under n, less what victims free.
func (s state) usedUnder(n *quota.Node, freed map[string]quota.Amounts) quota.Amounts {
	used := quota.Amounts{}
	var walk func(*quota.Node)
	walk = func(n *quota.Node) {
		if n.Leaf() {
			used.Add(s.view.Allocated[n.Name])
			used.Sub(freed[n.Name])
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(n)
	return used
}

// relevant keeps the resources of need that limit names.
func relevant(need, limit quota.Amounts) quota.Amounts {
	out := quota.Amounts{}
	for name, v := range need {
		if _, ok := limit[name]; ok {
			out[name] = v
		}
	}
	return out
}

func joinComma(parts []string) string { return strings.Join(parts, ", ") }
