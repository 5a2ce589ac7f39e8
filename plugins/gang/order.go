package gang

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

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
// keeps it from blocking them meanwhile, and moving it would reset its bound. A workload
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
