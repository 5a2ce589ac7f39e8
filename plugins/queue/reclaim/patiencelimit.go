package reclaim

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/quota"
)

// Patience makes a pod wait as long as its victims had run before it began to wait (for their
// sizes): beside week-long jobs, a queue below its deserved share would wait a week for room it is
// owed. The patience limit bounds that wait. Once the preemptor has waited its limit, patience
// spares none of the jobs reclaim would take, and no drain hold keeps it waiting (nothing is
// spared for patience, so nothing is drained); until then, the pod is tried again no later than
// the limit. The limit only lifts patience: a job younger than its queue's reclaim minimum
// runtime, reclaimed as often as the limit per job allows, or started by reclaim and not yet paid
// back (payback.go), is still spared. It applies to
// reclaim alone, for queues below their deserved share with the pod (reclaim is for them only).

// patienceLimitFor is the longest patience keeps a pod of the leaf queue waiting while the queue is
// below its deserved share (0: no limit): the Queue's spec.reclaimPatienceLimitSeconds, else the
// plugin's reclaimPatienceLimit. Zero when the queue is not below its share.
func (r *run) patienceLimitFor(leaf *quota.Node) time.Duration {
	if !r.belowShare || leaf == nil {
		return 0
	}
	if leaf.ReclaimPatienceLimit != nil {
		return *leaf.ReclaimPatienceLimit
	}
	return r.settings.PatienceLimit
}

// limitReached says whether the preemptor has waited its patience limit.
func (p *patience) limitReached() bool {
	return p.limit > 0 && p.now.Sub(p.since) >= p.limit
}

// untilLimit is from, when the preemptor may reclaim a unit patience spares, brought forward to
// when it will have waited its limit (a zero from, never, too).
func (p *patience) untilLimit(from time.Time) time.Time {
	if p.limit <= 0 {
		return from
	}
	if bound := p.since.Add(p.limit); from.IsZero() || from.After(bound) {
		return bound
	}
	return from
}

// liftedFor says whether the limit let the victims be reclaimed: the preemptor has waited its
// limit, and patience without it would have spared some of them.
func (p patience) liftedFor(victims []*unit) bool {
	if !p.on || !p.limitReached() {
		return false
	}
	p.limit, p.spent, p.rate = 0, 0, 0
	for _, u := range victims {
		if ok, _ := p.take(u); !ok {
			return true
		}
	}
	return false
}

// noteLimitLifted keeps, for the events of the victims' evictions, that the patience limit let
// them be reclaimed. The caller holds victimsMu.
func (r *run) noteLimitLifted(victims []*unit) {
	if !r.patience.liftedFor(victims) {
		return
	}
	note := fmt.Sprintf("; the pod had waited %v, its queue's reclaim patience limit, so patience no longer spared the jobs it reclaims",
		r.patience.now.Sub(r.patience.since).Round(time.Second))
	if r.limitNotes == nil {
		r.limitNotes = map[types.UID]string{}
	}
	for _, u := range victims {
		if u.kind != kindReclaim {
			continue
		}
		for _, p := range u.pods {
			r.limitNotes[p.UID] = note
		}
	}
}

// limitNote is the note kept for a victim's eviction event ("" if none), forgotten once read.
func (r *Reclaimer) limitNote(victim types.UID) string {
	r.victimsMu.Lock()
	defer r.victimsMu.Unlock()
	note := r.limitNotes[victim]
	delete(r.limitNotes, victim)
	return note
}
