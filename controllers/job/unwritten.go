package job

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// What the controller knows and the apiserver's watch has not shown it yet. In a burst of Jobs
// every write is one the apiserver serves before the next Job's pods, and every decision that
// starts from a cache a write behind makes another: a pod created again is refused, a status
// written twice within a second (Pending, then Running) is a custom resource update of the whole
// Job, its pod template included. kube-controller-manager's Job controller keeps the same two
// memories (its expectations, and a status written at most once per sync period).

// unseenTTL bounds how long a created pod is added to what the cache shows: a watch delivers a
// create within moments, and one that never came (the pod was deleted at once) must not hold a
// slot for long.
const unseenTTL = time.Minute

// unseenPods are pods the controller created that its cache has not shown yet, by job UID and
// pod name. A decision adds them to the pods the cache shows, so that it does not create them
// again.
type unseenPods struct {
	mu   sync.Mutex
	pods map[types.UID]map[string]unseenPod
}

type unseenPod struct {
	pod     *corev1.Pod
	created time.Time
}

// created notes a pod as the apiserver returned it on creation.
func (u *unseenPods) created(job types.UID, pod *corev1.Pod, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pods == nil {
		u.pods = map[types.UID]map[string]unseenPod{}
	}
	if len(u.pods) > sweepAbove {
		// Jobs deleted before the cache showed their pods are forgotten in time.
		for j, entries := range u.pods {
			for name, e := range entries {
				if now.Sub(e.created) > unseenTTL {
					delete(entries, name)
				}
			}
			if len(entries) == 0 {
				delete(u.pods, j)
			}
		}
	}
	if u.pods[job] == nil {
		u.pods[job] = map[string]unseenPod{}
	}
	u.pods[job][pod.Name] = unseenPod{pod: pod.DeepCopy(), created: now}
}

// deleted forgets a pod that the cache showed deleted, perhaps before it showed it created.
func (u *unseenPods) deleted(job types.UID, pod *corev1.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	entries := u.pods[job]
	if e, ok := entries[pod.Name]; ok && e.pod.UID == pod.UID {
		delete(entries, pod.Name)
		if len(entries) == 0 {
			delete(u.pods, job)
		}
	}
}

// with returns the cached pods of a job and, after them, the pods it created that the cache has
// not shown yet. A pod whose name a cached pod holds (the pod itself, as a rule), or one older
// than unseenTTL, is forgotten.
func (u *unseenPods) with(job types.UID, cached []corev1.Pod, now time.Time) []corev1.Pod {
	u.mu.Lock()
	defer u.mu.Unlock()
	entries := u.pods[job]
	if len(entries) == 0 {
		return cached
	}
	for i := range cached {
		delete(entries, cached[i].Name)
	}
	out := cached
	for name, e := range entries {
		if now.Sub(e.created) > unseenTTL {
			delete(entries, name)
			continue
		}
		out = append(out, *e.pod.DeepCopy())
	}
	if len(entries) == 0 {
		delete(u.pods, job)
	}
	return out
}

// firstStatusDelay is the longest a job's first status waits to be written. A job's first
// decision creates its pods and announces its phase in an event at once; the status waits until
// the pods have left Pending, so that a job whose pods start at once is written once, Running,
// rather than Pending and then Running. A job whose pods cannot start shows Pending after this.
const firstStatusDelay = 2 * time.Second

// firstStatuses are the statuses that jobs' first decisions announced and have not written, by
// job UID: the next decision starts from it, not from the empty status the cache shows.
type firstStatuses struct {
	mu       sync.Mutex
	statuses map[types.UID]firstStatus
}

type firstStatus struct {
	status batchv1alpha1.JobStatus
	// due is when it must be written, whatever the pods.
	due time.Time
}

// announced remembers the status a job's first decision announced.
func (f *firstStatuses) announced(job types.UID, status batchv1alpha1.JobStatus, due time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statuses == nil {
		f.statuses = map[types.UID]firstStatus{}
	}
	if len(f.statuses) > sweepAbove {
		// Jobs deleted before their first status was written are forgotten in time.
		for j, s := range f.statuses {
			if due.Sub(s.due) > unseenTTL {
				delete(f.statuses, j)
			}
		}
	}
	f.statuses[job] = firstStatus{status: *status.DeepCopy(), due: due}
}

// of returns the unwritten first status of a job, if it has one.
func (f *firstStatuses) of(job types.UID) (firstStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.statuses[job]
	if ok {
		s.status = *s.status.DeepCopy()
	}
	return s, ok
}

// forget drops a job's unwritten status: it was written, or the job is gone.
func (f *firstStatuses) forget(job types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.statuses, job)
}

// sweepAbove is how many jobs a memory holds before it looks for forgotten ones.
const sweepAbove = 1024

// firstMayWait says whether a job's first decision may leave its status unwritten: it starts
// the job's pods, Pending, and decides nothing else that must be remembered.
func firstMayWait(d Decision) bool {
	return d.Status.State.Phase == batchv1alpha1.JobPending && d.Status.Pending > 0 && !d.Finished && len(d.Actions) == 0
}

// earliestRequeue is the sooner of a decision's requeue (0 for none) and wait.
func earliestRequeue(requeue, wait time.Duration) time.Duration {
	if requeue > 0 && requeue < wait {
		return requeue
	}
	return wait
}

// mayWaitToWrite says whether a decision's status may wait for a later one: the job's first
// status is not due, the decision changes nothing but the status, and its pods are still
// starting (Pending, as the first status counts them).
func mayWaitToWrite(d Decision, first firstStatus, now time.Time) bool {
	if !now.Before(first.due) || d.Finished || d.DeleteJob || d.Record != nil || d.ConsumeResume ||
		len(d.Create) > 0 || len(d.Delete) > 0 || len(d.Actions) > 0 {
		return false
	}
	return d.Status.State.Phase == batchv1alpha1.JobPending && d.Status.Pending > 0
}
