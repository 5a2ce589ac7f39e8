// Package victimwait holds a preemptor until the victims of its preemption are gone, and wakes
// it then.
//
// A preemptor whose victims are still going cannot be placed: the room they hold is not free
// yet. Tried while they go, it fails, and each failure grows kube-scheduler's backoff, which it
// then waits out after the room came. Upstream's DefaultPreemption holds a preemptor only while
// the eviction requests are sent; a bound victim goes later, when its kubelet has stopped it. So
// a preemptor (a pod, or the members of a group) is held at PreEnqueue until the last of its
// victims is gone from the scheduler's informer, and activated at once then: activation skips
// the backoff. A victim that does not go within its termination grace period and a margin (its
// node is gone, a finalizer holds it) holds the preemptor no longer: it is woken then, and
// decides again.
package victimwait

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Margin is how long past its victims' longest termination grace period a preemptor is held at
// most.
const Margin = 10 * time.Second

// defaultGracePeriod is a pod's termination grace period when its spec does not say
// (corev1.DefaultTerminationGracePeriodSeconds).
const defaultGracePeriod = corev1.DefaultTerminationGracePeriodSeconds * time.Second

// Waits are the preemptors held for their victims. The zero value holds and wakes nobody until
// Wake is set; set Wake and Changed before the first Hold.
type Waits struct {
	// Wake activates the pods whose victims are gone (the scheduler's Handle.Activate).
	Wake func(pods map[string]*corev1.Pod)
	// Changed reports the number of pods held after each change (a gauge); nil: not reported.
	Changed func(held int)

	mu       sync.Mutex
	byMember map[types.UID]*wait
	byVictim map[types.UID]map[*wait]struct{}
	// afterFunc runs f after d and returns what stops it (time.AfterFunc's; nil: that).
	afterFunc func(d time.Duration, f func()) func() bool
}

// wait is one preemption's: the victims still there and the members to wake.
type wait struct {
	victims map[types.UID]struct{}
	members map[types.UID]*corev1.Pod
	stop    func() bool
}

// Hold holds members until every one of victims is gone. bound says whether a victim is still
// bound to a node as the informer shows it: one that is not (gone already, or rejected while it
// waited at Permit, which frees its room at once) holds nothing. It is asked after the wait is
// recorded, so that a victim deleted in between is not waited for: its deletion is either seen
// by bound or reported by Gone.
func (w *Waits) Hold(members, victims []*corev1.Pod, bound func(*corev1.Pod) bool) {
	if len(members) == 0 || len(victims) == 0 {
		return
	}
	wt := &wait{victims: map[types.UID]struct{}{}, members: map[types.UID]*corev1.Pod{}}
	longest := time.Duration(0)
	for _, v := range victims {
		wt.victims[v.UID] = struct{}{}
		longest = max(longest, gracePeriod(v))
	}
	w.mu.Lock()
	if w.byMember == nil {
		w.byMember, w.byVictim = map[types.UID]*wait{}, map[types.UID]map[*wait]struct{}{}
	}
	for _, m := range members {
		if old, ok := w.byMember[m.UID]; ok {
			// A new preemption for the pod replaces what it waited for.
			delete(old.members, m.UID)
			if len(old.members) == 0 {
				w.dropLocked(old)
			}
		}
		wt.members[m.UID] = m
		w.byMember[m.UID] = wt
	}
	for uid := range wt.victims {
		if w.byVictim[uid] == nil {
			w.byVictim[uid] = map[*wait]struct{}{}
		}
		w.byVictim[uid][wt] = struct{}{}
	}
	after := w.afterFunc
	if after == nil {
		after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	wt.stop = after(longest+Margin, func() { w.expire(wt) })
	w.reportLocked()
	w.mu.Unlock()
	for _, v := range victims {
		if !bound(v) {
			w.Gone(v.UID)
		}
	}
}

// gracePeriod is how long the victim's kubelet may take to stop it.
func gracePeriod(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return defaultGracePeriod
}

// Holding says whether the pod waits for the victims of its preemption.
func (w *Waits) Holding(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byMember[uid]
	return ok
}

// Gone reports a victim gone (deleted), or one that will not go (its eviction failed): the
// preemptors that waited for it alone are woken.
func (w *Waits) Gone(victim types.UID) {
	w.mu.Lock()
	if _, ok := w.byVictim[victim]; !ok {
		// Most deleted pods are no preemption's victim: nothing changes.
		w.mu.Unlock()
		return
	}
	var woken map[string]*corev1.Pod
	for wt := range w.byVictim[victim] {
		delete(wt.victims, victim)
		if len(wt.victims) == 0 {
			woken = addMembers(woken, wt)
			w.dropLocked(wt)
		}
	}
	delete(w.byVictim, victim)
	w.reportLocked()
	w.mu.Unlock()
	w.wake(woken)
}

// Forget drops a held pod that was deleted: nothing is woken for it.
func (w *Waits) Forget(member types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.byMember[member]
	if !ok {
		return
	}
	delete(wt.members, member)
	delete(w.byMember, member)
	if len(wt.members) == 0 {
		w.dropLocked(wt)
	}
	w.reportLocked()
}

// expire wakes the members of a wait whose victims did not all go in time.
func (w *Waits) expire(wt *wait) {
	w.mu.Lock()
	if len(wt.members) == 0 {
		w.mu.Unlock()
		return // released, or its members replaced, meanwhile
	}
	woken := addMembers(nil, wt)
	w.dropLocked(wt)
	w.reportLocked()
	w.mu.Unlock()
	w.wake(woken)
}

func (w *Waits) wake(pods map[string]*corev1.Pod) {
	if len(pods) > 0 && w.Wake != nil {
		w.Wake(pods)
	}
}

func addMembers(pods map[string]*corev1.Pod, wt *wait) map[string]*corev1.Pod {
	if pods == nil {
		pods = map[string]*corev1.Pod{}
	}
	for _, m := range wt.members {
		pods[m.Namespace+"/"+m.Name] = m
	}
	return pods
}

// dropLocked forgets a wait: its members are no longer held and its victims no longer watched.
func (w *Waits) dropLocked(wt *wait) {
	if wt.stop != nil {
		wt.stop()
	}
	for uid := range wt.members {
		if w.byMember[uid] == wt {
			delete(w.byMember, uid)
		}
	}
	for uid := range wt.victims {
		delete(w.byVictim[uid], wt)
		if len(w.byVictim[uid]) == 0 {
			delete(w.byVictim, uid)
		}
	}
	wt.members, wt.victims = map[types.UID]*corev1.Pod{}, map[types.UID]struct{}{}
}

func (w *Waits) reportLocked() {
	if w.Changed != nil {
		w.Changed(len(w.byMember))
	}
}
