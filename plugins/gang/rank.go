package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/queueorder"
)

// Rank is where a waiting pod stands in the active queue's order among the pods of its priority
// (less), read without its queue entry: the share and the place the queue froze for it when it
// last entered, else what they would be now. TephraQueue reads it to name, of another queue's
// waiting workloads, the one that queue runs next (plugins/internal/queueorder).
func (g *groupManager) Rank(pod *corev1.Pod) queueorder.Rank {
	r := queueorder.Rank{Share: g.frozenShareOf(pod)}
	order, pg, ordered := g.orderOf(pod)
	key, grouped := groupOf(pod)
	if ordered && order.by == v1alpha1.QueueOrderLeastAttainedService {
		if place, ok := g.frozenAttainedPlace(pod); ok {
			r.Place = place
		} else {
			r.Place = g.attainedPlaceNow(pod, pod.CreationTimestamp.Time, order.bound)
		}
		return r
	}
	delay := time.Duration(0)
	if ordered {
		delay = estimateDelay(pod, pg, order.bound)
	}
	r.Place = pod.CreationTimestamp.Time
	if grouped {
		t, ok := g.groups.createdTime(key)
		if !ordered {
			t, ok = g.groups.sortTime(key)
		}
		if ok {
			r.Place = t
		}
	}
	r.Place = r.Place.Add(delay)
	// In a queue ordered by submission, a pod never refused goes before those refused since they
	// came (sortKey), and a refused one sorts no earlier than its last refusal.
	if !ordered {
		refusedAt, refused := lastRefusal(pod)
		r.FirstTry = !refused
		if refused && refusedAt.After(r.Place) {
			r.Place = refusedAt
		}
	}
	return r
}

// frozenShareOf is the share the active queue froze for the pod's job, else its share now.
func (g *groupManager) frozenShareOf(pod *corev1.Pod) float64 {
	key, ok := groupOf(pod)
	if !ok {
		return 0
	}
	s := g.shares
	s.mu.Lock()
	f, frozen := s.frozen[pod.UID]
	s.mu.Unlock()
	if frozen {
		return f.share
	}
	return g.groupShare(key)
}

// lastRefusal is when the scheduler last refused the pod, as its PodScheduled condition says.
func lastRefusal(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
