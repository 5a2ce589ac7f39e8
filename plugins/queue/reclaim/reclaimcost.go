package reclaim

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// What a reclaim costs. Reclaim keeps a queue's deserved share by restarting another queue's
// job, and the work that job did since it last started is thrown away. Most of the time the
// cluster frees capacity soon enough for the waiting queue (TephraQueue gives what frees first to
// queues below their share), and a reclaim of a job that has run for hours costs far more than
// the wait it saves. Two optional rules weigh that:
//
//   - Patience (TephraQueue's reclaimPatience): before a queue reclaims a job, its pod waits, in
//     proportion to their sizes, as long as the job had run when the pod began to wait: the work
//     the reclaim would throw away is weighed against the wait the pod has borne. A job that
//     started while the pod waited costs no patience: it took room the pod's queue was owed. The
//     measure needs no estimate and no rate, and is the same at any time scale; a pod that waits
//     long enough always gets its share in the end, so deserved shares still hold. Sizes are
//     dominant shares of the resources the pod asks for.
//     With reclaimPatienceCounts WholeRun, patience counts instead all a victim has run since it
//     last started, the work the reclaim throws away: a pod then never reclaims a job at least
//     its size that ran before it began to wait (that job's run grows as fast as the wait), and
//     the victims of one reclaim never throw away more than the preemptor has waited. A pod
//     whose job reclaim took before counts the whole run whatever the setting (payback.go).
//     Patience is bounded (TephraQueue's reclaimPatienceLimit, a Queue's
//     spec.reclaimPatienceLimitSeconds): a pod of a queue below its deserved share waits at most
//     that long for the room it is owed, however long its victims had run (patiencelimit.go).
//   - A limit per job (TephraQueue's reclaimLimitPerJob): a job reclaimed that many times is not
//     reclaimed again. The count is the scheduler's, since it started.
//
// Neither applies when the reclaiming queue is below its guarantee: a guarantee is honoured at
// any cost.

// waitingSince is when the pods began to wait: the earliest created.
func waitingSince(pods []*corev1.Pod, now time.Time) time.Time {
	since := now
	for _, p := range pods {
		if c := p.CreationTimestamp.Time; !c.IsZero() && c.Before(since) {
			since = c
		}
	}
	return since
}

// sizeOf is amounts' dominant share of the cluster in the resources named.
func sizeOf(amounts, total quota.Amounts, resources []corev1.ResourceName) float64 {
	size := 0.0
	for _, name := range resources {
		if total[name] > 0 {
			size = max(size, float64(amounts[name])/float64(total[name]))
		}
	}
	return size
}

// patience weighs the victims of one reclaim against the wait of the pods they make room for.
// A zero patience lets everything through.
type patience struct {
	on bool
	// since is when the preemptor began to wait, size its size: the wait it has borne is
	// size × (now − since).
	since time.Time
	size  float64
	// spent is the work the units taken so far throw away (size × seconds run before since, or
	// since they started with wholeRun).
	spent    float64
	wholeRun bool
	// rate is, with wholeRun, how fast spent grows: the sizes of the units taken.
	rate  float64
	now   time.Time
	total quota.Amounts
	names []corev1.ResourceName
	// limit is the longest patience keeps the preemptor waiting (0: no limit).
	limit time.Duration
}

// lost is the work, in size × seconds, a reclaim of the unit throws away as patience counts it:
// what the job had run when the preemptor began to wait, or with wholeRun since it started.
func (p *patience) lost(u *unit) float64 {
	until := p.since
	if p.wholeRun {
		until = p.now
	}
	ran := until.Sub(runningSince(u.pods, p.now))
	if ran <= 0 {
		return 0
	}
	return sizeOf(u.freed, p.total, p.names) * ran.Seconds()
}

// take says whether the unit may be reclaimed on top of those taken so far, and counts it; when
// it may not, from is when the preemptor will have waited long enough to reclaim it with them
// (zero: never, with wholeRun and no limit), always after now: a pod woken at that time finds the
// same victims affordable, not the same refusal. Once the preemptor has waited its limit, every
// unit may be reclaimed, and before, from is never later than the limit.
func (p *patience) take(u *unit) (ok bool, from time.Time) {
	if !p.on || u.kind != kindReclaim || u.elastic {
		// Preemption by priority is the queue's own business, and an elastic pod's job goes on
		// without it.
		return true, time.Time{}
	}
	if p.limitReached() {
		return true, time.Time{}
	}
	ok, from = p.weigh(u)
	return ok, p.untilLimit(from)
}

// weigh is take without the limit: the unit's lost work against the preemptor's wait.
func (p *patience) weigh(u *unit) (ok bool, from time.Time) {
	lost := p.lost(u)
	if p.spent+lost <= p.size*p.now.Sub(p.since).Seconds() {
		p.spent += lost
		if p.wholeRun {
			p.rate += sizeOf(u.freed, p.total, p.names)
		}
		return true, time.Time{}
	}
	if p.size <= 0 {
		return false, time.Time{}
	}
	if !p.wholeRun {
		return false, p.since.Add(time.Duration((p.spent + lost) / p.size * float64(time.Second)))
	}
	// The victims' runs grow with the wait: size × (waited + d) ≥ spent + lost + (rate + the
	// unit's size) × d is reached only while the preemptor is larger than all of them.
	rate := p.rate + sizeOf(u.freed, p.total, p.names)
	if rate >= p.size {
		return false, time.Time{}
	}
	d := (p.spent + lost - p.size*p.now.Sub(p.since).Seconds()) / (p.size - rate)
	return false, p.now.Add(time.Duration(d * float64(time.Second)))
}

// patienceFor starts the patience of a preemption for the pods, which ask need; it is off when
// the plugin's reclaimPatience is, or when the preemptor's queue is below its guarantee, and
// bounded by the queue's patience limit while the queue is below its deserved share
// (patiencelimit.go).
func (r *run) patienceFor(pods []*corev1.Pod, need quota.Amounts, now time.Time) patience {
	if !r.settings.Patience || r.belowGuarantee(need) {
		return patience{}
	}
	names := r.neededResources()
	return patience{on: true, since: waitingSince(pods, now), size: sizeOf(need, r.state.View.Total, names),
		now: now, total: r.state.View.Total, names: names, wholeRun: r.settings.PatienceWholeRun || r.restartsReclaimed(pods),
		limit: r.patienceLimitFor(r.leaf)}
}

// restartsReclaimed says whether the pods' job was reclaimed before: its patience then counts
// its victims' whole runs, so that restarting it pays for itself as its payback would. Counting
// the run before the wait, a job that started while it waited would cost nothing: a long job
// could be thrown away to restart one reclaim took, and so on down a chain.
func (r *run) restartsReclaimed(pods []*corev1.Pod) bool {
	if len(pods) == 0 {
		return false
	}
	return r.reclaims.of(jobKey(r.work.Group, pods[0])) > 0
}

// belowGuarantee says whether the preemptor's queue, with need, stays within its guarantee in
// every resource it asks for that the queue guarantees.
func (r *run) belowGuarantee(need quota.Amounts) bool {
	guaranteed := false
	used := r.state.View.Allocated[r.leaf.Name].Clone()
	used.Add(r.state.View.Nominated[r.leaf.Name])
	for name, v := range need {
		if v <= 0 {
			continue
		}
		if r.leaf.Guarantee[name] <= 0 {
			continue
		}
		guaranteed = true
		if used[name]+v > r.leaf.Guarantee[name] {
			return false
		}
	}
	return guaranteed
}

// countReclaims counts the units that restart their jobs among the victims of a reclaim, and
// leaves the preemptor's job, which asks jobNeed in all, the debt of their work (payback.go).
func (r *run) countReclaims(victims []*unit, jobNeed quota.Amounts, now time.Time) {
	for _, u := range victims {
		if job := jobOf(u); job != "" && u.kind == kindReclaim && !u.elastic {
			r.reclaims.reclaimed(job, now)
		}
	}
	r.owePayback(victims, jobNeed, now)
}

// reclaimCounts counts, per job, the reclaims that restarted it. A job is its pod group, else the
// controller that owns its pods (which makes them again), else its pod.
type reclaimCounts struct {
	mu    sync.Mutex
	byJob map[string]reclaimCount
}

type reclaimCount struct {
	count int
	last  time.Time
}

// forgetAfter is how long a job's count is kept after its last reclaim, so that counts of jobs
// long gone do not pile up.
const forgetAfter = 7 * 24 * time.Hour

// jobOf is the job a unit's pods belong to, as reclaimCounts counts them (jobKey).
func jobOf(u *unit) string {
	if u.group != "" || len(u.pods) == 0 {
		return jobKey(u.group, nil)
	}
	return jobKey("", u.pods[0])
}

// reclaimed counts a reclaim of the job, when its victims are chosen.
func (c *reclaimCounts) reclaimed(job string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byJob == nil {
		c.byJob = map[string]reclaimCount{}
	}
	if len(c.byJob)%1024 == 1023 {
		for k, v := range c.byJob {
			if now.Sub(v.last) > forgetAfter {
				delete(c.byJob, k)
			}
		}
	}
	c.byJob[job] = reclaimCount{count: c.byJob[job].count + 1, last: now}
}

// of is how many times the job was reclaimed.
func (c *reclaimCounts) of(job string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byJob[job].count
}

// overLimit says whether the unit's job was reclaimed as often as the plugin's
// reclaimLimitPerJob allows (never when there is no limit or the queue is below its guarantee).
func (r *run) overLimit(u *unit, need quota.Amounts) bool {
	limit := r.settings.LimitPerJob
	if limit <= 0 || u.kind != kindReclaim || u.elastic {
		return false
	}
	return r.reclaims.of(jobOf(u)) >= limit && !r.belowGuarantee(need)
}
