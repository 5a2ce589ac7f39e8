package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/whenserved"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/groupstatus"
	"github.com/tephra-dev/tephra/internal/ledger"
)

// indexedInformer is what the manager's informers are: client-go's shared index informers.
type indexedInformer interface {
	GetIndexer() toolscache.Indexer
}

// informed are the PodGroups and their pods as the manager's informers show them, read from their
// stores without copies: the ledger only reads them. The groups are the PodGroup objects and,
// once the apiserver serves them (watchUpstream), upstream PodGroups translated in memory, which
// have no object (internal/groups).
type informed struct {
	groups, pods toolscache.Indexer
	upstream     *atomic.Pointer[groups.Upstream]
}

func informedGroups(pods, podGroups cache.Informer) (informed, error) {
	p, ok1 := pods.(indexedInformer)
	g, ok2 := podGroups.(indexedInformer)
	if !ok1 || !ok2 {
		return informed{}, fmt.Errorf("the manager's informers keep no index")
	}
	return informed{groups: g.GetIndexer(), pods: p.GetIndexer(), upstream: &atomic.Pointer[groups.Upstream]{}}, nil
}

// Get returns a PodGroup object, else an upstream PodGroup's group: a group a pod carries has
// none, and quota.ChargeOf reads it from the pod.
func (i informed) Get(namespace, name string) *schedulingv1alpha1.PodGroup {
	obj, exists, err := i.groups.GetByKey(namespace + "/" + name)
	if err == nil && exists {
		pg, _ := obj.(*schedulingv1alpha1.PodGroup)
		return pg
	}
	if up := i.upstream.Load(); up != nil {
		if pg, err := up.Get(namespace, name); err == nil {
			return pg
		}
	}
	return nil
}

func (i informed) PodsOf(namespace, name string) []*corev1.Pod {
	return ledger.PodsIndexedByGroup(i.pods, namespace, name)
}

// list returns every PodGroup object of the store, only to be read, and every upstream
// PodGroup's group whose name no object has, in the phase its members make it, held by its queue
// as holdOf says (withUpstream): nobody writes their status.
func (i informed) list(holdOf func(*schedulingv1alpha1.PodGroup) groupstatus.Hold) []*schedulingv1alpha1.PodGroup {
	objs := i.groups.List()
	out := make([]*schedulingv1alpha1.PodGroup, 0, len(objs))
	for _, obj := range objs {
		if pg, ok := obj.(*schedulingv1alpha1.PodGroup); ok {
			out = append(out, pg)
		}
	}
	return withUpstream(out, i.upstream.Load(), func(namespace, name string) bool {
		_, exists, err := i.groups.GetByKey(namespace + "/" + name)
		return err != nil || exists
	}, i.PodsOf, holdOf)
}

// watchUpstream counts upstream PodGroups' groups in the queues once the apiserver serves
// scheduling.k8s.io/v1beta1 podgroups (a watch on a kind that is not served would stop the
// manager): the ledger charges their pods to their queues, read from the PodGroups' labels or
// their Workloads' (when those are served too), and follows their changes as a PodGroup object's.
func (r *Reconciler) watchUpstream(mgr ctrl.Manager, c controller.Controller, enqueue batchingHandler) error {
	return whenUpstreamServed(mgr, ControllerName, func(up *groups.Upstream, workloads bool) error {
		r.informed.upstream.Store(up)
		objects := schedulinglisters.NewPodGroupLister(r.informed.groups)
		if err := c.Watch(source.Kind(mgr.GetCache(), client.Object(&upstreamv1beta1.PodGroup{}), translating(enqueue, up.Handler(r.feed.GroupHandlers(), objects)))); err != nil {
			return err
		}
		if workloads {
			return c.Watch(source.Kind(mgr.GetCache(), client.Object(&upstreamv1beta1.Workload{}), translating(enqueue, up.WorkloadHandler(r.feed.GroupHandlers(), objects))))
		}
		return nil
	})
}

// whenUpstreamServed runs setup, named name, with upstream PodGroups read from the manager's
// cache once the apiserver serves them (a watch on a kind that is not served would stop the
// manager), and says whether it serves Workloads beside them.
func whenUpstreamServed(mgr ctrl.Manager, name string, setup func(up *groups.Upstream, workloads bool) error) error {
	var workloads bool
	return whenserved.Start(mgr, mgr.GetLogger().WithName(name), whenserved.Adapter{
		Name: name + "-upstream",
		GVK:  groups.UpstreamGroupVersion.WithKind("PodGroup"),
		Served: func() (bool, error) {
			podGroups, w, err := groups.UpstreamServed(mgr.GetConfig())
			workloads = w
			return podGroups, err
		},
		Setup: func() error {
			up, err := upstreamFromCache(mgr.GetCache(), workloads)
			if err != nil {
				return err
			}
			return setup(up, workloads)
		},
	})
}

// translating is the batching handler of upstream PodGroups or Workloads, whose events feed the
// ledger (through h, which turns them into their groups' events) before they ask for the status
// computation.
func translating(b batchingHandler, h toolscache.ResourceEventHandlerFuncs) handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.OnAdd(e.Object, false)
			b.add(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.OnUpdate(e.ObjectOld, e.ObjectNew)
			b.add(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.OnDelete(e.Object)
			b.add(q)
		},
	}
}

// upstreamFromCache reads upstream PodGroups, and Workloads when they are served, from the
// manager's cache. The Queue controller and the resize webhook share one Upstream per cache, so
// that each PodGroup is translated once in the binary, not once per reader.
func upstreamFromCache(c cache.Cache, workloads bool) (*groups.Upstream, error) {
	sharedUpstreams.Lock()
	defer sharedUpstreams.Unlock()
	key := upstreamKey{c, workloads}
	if up := sharedUpstreams.of[key]; up != nil {
		return up, nil
	}
	up, err := newUpstreamFromCache(c, workloads)
	if err != nil {
		return nil, err
	}
	if sharedUpstreams.of == nil {
		sharedUpstreams.of = map[upstreamKey]*groups.Upstream{}
	}
	sharedUpstreams.of[key] = up
	return up, nil
}

// sharedUpstreams are the Upstreams upstreamFromCache made, by cache and whether they read
// Workloads.
var sharedUpstreams struct {
	sync.Mutex
	of map[upstreamKey]*groups.Upstream
}

type upstreamKey struct {
	cache     cache.Cache
	workloads bool
}

func newUpstreamFromCache(c cache.Cache, workloads bool) (*groups.Upstream, error) {
	ctx := context.Background()
	pgs, err := c.GetInformer(ctx, &upstreamv1beta1.PodGroup{})
	if err != nil {
		return nil, err
	}
	pgIndex, ok := pgs.(indexedInformer)
	if !ok {
		return nil, fmt.Errorf("the manager's informers keep no index")
	}
	var workloadLister upstreamlisters.WorkloadLister
	if workloads {
		wls, err := c.GetInformer(ctx, &upstreamv1beta1.Workload{})
		if err != nil {
			return nil, err
		}
		wlIndex, ok := wls.(indexedInformer)
		if !ok {
			return nil, fmt.Errorf("the manager's informers keep no index")
		}
		workloadLister = upstreamlisters.NewWorkloadLister(wlIndex.GetIndexer())
	}
	return groups.NewUpstream(upstreamlisters.NewPodGroupLister(pgIndex.GetIndexer()), workloadLister), nil
}
