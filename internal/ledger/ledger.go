// Package ledger is the account of every queue: each pod that counts in a queue (charged by
// quota.ChargeOf), and the sums of those pods by queue and by PodGroup, kept as informer events
// (Feed) change them, one pod at a time. tephra-scheduler's TephraQueue keeps one, which
// Reserve/Unreserve change too, as the cache it decides from: it decides from copies of the sums
// (View) and asks the ledger which pending workloads a room would fit (PendingFits), and never
// walks the pods itself. tephra-controllers' Queue controller keeps one, which Queue status is
// written from.
package ledger

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Ledger is one account of every queue: requests placed (bound, or assumed by the scheduler
// between Reserve and bind) and pending, per leaf queue, and the cluster's total. Informer events
// (and in the scheduler Reserve/Unreserve) update it under one lock; scheduling cycles read it.
// Since cycles run one at a time and Reserve records a pod before the next cycle starts, no two
// cycles can both admit into the last free share of a queue.
type Ledger struct {
	mu   sync.RWMutex
	pods map[types.UID]*Entry
	// allocated, terminating, pending and nominated sum the entries by leaf queue.
	allocated, terminating, pending, nominated map[string]quota.Amounts
	// groupPlaced sums the placed requests of each PodGroup, and groupCount counts them.
	groupPlaced map[string]quota.Amounts
	groupCount  map[string]int
	// groupNominated counts each PodGroup's pending members nominated to the room their
	// preemption freed: that room is on its way to them.
	groupNominated map[string]int
	// groupPending sums the pending requests of each group by queue (they are in pending too),
	// and groupMembers counts each group's pods that can run (not terminating, not gated): a
	// group with fewer members than its minimum cannot run yet, and its pending pods are no
	// demand (View).
	groupPending map[string]map[string]quota.Amounts
	groupMembers map[string]int
	// short holds the groups with pending pods and fewer members than their minimum, which View
	// leaves out of the demand. It is kept as members come and go (and when a minimum changes,
	// MinimumChanged) so that View does not ask every pending group for its minimum on every
	// scheduling cycle: with 3750 pending gangs that was a quarter of the scheduler's CPU.
	short map[string]struct{}
	// MinMember returns a group's minimum (0 when unknown); nil counts every group's pending.
	// Set, as Devices is, before the ledger is first fed.
	MinMember func(group string) int
	// singles counts the pods without a PodGroup by queue, each a workload of its own.
	singles map[string]Singles
	// unresolved holds pods whose PodGroup was not known yet, by group.
	unresolved map[string]map[types.UID]*corev1.Pod
	// capacity is the cluster's total: the nodes' (SetNode) and the devices ResourceSlices offer
	// (SetDevices). Devices reads the claims pods are charged for (nil: pods are charged their
	// requests only).
	capacity quota.ClusterTotal
	Devices  quota.DeviceLookup
	// placedClaims and pendingClaims count, by queue and claim, the entries that name a claim
	// directly, with the charge counted for it: until the claim is reserved, every pod that
	// would use it is charged it (quota.ChargeDevices), and the queue must count it once.
	placedClaims, pendingClaims map[claimRef]*claimCount
	// gone holds the pods the scheduling queue saw deleted before the ledger's own handler of the
	// pod informer did (GoneBeforeHandler): a late update of such a pod, which the handler may
	// still bring, must not count it again. The handler's deletion clears the entry.
	gone map[types.UID]struct{}
	// version changes with every change, so derived values can be cached.
	version uint64
	// names are the scheduler names whose pods count (v1alpha1.CountsInQueues), replaced whole
	// when a profile is added so that Observe reads them without a lock or a copy.
	names atomic.Pointer[[]string]
}

// New returns an empty ledger in which the pods of the given scheduler names count.
func New(schedulerNames ...string) *Ledger {
	l := &Ledger{
		pods:           map[types.UID]*Entry{},
		allocated:      map[string]quota.Amounts{},
		terminating:    map[string]quota.Amounts{},
		pending:        map[string]quota.Amounts{},
		nominated:      map[string]quota.Amounts{},
		groupPlaced:    map[string]quota.Amounts{},
		groupCount:     map[string]int{},
		groupNominated: map[string]int{},
		groupPending:   map[string]map[string]quota.Amounts{},
		groupMembers:   map[string]int{},
		short:          map[string]struct{}{},
		singles:        map[string]Singles{},
		unresolved:     map[string]map[types.UID]*corev1.Pod{},
		placedClaims:   map[claimRef]*claimCount{},
		pendingClaims:  map[claimRef]*claimCount{},
		gone:           map[types.UID]struct{}{},
	}
	l.names.Store(&schedulerNames)
	return l
}

// Serve adds a scheduler name whose pods count; false if it counted already.
func (l *Ledger) Serve(schedulerName string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := *l.names.Load()
	if slices.Contains(names, schedulerName) {
		return false
	}
	names = append(slices.Clip(names), schedulerName)
	l.names.Store(&names)
	return true
}

// Counts says whether a pod counts in the queues.
func (l *Ledger) Counts(pod *corev1.Pod) bool {
	return v1alpha1.CountsInQueues(pod, *l.names.Load())
}

// Observe records a pod as the informer shows it. resolve returns the queue of a PodGroup
// ("" when it does not exist).
func (l *Ledger) Observe(pod *corev1.Pod, resolve func(namespace, group string) string) {
	l.record(pod, resolve, false)
}

// Refresh records a known pod again, whose charge may have changed (its claims did, or its
// group came, moved or went). Only the version the ledger holds is recorded again: a pod deleted
// meanwhile, or recorded since from a newer version (which read the groups and claims as they
// are now), is left as it is, and a pod not seen yet is left to the pods' informer.
func (l *Ledger) Refresh(pod *corev1.Pod, resolve func(namespace, group string) string) {
	l.record(pod, resolve, true)
}

func (l *Ledger) record(pod *corev1.Pod, resolve func(namespace, group string) string, refresh bool) {
	requests := quota.PodRequests(pod)
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.pods[pod.UID]
	if refresh && (old == nil || old.ResourceVersion != pod.ResourceVersion) {
		return
	}
	// Resolved under the lock: a group's handler, which records the group's pods again once the
	// group is in its informer's store (GroupAdded) or has moved (Refresh), waits for this record
	// to end, and this record reads the group as that store has it now. Resolved before the lock,
	// a record could undo what the group's handler did in between.
	c := quota.ChargeOf(pod, *l.names.Load(), func(namespace, group string) (string, bool) {
		q := resolve(namespace, group)
		return q, q != ""
	})
	if c.Standing == quota.Uncounted {
		if !refresh {
			l.forget(pod.UID, pod)
		}
		return
	}
	if _, gone := l.gone[pod.UID]; gone {
		return
	}
	e := &Entry{
		Queue:           c.Queue,
		Group:           c.Group,
		Carried:         c.Carried,
		Name:            pod.Name,
		ResourceVersion: pod.ResourceVersion,
		Priority:        corev1helpers.PodPriority(pod),
		Bound:           c.Standing == quota.Placed,
		Terminating:     c.Terminating,
		Nominated:       pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "",
		Gated:           c.Gated,
	}
	// Charged under the lock: the pod's informer and its claims' call Observe concurrently,
	// and the last to record must have read the newest claims.
	d := l.withDevices(pod, requests)
	e.Requests, e.Direct, e.Shared, e.Claims, e.Namespace = d.Requests, d.Direct, d.Shared, d.Claims, pod.Namespace
	if old != nil {
		e.Assumed = old.Assumed && !e.Bound
		if !e.Bound && !e.Nominated && !old.NominatedAt.IsZero() && time.Since(old.NominatedAt) < NominationGrace {
			e.Nominated = true
		}
		e.NominatedAt, e.NominatedNode, e.Holding = old.NominatedAt, old.NominatedNode, old.Holding
		l.account(old, -1)
		if old.Group != e.Group {
			l.setUnresolved(pod, old.Group, false) // it names another group now
		}
	}
	l.setUnresolved(pod, e.Group, e.Queue == "")
	l.pods[pod.UID] = e
	l.account(e, 1)
}

func (l *Ledger) setUnresolved(pod *corev1.Pod, group string, unresolved bool) {
	if group == "" {
		return
	}
	if !unresolved {
		if set := l.unresolved[group]; set != nil {
			delete(set, pod.UID)
			if len(set) == 0 {
				delete(l.unresolved, group)
			}
		}
		return
	}
	if l.unresolved[group] == nil {
		l.unresolved[group] = map[types.UID]*corev1.Pod{}
	}
	l.unresolved[group][pod.UID] = pod
}

// GroupAdded re-resolves the pods that named a PodGroup before it existed.
func (l *Ledger) GroupAdded(key string, resolve func(namespace, group string) string) {
	l.mu.RLock()
	pods := make([]*corev1.Pod, 0, len(l.unresolved[key]))
	for _, pod := range l.unresolved[key] {
		pods = append(pods, pod)
	}
	l.mu.RUnlock()
	for _, pod := range pods {
		l.Refresh(pod, resolve)
	}
}

// Forget drops a pod that ended or was deleted.
func (l *Ledger) Forget(uid types.UID, pod *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(uid, pod)
}

func (l *Ledger) forget(uid types.UID, pod *corev1.Pod) {
	delete(l.gone, uid)
	if old := l.pods[uid]; old != nil {
		l.account(old, -1)
		delete(l.pods, uid)
		if pod != nil {
			l.setUnresolved(pod, old.Group, false)
		}
	}
}

// GoneBeforeHandler drops a deleted pod that the scheduling queue learned of first (a queueing
// hint), and keeps it dropped until the ledger's own handler sees the deletion (forget). The two
// are handlers of one informer, called in no set order: a pod brought back by the deletion could
// otherwise be refused with its queue still charged for the deleted pod, and no event would be
// left to bring it back. Only a pod the informer showed bound is dropped: kube-scheduler sends the
// same event for a pod it assumed and forgot (its binding failed), which lives on.
func (l *Ledger) GoneBeforeHandler(pod *corev1.Pod) {
	// The hint asks once per pod TephraQueue refused: after the first, the pod is known no more.
	l.mu.RLock()
	old := l.pods[pod.UID]
	l.mu.RUnlock()
	if old == nil || !old.Bound {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.pods[pod.UID]; old != nil && old.Bound {
		l.account(old, -1)
		delete(l.pods, pod.UID)
		l.setUnresolved(pod, old.Group, false)
		l.gone[pod.UID] = struct{}{}
	}
}

// Assume records a pod reserved by this scheduler in the queue it was admitted to.
func (l *Ledger) Assume(pod *corev1.Pod, queue, group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[pod.UID]
	if e == nil {
		// A pod this scheduler reserves before the ledger saw it: no resolver here tells whether
		// an object of its group exists, and the pod's own word stands until it is observed.
		c := l.ChargeOf(pod)
		e = &Entry{Requests: c.Requests, Direct: c.Direct, Shared: c.Shared, Claims: c.Claims, Namespace: pod.Namespace, Name: pod.Name, Priority: corev1helpers.PodPriority(pod), Queue: queue, Group: group, Carried: v1alpha1.CarriesGroup(pod)}
	} else {
		l.account(e, -1)
		e = new(*e)
	}
	e.Assumed, e.Queue = true, queue
	l.pods[pod.UID] = e
	l.account(e, 1)
}

// Nominate counts a pod that PostFilter has just nominated as waiting for its victims.
func (l *Ledger) Nominate(uid types.UID, node string, now time.Time) {
	l.nominateFor(uid, node, now, false)
}

// Hold counts a pod nominated to a node that drains for it, evicting nobody
// (plugins/queue/reclaim/drain.go).
func (l *Ledger) Hold(uid types.UID, node string, now time.Time) {
	l.nominateFor(uid, node, now, true)
}

func (l *Ledger) nominateFor(uid types.UID, node string, now time.Time, holding bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || e.Placed() {
		return
	}
	l.account(e, -1)
	e = new(*e)
	e.Nominated, e.NominatedAt, e.NominatedNode, e.Holding = true, now, node, holding
	l.pods[uid] = e
	l.account(e, 1)
}

// Unnominate forgets a pod's nomination at once: the scheduler clears it (holds.go), and the
// grace that covers an informer behind a new nomination must not keep its room counted.
func (l *Ledger) Unnominate(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || !e.Nominated {
		return
	}
	l.account(e, -1)
	e = new(*e)
	e.Nominated, e.NominatedAt, e.NominatedNode, e.Holding = false, time.Time{}, "", false
	l.pods[uid] = e
	l.account(e, 1)
}

// Unassume undoes assume for a pod that will not bind.
func (l *Ledger) Unassume(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || !e.Assumed {
		return
	}
	l.account(e, -1)
	e = new(*e)
	e.Assumed = false
	l.pods[uid] = e
	l.account(e, 1)
}

// MinimumChanged records that a group's minimum changed: whether its pending pods are demand
// (View) may have too.
func (l *Ledger) MinimumChanged(group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	l.refreshShort(group)
}

// refreshShort decides whether a group is short of members (see Ledger.short). Called under the
// write lock.
func (l *Ledger) refreshShort(group string) {
	if l.MinMember == nil {
		return
	}
	if _, pending := l.groupPending[group]; pending && l.groupMembers[group] < l.MinMember(group) {
		l.short[group] = struct{}{}
		return
	}
	delete(l.short, group)
}

// SetNode records a node's allocatable (nil: the node is gone).
func (l *Ledger) SetNode(name string, allocatable corev1.ResourceList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	if allocatable == nil {
		l.capacity.RemoveNode(name)
		return
	}
	l.capacity.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: allocatable}})
}

// UseDevices makes the ledger charge pods their ResourceClaims' devices, read through lookup,
// from the next pod it records on: Refresh the pods that use claims to charge those now.
func (l *Ledger) UseDevices(lookup quota.DeviceLookup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	l.Devices = lookup
}

// SetDevices records what the cluster's ResourceSlices offer.
func (l *Ledger) SetDevices(total quota.Amounts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	l.capacity.SetDevices(total)
}
