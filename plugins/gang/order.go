package gang

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/runtimeestimate"
)

// A queue may order its waiting workloads of one priority by their runtime estimates, shortest
// first (Queue spec.order ShortestEstimateFirst): short jobs then wait less, and the mean
// completion time drops, as shortest-job-first does. A workload's place is when it came (its
// group's or a plain pod's creation) plus its estimate, capped at the queue's
// orderBoundSeconds: the key does not change while the pod is queued, as the active queue's heap
// needs, and no workload is passed over by one that came more than the bound after it. A failed
// gang is not moved behind the others, as it is in queues ordered by submission: its backoff
// keeps it from blocking them meanwhile, and moving it would reset its bound. For the same reason
// a refused pod keeps its place here (sortKey). A workload
// without an estimate counts as the bound: it goes after the short ones that came with it, and
// before anything that comes a bound later.

// queueOrders holds the orders of the queues that order otherwise than by submission
// (ShortestEstimateFirst here, LeastAttainedService in attained.go), from the Queue informer.
type queueOrders struct {
	orders sync.Map // queue name → queueOrder
	// count is how many queues order otherwise than by submission: while none does, ordering
	// reads nothing more.
	count atomic.Int32
}

// queueOrder is a queue's order and its bound.
type queueOrder struct {
	by    v1alpha1.QueueOrder
	bound time.Duration
}

func (o *queueOrders) set(q *v1alpha1.Queue) {
	if q.Spec.Order != v1alpha1.QueueOrderShortestEstimateFirst && q.Spec.Order != v1alpha1.QueueOrderLeastAttainedService {
		o.remove(q.Name)
		return
	}
	bound := time.Duration(v1alpha1.DefaultOrderBoundSeconds) * time.Second
	if b := q.Spec.OrderBoundSeconds; b != nil && *b > 0 {
		bound = time.Duration(*b) * time.Second
	}
	if _, had := o.orders.Swap(q.Name, queueOrder{by: q.Spec.Order, bound: bound}); !had {
		o.count.Add(1)
	}
}

func (o *queueOrders) remove(name string) {
	if _, had := o.orders.LoadAndDelete(name); had {
		o.count.Add(-1)
	}
}

// of is the queue's order when it is not by submission.
func (o *queueOrders) of(queue string) (queueOrder, bool) {
	if o.count.Load() == 0 {
		return queueOrder{}, false
	}
	v, ok := o.orders.Load(queue)
	if !ok {
		return queueOrder{}, false
	}
	return v.(queueOrder), true
}

func (o *queueOrders) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if q, ok := obj.(*v1alpha1.Queue); ok {
				o.set(q)
			}
		},
		UpdateFunc: func(_, obj any) {
			if q, ok := obj.(*v1alpha1.Queue); ok {
				o.set(q)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				o.remove(key)
			}
		},
	}
}

// orderOf is the order of the pod's queue, with the pod's PodGroup (nil for a plain pod, or one
// not in the informer yet); ordered is false when the queue orders by submission.
func (g *groupManager) orderOf(pod *corev1.Pod) (order queueOrder, pg *v1alpha1.PodGroup, ordered bool) {
	if g.orders.count.Load() == 0 {
		return queueOrder{}, nil, false
	}
	if key, ok := groupOf(pod); ok {
		pg, _ = g.podGroups.PodGroups(key.namespace).Get(key.name)
	}
	queue := ""
	if pg != nil {
		queue = queueOfGroup(pg)
	} else {
		queue = v1alpha1.QueueOfPod(pod, "")
	}
	order, ordered = g.orders.of(queue)
	return order, pg, ordered
}

// estimateDelay is what a queue ordered by estimate adds to the pod's sort time: its workload's
// estimate (pg's, else the pod's activeDeadlineSeconds) capped at the queue's bound.
func estimateDelay(pod *corev1.Pod, pg *v1alpha1.PodGroup, bound time.Duration) time.Duration {
	estimate := time.Duration(0)
	if pg != nil {
		estimate = runtimeestimate.OfGroup(pg)
	} else if s := pod.Spec.ActiveDeadlineSeconds; s != nil && *s > 0 {
		estimate = time.Duration(*s) * time.Second
	}
	if estimate <= 0 || estimate > bound {
		return bound
	}
	return estimate
}

// less orders the active queue: higher priority first; then jobs by their dominant resource
// share (DRF, frozen while a pod is queued, see jobShares), the smallest first; then, in queues
// ordered by submission, pods never refused before those refused since they came; then by place
// (sortKey); members of one group stay together.
func (g *groupManager) less(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	if sa, sb := g.shareOf(a), g.shareOf(b); sa != sb {
		return sa < sb
	}
	ka, kb := g.sortKey(a), g.sortKey(b)
	if ka.firstTry != kb.firstTry {
		return ka.firstTry
	}
	if !ka.place.Equal(kb.place) {
		return ka.place.Before(kb.place)
	}
	if ka.group != kb.group {
		return ka.group < kb.group
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

type podInfoGetter interface{ GetPodInfo() fwk.PodInfo }

// queuedKey is where a queued pod sorts among the pods of its priority and share.
type queuedKey struct {
	// firstTry: the pod was never refused, and its queue orders by submission.
	firstTry bool
	// place is its workload's place; group is its group's key ("" for a plain pod).
	place time.Time
	group string
}

// sortKey is a queued pod's key. A workload's place is when it came: a group's sort time (its
// creation, or its last failure) or a plain pod's queue time; plus its estimate in queues that
// order by it, or its attained service's level in queues that order by that (attained.go).
//
// In a queue ordered by submission, a pod refused since it came sorts behind every pod never
// refused, and among the refused no earlier than its last refusal, which is its queue time
// (kube-scheduler's queue sets it when a refused pod comes back), as under upstream's
// PrioritySort. Otherwise the held pods that every event sends back, pods of a queue at its share
// or of a gang without room yet, go ahead of new pods. Each refusal writes the pod's condition
// from the scheduling loop when its message changes, tens of milliseconds on a busy apiserver, and
// on a busy cluster those retries fill the loop: new pods waited behind them for minutes without
// being tried at all (make replay, docs/replay.md). Tried first, a new pod is placed at once if it
// fits, or refused once and then takes its turn among the others.
//
// Queues ordered by estimate or attained service keep a workload's place fixed, refused or not:
// there the place is the promise (a short or new workload goes before a long or old one that came
// up to the bound before it), and moving refused workloads behind new ones would undo it.
func (g *groupManager) sortKey(e fwk.QueuedEntityInfo) queuedKey {
	getter, ok := e.(podInfoGetter)
	if !ok {
		return queuedKey{firstTry: e.GetUnschedulableCount() == 0, place: e.GetTimestamp()}
	}
	pod := getter.GetPodInfo().GetPod()
	order, pg, ordered := g.orderOf(pod)
	key, grouped := groupOf(pod)
	k := queuedKey{place: g.place(e, pod, order, pg, ordered, key, grouped)}
	if grouped {
		k.group = key.String()
	}
	if !ordered {
		k.firstTry = e.GetUnschedulableCount() == 0
		if !k.firstTry && e.GetTimestamp().After(k.place) {
			k.place = e.GetTimestamp()
		}
	}
	return k
}

// place is a workload's place by its queue's order.
func (g *groupManager) place(e fwk.QueuedEntityInfo, pod *corev1.Pod, order queueOrder, pg *v1alpha1.PodGroup, ordered bool, key groupKey, grouped bool) time.Time {
	if ordered && order.by == v1alpha1.QueueOrderLeastAttainedService {
		return g.attainedPlace(e, pod, order.bound)
	}
	delay := time.Duration(0)
	if ordered {
		delay = estimateDelay(pod, pg, order.bound)
	}
	if grouped {
		if ordered {
			// Its creation, not its last failure: the bound counts from when it came.
			if t, ok := g.groups.createdTime(key); ok {
				return t.Add(delay)
			}
		}
		if t, ok := g.groups.sortTime(key); ok {
			return t.Add(delay)
		}
	}
	if ordered && !pod.CreationTimestamp.IsZero() {
		return pod.CreationTimestamp.Add(delay)
	}
	return e.GetTimestamp().Add(delay)
}
