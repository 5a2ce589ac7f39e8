package queue

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/queueorder"
)

// podEntry is what the ledger knows of one pod that counts in a queue.
type podEntry struct {
	queue    string // "" while the pod's PodGroup is unknown: it counts nowhere yet
	group    string // namespace/name of its PodGroup, "" for none
	requests quota.Amounts
	// direct and shared are parts of requests, from the pod's ResourceClaims (quota.PodDevices):
	// claims it names directly, which a gang's members may share, and claims other running pods
	// use too, which its eviction would not free. claims are the direct ones by "namespace/name":
	// a queue counts each once, however many of its pods name it (claimRefs).
	direct, shared quota.Amounts
	claims         map[string]quota.Amounts
	namespace      string
	name           string
	priority       int32
	// bound: the informer shows it on a node; assumed: this scheduler reserved it.
	bound, assumed bool
	terminating    bool
	nominated      bool
	// gated: the pod has scheduling gates; it cannot be scheduled, so it is no demand.
	gated bool
	// nominatedAt is when PostFilter nominated the pod; until the informer catches up (or a
	// while has passed), the nomination counts even if the pod object does not show it yet.
	nominatedAt   time.Time
	nominatedNode string
	// holding: the nomination holds a node that drains for the pod (drain.go); no victims of
	// its are going.
	holding bool
}

// nominationGrace is how long a nomination made by PostFilter counts without the informer
// showing it.
const nominationGrace = 30 * time.Second

func (e *podEntry) placed() bool { return e.bound || e.assumed }

// charge is the entry as quota.ChargeOf charged its pod, placed also when this scheduler assumed
// it: its sums follow the same rules as the Queue controller's count.
func (e *podEntry) charge() quota.PodCharge {
	c := quota.PodCharge{Queue: e.queue, Group: e.group, Terminating: e.terminating, Gated: e.gated}
	switch {
	case e.queue == "":
		c.Standing = quota.Unresolved
	case e.placed():
		c.Standing = quota.Placed
	case e.terminating:
		c.Standing = quota.Leaving
	default:
		c.Standing = quota.Waiting
	}
	return c
}

// arranged says whether the pod is placed, or nominated to room a preemption of the last
// nominationGrace freed for it: either way, its gang's minimum counts it.
func (e *podEntry) arranged() bool {
	return e.placed() || (e.nominated && !e.nominatedAt.IsZero() && time.Since(e.nominatedAt) < nominationGrace)
}

// ledger is the scheduler's one account of every queue: requests placed (bound, or assumed by
// this scheduler between Reserve and bind) and pending, per leaf queue, and the cluster's total.
// Informer events and Reserve/Unreserve update it under one lock; scheduling cycles read it.
// Since cycles run one at a time and Reserve records a pod before the next cycle starts, no two
// cycles can both admit into the last free share of a queue.
type ledger struct {
	mu   sync.RWMutex
	pods map[types.UID]*podEntry
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
	// demand (view).
	groupPending map[string]map[string]quota.Amounts
	groupMembers map[string]int
	// short holds the groups with pending pods and fewer members than their minimum, which view
	// leaves out of the demand. It is kept as members come and go (and when a minimum changes,
	// minimumChanged) so that view does not ask every pending group for its minimum on every
	// scheduling cycle: with 3750 pending gangs that was a quarter of the scheduler's CPU.
	short map[string]struct{}
	// minMember returns a group's minimum (0 when unknown); nil counts every group's pending.
	minMember func(group string) int
	// unresolved holds pods whose PodGroup was not known yet, by group.
	unresolved map[string]map[types.UID]*corev1.Pod
	// capacity is the cluster's total: the nodes' (setNode) and the devices ResourceSlices offer
	// (setDevices). devices reads the claims pods are charged for (nil: pods are charged their
	// requests only).
	capacity quota.ClusterTotal
	devices  quota.DeviceLookup
	// placedClaims and pendingClaims count, by queue and claim, the entries that name a claim
	// directly, with the charge counted for it: until the claim is reserved, every pod that
	// would use it is charged it (quota.ChargeDevices), and the queue must count it once.
	placedClaims, pendingClaims map[claimRef]*claimCount
	// gone holds the pods the scheduling queue saw deleted before the ledger's own handler of the
	// pod informer did (goneBeforeHandler): a late update of such a pod, which the handler may
	// still bring, must not count it again. The handler's deletion clears the entry.
	gone map[types.UID]struct{}
	// version changes with every change, so derived values can be cached.
	version uint64
	// names are the scheduler names whose pods count (v1alpha1.CountsInQueues), replaced whole
	// when a profile is added so that observe reads them without a lock or a copy.
	names atomic.Pointer[[]string]
}

func newLedger(schedulerNames ...string) *ledger {
	l := &ledger{
		pods:           map[types.UID]*podEntry{},
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
		unresolved:     map[string]map[types.UID]*corev1.Pod{},
		placedClaims:   map[claimRef]*claimCount{},
		pendingClaims:  map[claimRef]*claimCount{},
		gone:           map[types.UID]struct{}{},
	}
	l.names.Store(&schedulerNames)
	return l
}

// serve adds a scheduler name whose pods count; false if it counted already.
func (l *ledger) serve(schedulerName string) bool {
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

// counts says whether a pod counts in the queues.
func (l *ledger) counts(pod *corev1.Pod) bool {
	return v1alpha1.CountsInQueues(pod, *l.names.Load())
}

// claimRef is a claim named directly by pods of a queue.
type claimRef struct{ queue, claim string }

// claimCount is how many entries name a claim, and the charge the queue counts for it: the
// first entry's, kept until the last is gone, so that the sums never drift.
type claimCount struct {
	entries int
	charge  quota.Amounts
}

// addClaims adds (sign 1) or removes an entry's direct claims to a queue's sums, each once.
func addClaims(sums map[string]quota.Amounts, refs map[claimRef]*claimCount, queue, namespace string, claims map[string]quota.Amounts, sign int64) {
	for name, amounts := range claims {
		ref := claimRef{queue, namespace + "/" + name}
		c := refs[ref]
		if sign > 0 {
			if c == nil {
				c = &claimCount{charge: amounts.Clone()}
				refs[ref] = c
				addSigned(sums, queue, c.charge, 1)
			} else if !equalAmounts(c.charge, amounts) {
				// The claim's charge changed (allocated, its class created): the newest counts.
				addSigned(sums, queue, c.charge, -1)
				c.charge = amounts.Clone()
				addSigned(sums, queue, c.charge, 1)
			}
			c.entries++
			continue
		}
		if c == nil {
			continue
		}
		if c.entries--; c.entries == 0 {
			addSigned(sums, queue, c.charge, -1)
			delete(refs, ref)
		}
	}
}

func equalAmounts(a, b quota.Amounts) bool {
	if len(a) != len(b) {
		return false
	}
	for name, v := range a {
		if w, ok := b[name]; !ok || w != v {
			return false
		}
	}
	return true
}

// charge is what a pod counts for in its queue: its requests, and the devices of its
// ResourceClaims that are charged to it.
type charge struct {
	requests, direct, shared quota.Amounts
	claims                   map[string]quota.Amounts
	// problems say why a claim could not be accounted; uncounted are the DeviceClasses of
	// requests whose count only their allocation tells.
	problems, uncounted []string
}

// chargeOf is what a pod counts for in its queue.
func (l *ledger) chargeOf(pod *corev1.Pod) charge {
	return l.withDevices(pod, quota.PodRequests(pod))
}

// withDevices adds a pod's devices to its requests.
func (l *ledger) withDevices(pod *corev1.Pod, requests quota.Amounts) charge {
	c := charge{requests: requests}
	if l.devices == nil || (len(pod.Spec.ResourceClaims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil) {
		return c
	}
	d := quota.ChargeDevices(pod, l.devices)
	c.requests.Add(d.Charged)
	c.direct, c.shared, c.problems, c.uncounted, c.claims = d.Direct, d.Shared, d.Problems, d.Uncounted, d.DirectClaims
	return c
}

// placedClaimsIn returns the part of claims that a queue counts placed already.
func (l *ledger) placedClaimsIn(queue, namespace string, claims map[string]quota.Amounts) quota.Amounts {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := quota.Amounts{}
	for name, amounts := range claims {
		if l.placedClaims[claimRef{queue, namespace + "/" + name}] != nil {
			out.Add(amounts)
		}
	}
	return out
}

// podRequests are what a pod counts for in its queue.
func (l *ledger) podRequests(pod *corev1.Pod) quota.Amounts {
	return l.chargeOf(pod).requests
}

// observe records a pod as the informer shows it. resolve returns the queue of a PodGroup
// ("" when it does not exist).
func (l *ledger) observe(pod *corev1.Pod, resolve func(namespace, group string) string) {
	l.record(pod, resolve, false)
}

// refresh records a known pod again, whose charge may have changed (its claims did); a pod the
// ledger does not know (deleted meanwhile, or not seen yet) is left to the pods' informer.
func (l *ledger) refresh(pod *corev1.Pod, resolve func(namespace, group string) string) {
	l.record(pod, resolve, true)
}

func (l *ledger) record(pod *corev1.Pod, resolve func(namespace, group string) string, knownOnly bool) {
	c := quota.ChargeOf(pod, *l.names.Load(), func(namespace, group string) (string, bool) {
		q := resolve(namespace, group)
		return q, q != ""
	})
	if c.Standing == quota.Uncounted {
		if !knownOnly {
			l.forget(pod.UID, pod)
		}
		return
	}
	requests := quota.PodRequests(pod)
	e := &podEntry{
		queue:       c.Queue,
		group:       c.Group,
		name:        pod.Name,
		priority:    corev1helpers.PodPriority(pod),
		bound:       c.Standing == quota.Placed,
		terminating: c.Terminating,
		nominated:   pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "",
		gated:       c.Gated,
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, gone := l.gone[pod.UID]; gone || (knownOnly && l.pods[pod.UID] == nil) {
		return
	}
	// Charged under the lock: the pod's informer and its claims' call observe concurrently,
	// and the last to record must have read the newest claims.
	d := l.withDevices(pod, requests)
	e.requests, e.direct, e.shared, e.claims, e.namespace = d.requests, d.direct, d.shared, d.claims, pod.Namespace
	if old := l.pods[pod.UID]; old != nil {
		e.assumed = old.assumed && !e.bound
		if !e.bound && !e.nominated && !old.nominatedAt.IsZero() && time.Since(old.nominatedAt) < nominationGrace {
			e.nominated = true
		}
		e.nominatedAt, e.nominatedNode, e.holding = old.nominatedAt, old.nominatedNode, old.holding
		l.account(old, -1)
	}
	l.setUnresolved(pod, e.group, e.queue == "")
	l.pods[pod.UID] = e
	l.account(e, 1)
}

func (l *ledger) setUnresolved(pod *corev1.Pod, group string, unresolved bool) {
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

// groupAdded re-resolves the pods that named a PodGroup before it existed.
func (l *ledger) groupAdded(key string, resolve func(namespace, group string) string) {
	l.mu.RLock()
	pods := make([]*corev1.Pod, 0, len(l.unresolved[key]))
	for _, pod := range l.unresolved[key] {
		pods = append(pods, pod)
	}
	l.mu.RUnlock()
	for _, pod := range pods {
		l.observe(pod, resolve)
	}
}

// forget drops a pod that ended or was deleted.
func (l *ledger) forget(uid types.UID, pod *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.gone, uid)
	if old := l.pods[uid]; old != nil {
		l.account(old, -1)
		delete(l.pods, uid)
		if pod != nil {
			l.setUnresolved(pod, old.group, false)
		}
	}
}

// goneBeforeHandler drops a deleted pod that the scheduling queue learned of first (a queueing
// hint), and keeps it dropped until the ledger's own handler sees the deletion (forget). The two
// are handlers of one informer, called in no set order: a pod brought back by the deletion could
// otherwise be refused with its queue still charged for the deleted pod, and no event would be
// left to bring it back. Only a pod the informer showed bound is dropped: kube-scheduler sends the
// same event for a pod it assumed and forgot (its binding failed), which lives on.
func (l *ledger) goneBeforeHandler(pod *corev1.Pod) {
	// The hint asks once per pod TephraQueue refused: after the first, the pod is known no more.
	l.mu.RLock()
	old := l.pods[pod.UID]
	l.mu.RUnlock()
	if old == nil || !old.bound {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.pods[pod.UID]; old != nil && old.bound {
		l.account(old, -1)
		delete(l.pods, pod.UID)
		l.setUnresolved(pod, old.group, false)
		l.gone[pod.UID] = struct{}{}
	}
}

// assume records a pod reserved by this scheduler in the queue it was admitted to.
func (l *ledger) assume(pod *corev1.Pod, queue, group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[pod.UID]
	if e == nil {
		c := l.chargeOf(pod)
		e = &podEntry{requests: c.requests, direct: c.direct, shared: c.shared, claims: c.claims, namespace: pod.Namespace, name: pod.Name, priority: corev1helpers.PodPriority(pod), queue: queue, group: group}
	} else {
		l.account(e, -1)
		e = new(*e)
	}
	e.assumed, e.queue = true, queue
	l.pods[pod.UID] = e
	l.account(e, 1)
}

// nominate counts a pod that PostFilter has just nominated as waiting for its victims.
func (l *ledger) nominate(uid types.UID, node string, now time.Time) {
	l.nominateFor(uid, node, now, false)
}

// hold counts a pod nominated to a node that drains for it, evicting nobody (drain.go).
func (l *ledger) hold(uid types.UID, node string, now time.Time) {
	l.nominateFor(uid, node, now, true)
}

func (l *ledger) nominateFor(uid types.UID, node string, now time.Time, holding bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || e.placed() {
		return
	}
	l.account(e, -1)
	e = new(*e)
	e.nominated, e.nominatedAt, e.nominatedNode, e.holding = true, now, node, holding
	l.pods[uid] = e
	l.account(e, 1)
}

// unnominate forgets a pod's nomination at once: the scheduler clears it (holds.go), and the
// grace that covers an informer behind a new nomination must not keep its room counted.
func (l *ledger) unnominate(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || !e.nominated {
		return
	}
	l.account(e, -1)
	e = new(*e)
	e.nominated, e.nominatedAt, e.nominatedNode, e.holding = false, time.Time{}, "", false
	l.pods[uid] = e
	l.account(e, 1)
}

// unassume undoes assume for a pod that will not bind.
func (l *ledger) unassume(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.pods[uid]
	if e == nil || !e.assumed {
		return
	}
	l.account(e, -1)
	e = new(*e)
	e.assumed = false
	l.pods[uid] = e
	l.account(e, 1)
}

// minimumChanged records that a group's minimum changed: whether its pending pods are demand
// (view) may have too.
func (l *ledger) minimumChanged(group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	l.refreshShort(group)
}

// refreshShort decides whether a group is short of members (see ledger.short). Called under the
// write lock.
func (l *ledger) refreshShort(group string) {
	if l.minMember == nil {
		return
	}
	if _, pending := l.groupPending[group]; pending && l.groupMembers[group] < l.minMember(group) {
		l.short[group] = struct{}{}
		return
	}
	delete(l.short, group)
}

// account adds (sign 1) or removes (sign -1) an entry's contribution to the sums.
func (l *ledger) account(e *podEntry, sign int64) {
	l.version++
	if e.group != "" {
		defer l.refreshShort(e.group)
	}
	if e.group != "" && e.placed() {
		addSigned(l.groupPlaced, e.group, e.requests, sign)
		l.groupCount[e.group] += int(sign)
		if l.groupCount[e.group] == 0 {
			delete(l.groupCount, e.group)
			delete(l.groupPlaced, e.group)
		}
	}
	c := e.charge()
	if c.Member() {
		l.groupMembers[e.group] += int(sign)
		if l.groupMembers[e.group] == 0 {
			delete(l.groupMembers, e.group)
		}
	}
	if e.queue == "" {
		return
	}
	// The claims the pod names directly count once per queue (addClaims), not in own.
	own := e.requests
	if len(e.claims) > 0 {
		own = e.requests.Clone()
		own.Sub(e.direct)
	}
	switch {
	case c.Standing == quota.Placed:
		addSigned(l.allocated, e.queue, own, sign)
		addClaims(l.allocated, l.placedClaims, e.queue, e.namespace, e.claims, sign)
		if e.terminating {
			addSigned(l.terminating, e.queue, own, sign)
		}
	case c.Demand():
		addSigned(l.pending, e.queue, own, sign)
		addClaims(l.pending, l.pendingClaims, e.queue, e.namespace, e.claims, sign)
		if e.group != "" {
			byQueue := l.groupPending[e.group]
			if byQueue == nil {
				byQueue = map[string]quota.Amounts{}
				l.groupPending[e.group] = byQueue
			}
			addSigned(byQueue, e.queue, own, sign)
			if len(byQueue) == 0 {
				delete(l.groupPending, e.group)
			}
		}
		if e.nominated {
			addSigned(l.nominated, e.queue, own, sign)
			if e.group != "" {
				l.groupNominated[e.group] += int(sign)
				if l.groupNominated[e.group] == 0 {
					delete(l.groupNominated, e.group)
				}
			}
		}
	}
}

func addSigned(sums map[string]quota.Amounts, key string, add quota.Amounts, sign int64) {
	sum := sums[key]
	if sum == nil {
		sum = quota.Amounts{}
		sums[key] = sum
	}
	for name, v := range add {
		sum[name] += sign * v
		if sum[name] == 0 {
			delete(sum, name)
		}
	}
	if len(sum) == 0 {
		delete(sums, key)
	}
}

// setNode records a node's allocatable (nil: the node is gone).
func (l *ledger) setNode(name string, allocatable corev1.ResourceList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	if allocatable == nil {
		l.capacity.RemoveNode(name)
		return
	}
	l.capacity.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: allocatable}})
}

// setDevices records what the cluster's ResourceSlices offer.
func (l *ledger) setDevices(total quota.Amounts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	l.capacity.SetDevices(total)
}

// view is a consistent copy of what a scheduling decision reads from the ledger.
type view struct {
	version                                    uint64
	total                                      quota.Amounts
	allocated, terminating, pending, nominated map[string]quota.Amounts
}

// waitingWorkload is a queue's pending workload that a share hold keeps room for: a pod of its
// own or a gang, named for messages, and one of its pending pods (the gang's first found).
type waitingWorkload struct {
	name string
	uid  types.UID
}

// pendingFits returns a pending workload of the queue whose next step fits in room and, when
// placeable is not nil, on the nodes as placeable says (none: the zero value): a pod of its
// own, or for a gang whose minimum is not placed, the pod's requests times the members its
// minimum still misses, less those nominated to room their preemption freed (the caller counts
// that room as the queue's already). Gated pods and the groups short of members are no demand
// (view).
func (l *ledger) pendingFits(queue string, room quota.Amounts, placeable func(e *podEntry, count int) bool) waitingWorkload {
	return l.pendingFitsInOrder(queue, room, placeable, nil)
}

// pendingFitsInOrder is pendingFits, trying the workloads in the order rank gives (nil: by name
// alone, after priority).
func (l *ledger) pendingFitsInOrder(queue string, room quota.Amounts, placeable func(e *podEntry, count int) bool, rank func(e *podEntry) queueorder.Rank) waitingWorkload {
	l.mu.RLock()
	defer l.mu.RUnlock()
	// The workloads that fit the room are tried on the nodes in the order the queue runs them
	// (highest priority, then as the active queue orders a priority's pods, rank), so that the
	// hold names the workload the other queue runs next, not one it leaves waiting; and then by
	// name, so that a held pod is told of the same workload attempt after attempt: the scheduler
	// writes a pod's status only when its message changes, and a message naming whichever
	// workload the map gave first wrote it on every attempt.
	type candidate struct {
		e     *podEntry
		uid   types.UID
		count int
		name  string
		rank  queueorder.Rank
	}
	var candidates []candidate
	tried := map[string]bool{} // a group's members are one workload
	for uid, e := range l.pods {
		if e.queue != queue || e.placed() || e.terminating || e.gated || tried[e.group] {
			continue
		}
		if e.group != "" {
			tried[e.group] = true
		}
		count, ok := l.nextStepFits(e, room)
		if !ok {
			continue
		}
		name := "pod " + e.namespace + "/" + e.name
		if e.group != "" {
			name = "pod group " + e.group
		}
		c := candidate{e: e, uid: uid, count: count, name: name}
		if rank != nil {
			c.rank = rank(e)
		}
		candidates = append(candidates, c)
	}
	slices.SortFunc(candidates, func(a, b candidate) int {
		if a.e.priority != b.e.priority {
			return cmp.Compare(b.e.priority, a.e.priority)
		}
		if a.rank.Before(b.rank) {
			return -1
		}
		if b.rank.Before(a.rank) {
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	for _, c := range candidates {
		if placeable == nil || placeable(c.e, c.count) {
			return waitingWorkload{name: c.name, uid: c.uid}
		}
	}
	return waitingWorkload{}
}

// stillFits says whether a workload pendingFits returned for the queue still waits there and its
// next step still fits in room (the nodes aside: a share hold checks them when it is decided
// again, in PreFilter).
func (l *ledger) stillFits(w waitingWorkload, queue string, room quota.Amounts) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.pods[w.uid]
	if !ok || e.queue != queue {
		return false
	}
	_, fits := l.nextStepFits(e, room)
	return fits
}

// nextStepFits says whether a pending entry is demand whose next step fits in room, and how many
// pods like it that step places: one, or the members its gang's minimum still misses. Called
// under the read lock.
func (l *ledger) nextStepFits(e *podEntry, room quota.Amounts) (int, bool) {
	if e.placed() || e.terminating || e.gated {
		return 0, false
	}
	unit, count := e.requests, 1
	if e.group != "" {
		if _, short := l.short[e.group]; short {
			return 0, false
		}
		if l.minMember != nil {
			minimum := l.minMember(e.group)
			missing := minimum - l.groupCount[e.group] - l.groupNominated[e.group]
			if minimum > 0 && missing <= 0 {
				// Its minimum is placed: what waits is above it, and only takes what is free
				// once other groups' minimums are placed (TephraGang's ElasticWaiting), so a
				// queue held for it and it would wait for each other beside the idle room.
				return 0, false
			}
			if missing > 1 {
				count = missing
				unit = e.requests.Clone()
				for name, v := range unit {
					unit[name] = v * int64(missing)
				}
			}
		}
	}
	return count, fitsIn(unit, room, l.capacity.Total())
}

// fitsIn says whether unit fits in room, in every resource the cluster has.
func fitsIn(unit, room, total quota.Amounts) bool {
	for name, v := range unit {
		if v > 0 && total[name] > 0 && v > room[name] {
			return false
		}
	}
	return true
}

// view copies the ledger's sums. Its pending leaves out the pods of groups short of their
// minimum: they cannot run until the rest of their members exist, and counted as demand they
// would hold shares, and so capacity, idle (the pending of closed queues is left out by the
// queue plugin's snapshot, which knows the tree).
func (l *ledger) view() view {
	l.mu.RLock()
	defer l.mu.RUnlock()
	v := view{
		version:     l.version,
		total:       l.capacity.Total().Clone(),
		allocated:   cloneSums(l.allocated),
		terminating: cloneSums(l.terminating),
		pending:     cloneSums(l.pending),
		nominated:   cloneSums(l.nominated),
	}
	if l.minMember == nil {
		return v
	}
	for group := range l.short {
		for queue, amounts := range l.groupPending[group] {
			addSigned(v.pending, queue, amounts, -1)
		}
	}
	return v
}

// currentVersion is the ledger's version, which changes with every change.
func (l *ledger) currentVersion() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.version
}

func cloneSums(sums map[string]quota.Amounts) map[string]quota.Amounts {
	out := make(map[string]quota.Amounts, len(sums))
	for k, v := range sums {
		out[k] = v.Clone()
	}
	return out
}

// groupPlacement returns a group's placed requests and pod count.
func (l *ledger) groupPlacement(group string) (quota.Amounts, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.groupPlaced[group].Clone(), l.groupCount[group]
}

// groupCounts returns the placed pod count of every group with pods placed in the queue.
func (l *ledger) groupCounts(queue string) map[string]int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[string]int{}
	for _, e := range l.pods {
		if e.queue == queue && e.group != "" && e.placed() {
			out[e.group]++
		}
	}
	return out
}

// placedIn returns copies of the entries placed in a queue.
func (l *ledger) placedIn(queue string) []podEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []podEntry
	for _, e := range l.pods {
		if e.queue == queue && e.placed() {
			out = append(out, *e)
		}
	}
	return out
}

// entry returns a copy of a pod's entry.
func (l *ledger) entry(uid types.UID) (podEntry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.pods[uid]
	if !ok {
		return podEntry{}, false
	}
	return *e, true
}
