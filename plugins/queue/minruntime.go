package queue

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// A job that has run less than its queue's reclaim minimum runtime is not reclaimed: the work a
// reclaim throws away is what the victim ran since it last started, and a queue reclaiming the
// youngest jobs first (the least work lost) would otherwise restart the same jobs over and over
// as shares shift. A job restarted by reclaim starts young again, so the same rule bounds how
// often it is restarted in a stretch of time. The reclaiming pod is tried again when the first
// protected job comes of age: no event says so.

// reclaimMinRuntime is how long the queue's jobs run before they may be reclaimed: the Queue's
// spec.reclaimMinRuntimeSeconds, else the plugin's reclaimMinRuntime.
func (r *reclaimer) reclaimMinRuntime(queue string) time.Duration {
	if n := r.state.tree.Get(queue); n != nil && n.ReclaimMinRuntime != nil {
		return *n.ReclaimMinRuntime
	}
	return r.q.reclaimMinRuntime
}

// reclaimableFrom is when the unit's job has run its queue's minimum runtime: now or earlier
// when it may be reclaimed.
func (r *reclaimer) reclaimableFrom(u *unit, now time.Time) time.Time {
	least := r.reclaimMinRuntime(u.queue)
	if least <= 0 {
		return time.Time{}
	}
	return runningSince(u.pods, now).Add(least)
}

// runningSince is when a job's pods all began to run: a gang works once its last member runs.
// A pod counts from its start, else from its bind (a pod bound but not started lost no work, but
// reclaiming it restarts the job as surely), else from now.
func runningSince(pods []*corev1.Pod, now time.Time) time.Time {
	var last time.Time
	for _, p := range pods {
		since := now
		if p.Status.StartTime != nil {
			since = p.Status.StartTime.Time
		} else {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
					since = c.LastTransitionTime.Time
				}
			}
		}
		if since.After(last) {
			last = since
		}
	}
	return last
}

// protection collects, over one PostFilter, the units spared because their jobs are too young to
// reclaim: how many, and when the first comes of age. SelectVictimsOnNode runs on many nodes at
// once.
type protection struct {
	mu    sync.Mutex
	count int
	first time.Time
	seen  map[string]bool
}

func (p *protection) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count, p.first, p.seen = 0, time.Time{}, nil
}

// spare notes a unit spared until from (a gang is one unit however many nodes it is met on).
func (p *protection) spare(u *unit, from time.Time) {
	key := u.group
	if key == "" || u.elastic {
		key = string(u.pods[0].UID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if p.seen[key] {
		return
	}
	p.seen[key] = true
	p.count++
	if p.first.IsZero() || from.Before(p.first) {
		p.first = from
	}
}

// result returns how many units were spared and when the first may be reclaimed.
func (p *protection) result() (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, p.first
}

// youngJobsNote says, for a preemptor that evicted nothing, which young jobs it waits on ("" if
// none), and has it tried again when the first of them comes of age.
func (q *Queue) youngJobsNote(logger klog.Logger, pods []*corev1.Pod, now time.Time) string {
	count, first := q.reclaimer.protected.result()
	if count == 0 {
		return ""
	}
	q.wakeAt(logger, pods, first)
	return fmt.Sprintf("; %d job(s) it could reclaim have run less than their queue's reclaim minimum runtime, the first may be reclaimed in %v", count, first.Sub(now).Round(time.Second))
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
func (q *Queue) wakeAt(logger klog.Logger, pods []*corev1.Pod, at time.Time) {
	w := &q.wakers
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
			if q.stop.Err() == nil {
				q.handle.Activate(logger, activate)
			}
		})
		w.timers[uid] = waker{timer: timer, at: at}
	}
}
