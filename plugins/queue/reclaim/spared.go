package reclaim

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Jobs that reclaim could take but spares (too young, too costly, not paid back, reclaimed too
// often): the preemptor is told why, and tried again when the first of them may be taken.

// Why a unit that reclaim could take is spared.
type spareReason int

const (
	// spareYoung: its job has run less than its queue's reclaim minimum runtime (minruntime.go).
	spareYoung spareReason = iota
	// spareCost: the preemptor has not waited long enough for the work it would throw away
	// (reclaimcost.go).
	spareCost
	// spareLimit: its job was reclaimed as often as the limit per job allows (reclaimcost.go).
	spareLimit
	// sparePayback: reclaim started its job, which has not yet run long enough to pay back the
	// work its start threw away (payback.go).
	sparePayback
	spareReasons
)

// protection collects, over one PostFilter, the units spared that reclaim could otherwise take:
// how many for each reason, and when the first may be taken. SelectVictimsOnNode runs on many
// nodes at once.
type protection struct {
	mu    sync.Mutex
	count [spareReasons]int
	first time.Time
	seen  map[string]bool
	// respecting: a unit whose eviction breaks no PodDisruptionBudget was spared until a known
	// time, after which it may be taken.
	respecting bool
}

// protectionState is what a protection has collected, to be put back (save, restore).
type protectionState struct {
	count      [spareReasons]int
	first      time.Time
	seen       map[string]bool
	respecting bool
}

func (p *protection) save() protectionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[string]bool, len(p.seen))
	for k, v := range p.seen {
		seen[k] = v
	}
	return protectionState{count: p.count, first: p.first, seen: seen, respecting: p.respecting}
}

func (p *protection) restore(s protectionState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count, p.first, p.seen, p.respecting = s.count, s.first, s.seen, s.respecting
}

// sparedRespecting says whether a unit that breaks no budget was spared for a while only: the
// preemptor may take it later instead of breaking a budget now.
func (p *protection) sparedRespecting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.respecting
}

// spare notes a unit spared until from (zero: no time is known) for a reason. A gang is one unit
// however many nodes it is met on, counted for the first reason it is spared for.
func (p *protection) spare(u *unit, from time.Time, why spareReason) {
	key := u.group
	if key == "" || u.elastic {
		key = string(u.pods[0].UID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !u.breaksBudget && !from.IsZero() {
		p.respecting = true
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if p.seen[key] {
		return
	}
	p.seen[key] = true
	p.count[why]++
	if !from.IsZero() && (p.first.IsZero() || from.Before(p.first)) {
		p.first = from
	}
}

// result returns how many units were spared for each reason and when the first may be reclaimed
// (zero if none is known).
func (p *protection) result() ([spareReasons]int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, p.first
}

// sparedJobsNote says, for a preemptor that evicted nothing, which jobs reclaim spared ("" if
// none), and has it tried again when the first of them may be reclaimed.
func (r *Reclaimer) sparedJobsNote(logger klog.Logger, spared *protection, pods []*corev1.Pod, now time.Time) string {
	count, first := spared.result()
	var notes []string
	if n := count[spareYoung]; n > 0 {
		notes = append(notes, fmt.Sprintf("%d job(s) it could reclaim have run less than their queue's reclaim minimum runtime", n))
	}
	if n := count[spareCost]; n > 0 {
		notes = append(notes, fmt.Sprintf("%d job(s) it could reclaim had run longer, for their size, than it has waited (reclaim patience)", n))
	}
	if n := count[sparePayback]; n > 0 {
		notes = append(notes, fmt.Sprintf("%d job(s) it could reclaim were started by reclaim and have not yet run long enough to pay back the work their start threw away", n))
	}
	if n := count[spareLimit]; n > 0 {
		notes = append(notes, fmt.Sprintf("%d job(s) it could reclaim were reclaimed as often as the limit per job allows", n))
	}
	if len(notes) == 0 {
		return ""
	}
	note := "; " + strings.Join(notes, "; ")
	if first.After(now) {
		// A time already past would wake the pod at once, again and again.
		r.wakeAt(logger, pods, first)
		note += fmt.Sprintf("; the first may be reclaimed in %v", first.Sub(now).Round(time.Second))
	}
	return note
}

// wakers holds a timer per pod waiting for a young job to come of age, so that a pod refused
// many times waits on one timer.
type wakers struct {
	mu     sync.Mutex
	timers map[types.UID]waker
}

type waker struct {
	timer *time.Timer
	at    time.Time
}

// wakeAt activates the pods at the given time (a little after, so that the job is of age when the
// pods are tried). A pod's timer for an earlier time stays; one for a later time is replaced.
func (r *Reclaimer) wakeAt(logger klog.Logger, pods []*corev1.Pod, at time.Time) {
	w := &r.wakers
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timers == nil {
		w.timers = map[types.UID]waker{}
	}
	for _, pod := range pods {
		if old, waiting := w.timers[pod.UID]; waiting {
			if !old.at.After(at) {
				continue
			}
			old.timer.Stop()
		}
		uid := pod.UID
		activate := map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod}
		var timer *time.Timer
		timer = time.AfterFunc(time.Until(at)+100*time.Millisecond, func() {
			w.mu.Lock()
			if current, ok := w.timers[uid]; ok && current.timer == timer {
				delete(w.timers, uid)
			}
			w.mu.Unlock()
			if r.stop.Err() == nil {
				r.handle.Activate(logger, activate)
			}
		})
		w.timers[uid] = waker{timer: timer, at: at}
	}
}
