package framework

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PreemptorWakeUp bounds how long a preemptor may take from its last victim's eviction to its own
// bind. Victims go in about a second on the local cluster, and a gang's backoff is at most 10 s;
// a preemptor that missed the events of its victims' deletion waits for kube-scheduler's periodic
// flush of unschedulable pods instead, five minutes (podMaxInUnschedulablePodsDuration).
const PreemptorWakeUp = 30 * time.Second

// checkPreemptors makes Namespace check every test's namespace with CheckPreemptorsWoken
// (CheckPreemptorsInEveryTest).
var checkPreemptors bool

// CheckPreemptorsInEveryTest makes every namespace a test gets from Namespace checked with
// CheckPreemptorsWoken when the test ends. The packages that preempt or reclaim call it in their
// TestMain, before Main.
func CheckPreemptorsInEveryTest() { checkPreemptors = true }

// CheckPreemptorsWoken checks, when the test ends, that every pod of the namespace that evicted
// pods (the Preempted and Reclaimed events of its victims name it) and then bound did so within
// PreemptorWakeUp of its last victim's eviction. Call it right after Namespace, so that it runs
// before the namespace goes.
func CheckPreemptorsWoken(t testing.TB, env *Env, ns string) {
	t.Helper()
	t.Cleanup(func() {
		for _, late := range LatePreemptors(env, ns, PreemptorWakeUp) {
			t.Errorf("a preemptor waited on its victims' room past the wake-up bound: %s", late)
		}
	})
}

// LatePreemptors lists the preemptors of a namespace that bound more than within after their
// last victim's eviction, each described with what it waited.
func LatePreemptors(env *Env, ns string, within time.Duration) []string {
	events, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return []string{fmt.Sprintf("listing events: %v", err)}
	}
	type preemptor struct {
		name       string
		lastVictim time.Time
		victims    int
	}
	preemptors := map[types.UID]*preemptor{}
	bound := map[types.UID]time.Time{}
	for _, e := range events.Items {
		switch {
		case (e.Reason == "Preempted" || e.Reason == "Reclaimed") && e.Related != nil && e.Related.Kind == "Pod":
			p := preemptors[e.Related.UID]
			if p == nil {
				p = &preemptor{name: e.Related.Name}
				preemptors[e.Related.UID] = p
			}
			p.victims++
			if at := lastSeen(e); at.After(p.lastVictim) {
				p.lastVictim = at
			}
		case e.Reason == "Scheduled" && e.InvolvedObject.Kind == "Pod":
			bound[e.InvolvedObject.UID] = lastSeen(e)
		}
	}
	var late []string
	for uid, p := range preemptors {
		at, ok := bound[uid]
		if !ok || !at.After(p.lastVictim) {
			continue
		}
		if waited := at.Sub(p.lastVictim); waited > within {
			late = append(late, fmt.Sprintf("pod %s/%s bound %v after the last of its %d victims was evicted (bound: %v)",
				ns, p.name, waited.Round(time.Millisecond), p.victims, within))
		}
	}
	sort.Strings(late)
	return late
}

// lastSeen is when an event last happened: its series' last observation, its event time, or its
// last timestamp, whichever the recorder set.
func lastSeen(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}
