package reclaim

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A job that has run less than its queue's reclaim minimum runtime is not reclaimed: the work a
// reclaim throws away is what the victim ran since it last started, and a queue reclaiming the
// youngest jobs first (the least work lost) would otherwise restart the same jobs over and over
// as shares shift. A job restarted by reclaim starts young again, so the same rule bounds how
// often it is restarted in a stretch of time. The reclaiming pod is tried again when the first
// protected job comes of age: no event says so.

// reclaimMinRuntime is how long the queue's jobs run before they may be reclaimed: the Queue's
// spec.reclaimMinRuntimeSeconds, else the plugin's reclaimMinRuntime.
func (r *run) reclaimMinRuntime(queue string) time.Duration {
	if n := r.state.Tree.Get(queue); n != nil && n.ReclaimMinRuntime != nil {
		return *n.ReclaimMinRuntime
	}
	return r.settings.MinRuntime
}

// reclaimableFrom is when the unit's job has run its queue's minimum runtime: now or earlier
// when it may be reclaimed.
func (r *run) reclaimableFrom(u *unit, now time.Time) time.Time {
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
