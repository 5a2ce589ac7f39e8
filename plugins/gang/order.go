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

// queueOrders holds the bounds of the queues that order by estimate, from the Queue informer.
type queueOrders struct {
	bounds sync.Map // queue name → time.Duration
	// count is how many queues order by estimate: while none does, ordering reads nothing more.
	count atomic.Int32
}

func (o *queueOrders) set(q *v1alpha1.Queue) {
	if q.Spec.Order != v1alpha1.QueueOrderShortestEstimateFirst {
		o.remove(q.Name)
		return
	}
	bound := time.Duration(v1alpha1.DefaultOrderBoundSeconds) * time.Second
	if b := q.Spec.OrderBoundSeconds; b != nil && *b > 0 {
		bound = time.Duration(*b) * time.Second
	}
	if _, had := o.bounds.Swap(q.Name, bound); !had {
		o.count.Add(1)
	}
}

func (o *queueOrders) remove(name string) {
	if _, had := o.bounds.LoadAndDelete(name); had {
		o.count.Add(-1)
	}
}

// bound is the queue's bound when it orders by estimate.
func (o *queueOrders) bound(queue string) (time.Duration, bool) {
	if o.count.Load() == 0 {
		return 0, false
	}
	v, ok := o.bounds.Load(queue)
	if !ok {
		return 0, false
	}
	return v.(time.Duration), true
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

// estimateDelay is what the pod's queue adds to its sort time: its workload's estimate capped at
// the queue's bound; byEstimate is false, and the delay 0, when the queue orders by submission.
func (g *groupManager) estimateDelay(pod *corev1.Pod) (delay time.Duration, byEstimate bool) {
	if g.orders.count.Load() == 0 {
		return 0, false
	}
	var pg *v1alpha1.PodGroup
	if key, ok := groupOf(pod); ok {
		pg, _ = g.podGroups.PodGroups(key.namespace).Get(key.name)
	}
	queue := ""
	if pg != nil {
		queue = queueOfGroup(pg)
	} else {
		queue = v1alpha1.QueueOfPod(pod, "")
	}
	bound, ok := g.orders.bound(queue)
	if !ok {
		return 0, false
	}
	estimate := time.Duration(0)
	if pg != nil {
		estimate = runtimeestimate.OfGroup(pg)
	} else if s := pod.Spec.ActiveDeadlineSeconds; s != nil && *s > 0 {
		estimate = time.Duration(*s) * time.Second
	}
	if estimate <= 0 || estimate > bound {
		return bound, true
	}
	return estimate, true
}
