package gang

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// groupKey is namespace/name of a PodGroup.
type groupKey struct{ namespace, name string }

func (k groupKey) String() string { return k.namespace + "/" + k.name }

// groupState is what the scheduler knows about a group beyond the API objects: the members it
// has assumed (reserved but not yet bound), and how its last attempts went.
type groupState struct {
	// assumed maps the UID of each member reserved in this attempt to its task.
	assumed map[types.UID]string
	// roomFor holds the members TephraQueue evicted pods or found room on its way for, and when
	// (evictingFor).
	roomFor map[types.UID]time.Time
	// waiting holds the members waiting at Permit.
	waiting map[types.UID]struct{}
	// bound holds the members this scheduler has bound, which the pod informer may not show yet,
	// with the attempt that bound them.
	bound map[types.UID]uint64
	// attempt is the generation of the group's current attempt: fail ends it and starts the
	// next. attemptOf records the attempt each reserved member belongs to, and allowed the
	// members Permit let through to bind, by attempt. A member of an attempt that has ended is
	// never allowed by a later one (Permit), never ends a later one (Unreserve), and never binds
	// (PreBind); one that bound anyway is rolled back.
	attempt   uint64
	attemptOf map[types.UID]uint64
	allowed   map[types.UID]uint64
	// failed are the group's last failed attempts (a few: members of older ones are long done).
	failed []uint64
	// timers bring the group's members back after a backoff or at its SLA; stopped when the
	// group is forgotten, so that none outlives it.
	timers []*groupTimer
	// created is the PodGroup's creation time; lastFailure when its last attempt failed.
	created, lastFailure time.Time
	// failures counts consecutive failed attempts, for the group's backoff.
	failures int
	// backoffUntil holds the group back after a failed attempt.
	backoffUntil time.Time
	// unreadyUntil is the end of the backoff after its bound pods were evicted for missing its
	// ready timeout, for which a timer will bring the group back.
	unreadyUntil time.Time
	// fullObserved is set once the group's minimum has been bound and measured.
	fullObserved bool
	// rolledBack are the members whose deletion a rollback asked for. They count as gone at
	// once: until the informer shows them deleted (which may be long when the apiserver is away)
	// they would otherwise count towards the minimum of the group's next attempt, which then binds
	// its members beside pods that are on their way out, and is left a partial gang.
	rolledBack map[types.UID]struct{}
	// wantsMinimum: a member of the group's minimum has reached PreFilter and the minimum is not
	// placed yet. stalled: its last attempt placed nothing, so it cannot use what is free now.
	// Elastic pods of other groups wait while a group wants its minimum and has not stalled.
	wantsMinimum, stalled bool
	// priority is the priority of the members of its minimum, for its place in its queue
	// (queuehead.go).
	priority int32
	// domain is the network domain the group's minimum was assigned to by its topology, for its
	// members to be placed in (nil: none, or not assigned yet).
	domain *domain
	// subGroupDomains are the domains its sub-groups were assigned to in the group's domain
	// (subgroups.go), by sub-group; a sub-group without one uses the group's.
	subGroupDomains map[string]*domain
	// subGroupsLeft are the sub-groups its attempt leaves out: the group runs with fewer
	// sub-groups than it has (spec.minSubGroups), and these did not fit (subgroups.go).
	subGroupsLeft sets.Set[string]
	// elasticWaiting: elastic members of the group were held back for another group's minimum.
	elasticWaiting bool
	// lastActive is when a member of the minimum last passed PreEnqueue or reached PreFilter. A
	// group held back elsewhere (its queue closed, say) goes quiet, and stops holding elastic pods
	// back after minimumQuiet.
	lastActive time.Time
	// reserved are the nodes reserved for the group, past its SLA or at the head of its queue (nil:
	// none); slaArmed says a timer will bring the group back when its SLA waiting time ends.
	reserved []string
	slaArmed bool
	// expected is the reserved group's expected start as Filter last worked it out, for the
	// events of the pods that backfill its nodes (backfill.go).
	expected expectedStart
	// unfit is the rejection of the group's last capacity check in PreFilter, and unfitAt when
	// it was made. The group's other members are refused with it at no cost, until an event that
	// may let the group fit clears it (the plugin's queueing hints), or unfitFor passes.
	unfit   string
	unfitAt time.Time
	// unfitFreed is the tracker's count of freed capacity when the verdict's cycle began.
	unfitFreed uint64
	// minimumQueued: the group's minimum of members exists and its members were queued for it
	// (isSchedulableAfterMemberAdded); cleared when a member finds the minimum short again.
	minimumQueued bool
	// pilot is the member tried first while a piloted group's minimum is not placed (pilotName is
	// namespace/name), and admitted says its PreFilter found room for the minimum, or pods were
	// evicted for it. Until then the group's other members wait at PreEnqueue: a minimum that
	// cannot fit costs one member's cycles, events and status writes, not every member's. An
	// admitted group stays admitted until its attempt fails or its minimum is placed: members
	// that reclaim for themselves keep doing so.
	pilot     types.UID
	pilotName string
	admitted  bool
	// piloted: the group's minimum was found unable to fit, or an attempt failed, since its
	// minimum was last placed, or its minimum is pilotedFromStart or more; only then do its
	// members wait for a pilot. A smaller group tried for the first time goes to the active
	// queue whole, its members one after another (QueueSort), and its first member's PreFilter
	// admits it or finds it unfit, after which the others are refused with that verdict, once.
	// Holding every group's members for a pilot from the start
	// kept them among the scheduling queue's unschedulable pods, which the queue walks on every
	// bind of every pod: with 30 000 pods of gangs of 8 on 5000 nodes, gangs bound at a third of
	// plain pods' rate.
	piloted bool
	// short: the last member that reached PreEnqueue found the group's minimum of members
	// missing, so its members wait there for more members, not for capacity.
	short bool
	// consolidatedAt is when pods were last moved to make whole nodes for the group
	// (consolidate.go): it gets no other plan for consolidateEvery. consolidationTried is when the
	// planner was last asked: it is not asked again within replanAfter.
	consolidatedAt, consolidationTried time.Time
	// movesPending: the group holds the nodes a consolidation makes whole, and waits for the
	// moved pods to go. Its capacity verdict is not kept meanwhile (keptUnfit): the moved pods go
	// one after another, each a pod deletion, and the deletion that frees the last room may come
	// while the member is queued, not waiting for an event, whose hint then does not clear the
	// verdict; the member, refused with the kept one, would then wait for the reservation's end
	// (an e2e run once saw the gang start only then, 90 s late).
	movesPending bool
}

// tracker holds the state of every group the plugin has seen. Its lock is held only for map
// operations: scheduling cycles, binding cycles and event handlers all touch it.
type tracker struct {
	mu     sync.Mutex
	groups map[groupKey]*groupState
	// reservedNodes maps each reserved node to its group; reservedCount lets Filter skip the
	// lock when nothing is reserved, which is nearly always.
	reservedNodes map[string]reservedNode
	reservedCount atomic.Int32
	// waiting is the number of members waiting at Permit across all groups, kept as groups change
	// so that the gauge costs nothing per call.
	waiting int
	// freed counts the events that freed capacity (freed.go): a group's capacity verdict made
	// before the last of them is not kept.
	freed atomic.Uint64
}

type reservedNode struct {
	group groupKey
	reservation
}

func newTracker() *tracker {
	return &tracker{groups: map[groupKey]*groupState{}, reservedNodes: map[string]reservedNode{}}
}

// reserve records nodes reserved for a group; false if it has a reservation already, or one of
// the nodes is another group's now (reservations never overlap, whichever cycle reserved first).
func (t *tracker) reserve(key groupKey, nodes []string, r reservation) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[key]
	if g == nil || g.reserved != nil {
		return false
	}
	for _, n := range nodes {
		if other, held := t.reservedNodes[n]; held && other.group != key {
			return false
		}
	}
	g.reserved = nodes
	for _, n := range nodes {
		t.reservedNodes[n] = reservedNode{key, r}
	}
	t.reservedCount.Add(1)
	return true
}

// unreserve drops a group's reservation; false if it had none.
func (t *tracker) unreserve(key groupKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unreserveLocked(key)
}

func (t *tracker) unreserveLocked(key groupKey) bool {
	g := t.groups[key]
	if g == nil || g.reserved == nil {
		return false
	}
	for _, n := range g.reserved {
		if t.reservedNodes[n].group == key {
			delete(t.reservedNodes, n)
		}
	}
	g.reserved, g.movesPending = nil, false
	t.reservedCount.Add(-1)
	return true
}

// reservedFor returns the group a node is reserved for.
func (t *tracker) reservedFor(node string) (groupKey, reservation, bool) {
	if t.reservedCount.Load() == 0 {
		return groupKey{}, reservation{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.reservedNodes[node]
	return r.group, r.reservation, ok
}

func (t *tracker) reservationCount() int { return int(t.reservedCount.Load()) }

// with runs f on the group's state, creating it if needed, under the lock.
func (t *tracker) with(key groupKey, f func(*groupState)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[key]
	if g == nil {
		g = &groupState{assumed: map[types.UID]string{}, waiting: map[types.UID]struct{}{}, bound: map[types.UID]uint64{},
			attempt: 1, attemptOf: map[types.UID]uint64{}, allowed: map[types.UID]uint64{}, roomFor: map[types.UID]time.Time{}}
		t.groups[key] = g
	}
	before := len(g.waiting)
	f(g)
	t.waiting += len(g.waiting) - before
}

// sortTime orders groups in the queue: the later of its creation and its last failure, so a group
// that keeps failing does not keep the head of the queue. ok is false for groups not seen yet.
func (t *tracker) sortTime(key groupKey) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[key]
	if g == nil || (g.created.IsZero() && g.lastFailure.IsZero()) {
		return time.Time{}, false
	}
	if g.lastFailure.After(g.created) {
		return g.lastFailure, true
	}
	return g.created, true
}

// createdTime is a group's creation time, when known.
func (t *tracker) createdTime(key groupKey) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[key]
	if g == nil || g.created.IsZero() {
		return time.Time{}, false
	}
	return g.created, true
}

// waitingCount is the number of members waiting at Permit across all groups.
func (t *tracker) waitingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waiting
}

// minimumQuiet is how long a group whose minimum waits keeps holding elastic pods back without
// any of its members being tried.
const minimumQuiet = 30 * time.Second

// unfitFor bounds how long a group's failed capacity check is trusted without an event.
const unfitFor = 5 * time.Second

// maxFailedAttempts bounds how many failed attempts a group remembers.
const maxFailedAttempts = 4

// markFailed records an attempt as failed.
func (s *groupState) markFailed(attempt uint64) {
	if s.hasFailed(attempt) {
		return
	}
	if len(s.failed) == maxFailedAttempts {
		s.failed = s.failed[1:]
	}
	s.failed = append(s.failed, attempt)
}

// hasFailed says whether an attempt failed.
func (s *groupState) hasFailed(attempt uint64) bool {
	return slices.Contains(s.failed, attempt)
}

// keptUnfit is the group's failed capacity check while it is still trusted ("" if none): for
// unfitFor, while no capacity was freed since (freed is the tracker's count now).
func (s *groupState) keptUnfit(now time.Time, freed uint64) string {
	if now.Sub(s.unfitAt) < unfitFor && s.unfitFreed == freed && !s.movesPending {
		return s.unfit
	}
	return ""
}

// backingOff says whether the group waits out a backoff, after a failed attempt or an unready
// eviction, whose timer will bring its members back. It creates no state for a group not seen.
func (t *tracker) backingOff(key groupKey, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.groups[key]
	return s != nil && (s.backoffUntil.After(now) || s.unreadyUntil.After(now))
}

// clearUnfit forgets a group's failed capacity check: something happened that may let it fit.
func (t *tracker) clearUnfit(key groupKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.groups[key]; s != nil {
		s.unfit = ""
	}
}

// takeUnfit returns the groups with a kept capacity verdict, and forgets the verdicts.
func (t *tracker) takeUnfit() []groupKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []groupKey
	for key, s := range t.groups {
		if s.unfit != "" {
			s.unfit = ""
			out = append(out, key)
		}
	}
	return out
}

// wantingMinimum lists the groups, but skip, whose minimum may take capacity now.
func (t *tracker) wantingMinimum(skip groupKey, now time.Time) []groupKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []groupKey
	for key, g := range t.groups {
		if key != skip && g.wantsMinimum && !g.stalled && !g.backoffUntil.After(now) && now.Sub(g.lastActive) < minimumQuiet {
			out = append(out, key)
		}
	}
	return out
}

// queuedGroup is a group waiting for its minimum, as aheadInQueue orders them.
type queuedGroup struct {
	key      groupKey
	priority int32
	created  time.Time
}

// waitingForMinimum returns the groups but skip whose minimum a member has asked for and is not
// known to be placed, quiet or stalled as they may be: a big gang waits long, without being
// tried, for the capacity to free up.
func (t *tracker) waitingForMinimum(skip groupKey) []queuedGroup {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []queuedGroup
	for key, g := range t.groups {
		if key != skip && g.wantsMinimum {
			out = append(out, queuedGroup{key, g.priority, g.created})
		}
	}
	return out
}

// queueHeadReservations returns the groups holding a reservation as the head of the queue.
func (t *tracker) queueHeadReservations(queue string) []groupKey {
	if t.reservedCount.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []groupKey
	for key, g := range t.groups {
		if g.reserved != nil && t.reservedNodes[g.reserved[0]].group == key && t.reservedNodes[g.reserved[0]].queueHead == queue {
			out = append(out, key)
		}
	}
	return out
}

// takeElasticWaiting returns the groups whose elastic members were held back, and clears them.
func (t *tracker) takeElasticWaiting() []groupKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []groupKey
	for key, g := range t.groups {
		if g.elasticWaiting {
			g.elasticWaiting = false
			out = append(out, key)
		}
	}
	return out
}

// forget drops a deleted group, stopping its timers, and returns the members that were waiting
// at Permit, for the caller to reject.
func (t *tracker) forget(key groupKey) []types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[key]
	if g == nil {
		return nil
	}
	waiting := make([]types.UID, 0, len(g.waiting))
	for uid := range g.waiting {
		waiting = append(waiting, uid)
	}
	t.waiting -= len(g.waiting)
	t.unreserveLocked(key)
	for _, timer := range g.timers {
		timer.Stop()
	}
	delete(t.groups, key)
	return waiting
}

// after runs f after d, unless the group is forgotten first. A group that does not exist (it
// was forgotten) gets no timer.
func (t *tracker) after(key groupKey, d time.Duration, f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[key]
	if g == nil {
		return
	}
	// Drop the timers that have fired, so that a long-lived group's list stays short.
	live := g.timers[:0]
	for _, timer := range g.timers {
		if !timer.fired.Load() {
			live = append(live, timer)
		}
	}
	timer := &groupTimer{}
	timer.Timer = time.AfterFunc(d, func() {
		timer.fired.Store(true)
		f()
	})
	g.timers = append(live, timer)
}

// groupTimer is a timer of a group that knows whether it has fired.
type groupTimer struct {
	*time.Timer
	fired atomic.Bool
}

// groupCount is the number of groups the tracker holds, for tests.
func (t *tracker) groupCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.groups)
}
