package queue

// A pod that its queue's state turns away waits without being tried. PreFilter refuses a pod that
// would take its queue past a capability, or past its deserved share while another queue's
// workload could use the room, and records a hold. From then on PreEnqueue keeps the pod out of
// the active queue, as kube-scheduler's gates do, for as long as the hold stands. Brought back to
// be refused again on every event of a busy cluster (a Queue's status written, any pod deleted),
// such pods would keep the scheduling queue busy, and the pods behind them would sit out their
// backoff beside room they may use.
//
// kube-scheduler runs PreEnqueue again for a held pod on every event TephraQueue registers and
// its hint passes (a pod bound into the queue the hold yields to, any placed pod deleted, a
// pending pod deleted, a Queue, PodGroup or node changed). The check there reads the state
// PreFilter reads, with two differences that keep it cheap under the scheduling queue's lock:
// while neither the ledger nor the queue tree changed, the hold stands as it was; and a share
// hold stands only for the workload it named, which must still wait and fit its queue's room
// (the nodes are not read: their snapshot is the scheduling cycle's). When the check fails, the
// pod goes to PreFilter, which decides in full and may record a new hold.
//
// A preemptor is held too, until the victims of its preemption are gone (plugins/internal/victimwait).

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
)

// hold is why a pod waits, and the state in which it was last found to stand.
type hold struct {
	verdict verdict
	version uint64
	tree    *quota.Tree
}

// heldPodSet holds the pods held by their queue's state, by UID.
type heldPodSet struct {
	mu    sync.Mutex
	byUID map[types.UID]hold
}

func (h *heldPodSet) record(uid types.UID, held hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byUID == nil {
		h.byUID = map[types.UID]hold{}
	}
	h.byUID[uid] = held
	heldPods.Set(float64(len(h.byUID)))
}

func (h *heldPodSet) get(uid types.UID) (hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	held, ok := h.byUID[uid]
	return held, ok
}

// forget drops a pod's hold: it was placed, deleted, or its hold no longer stands.
func (h *heldPodSet) forget(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.byUID[uid]; ok {
		delete(h.byUID, uid)
		heldPods.Set(float64(len(h.byUID)))
	}
}

// podDeleted is the pod informer's DeleteFunc.
func (h *heldPodSet) podDeleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		h.forget(pod.UID)
	}
}

// recordHold remembers a PreFilter refusal by the queue's state as a hold.
func (q *Queue) recordHold(pod *corev1.Pod, v verdict, s state) {
	if v.reason != "" {
		q.holds.record(pod.UID, hold{verdict: v, version: s.view.Version, tree: s.tree})
	}
}

// stillHeld returns why a held pod still waits ("" if it has no hold, or its hold no longer
// stands: PreFilter decides again).
func (q *Queue) stillHeld(pod *corev1.Pod, w workload) string {
	held, ok := q.holds.get(pod.UID)
	if !ok {
		return ""
	}
	if held.version == q.ledger.Version() && held.tree == q.currentTree() {
		return held.verdict.msg
	}
	s := q.snapshotFor(pod)
	leaf, why := s.tree.WorkloadQueue(w.Queue)
	if why != "" {
		q.holds.forget(pod.UID)
		return ""
	}
	need := q.needOf(pod, w)
	s = s.withDemandFor(leaf.Name, need)
	s.placeable = nil
	s.pendingFits = func(queue string, room quota.Amounts, _ func(*ledger.Entry, int) bool) ledger.Waiting {
		if queue == held.verdict.yieldsQueue && q.ledger.StillFits(held.verdict.yieldsTo, queue, room) {
			return held.verdict.yieldsTo
		}
		return ledger.Waiting{}
	}
	v := s.decide(leaf, need, nil, false)
	if v.reason == "" {
		q.holds.forget(pod.UID)
		return ""
	}
	q.holds.record(pod.UID, hold{verdict: v, version: s.view.Version, tree: s.tree})
	return v.msg
}

// releaseNomination clears the nomination of a pod its queue's state refused in this cycle and
// now holds: a preemption may have nominated it to the room its victims freed, which the
// scheduler keeps from every pod of no higher priority; held, it would keep that room from
// everyone (the queue it yields to included) for as long as it waits. It reclaims again, if its
// queue is owed, once its hold lifts.
func (q *Queue) releaseNomination(cs fwk.CycleState, pod *corev1.Pod) *fwk.PostFilterResult {
	if _, refused := admission.Refused(cs); !refused {
		return nil
	}
	if _, held := q.holds.get(pod.UID); !held {
		return nil
	}
	q.ledger.Unnominate(pod.UID)
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}
}

// isSchedulableAfterPodBound brings back a pod held for another queue's workload when a pod of
// that queue is bound: the workload may be the one placed, and its queue then waits no more.
// A bind adds to a queue's usage and to nobody's demand, so it never lifts another hold.
func (q *Queue) isSchedulableAfterPodBound(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	held, ok := q.holds.get(pod.UID)
	if !ok || held.verdict.yieldsQueue == "" {
		return fwk.QueueSkip, nil
	}
	bound, ok := newObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if e, known := q.ledger.Entry(bound.UID); known && e.Queue != held.verdict.yieldsQueue {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// victimOrPreemptorDeleted is the pod informer's DeleteFunc for the preemptors waiting for
// their victims: a victim is gone, or a waiting preemptor is.
func (q *Queue) victimOrPreemptorDeleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		q.victims.Gone(pod.UID)
		q.victims.Forget(pod.UID)
	}
}
