package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/tephra-dev/tephra/controllers/whenserved"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Devices is what the accounting reads of Dynamic Resource Allocation (resource.k8s.io/v1): the
// claims, templates, classes and devices a pod's charge is read from (quota.ChargeDevices), and
// the devices the cluster's ResourceSlices offer per DeviceClass, part of the cluster's total.
type Devices interface {
	quota.DeviceLookup
	// Total is what the ResourceSlices offer, as queue resources (quota.DeviceInventory.Total).
	Total() quota.Amounts
}

// cachedDevices are the controllers' Devices: the persistent inventory of classes and slices,
// fed by informer events, and the claims and templates of one reconcile, listed from the cache.
type cachedDevices struct {
	*quota.DeviceInventory
	claims    map[types.NamespacedName]*resourceapi.ResourceClaim
	templates map[types.NamespacedName]*resourceapi.ResourceClaimTemplate
}

var _ Devices = &cachedDevices{}

func (d *cachedDevices) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	return d.claims[types.NamespacedName{Namespace: namespace, Name: name}]
}

func (d *cachedDevices) ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate {
	return d.templates[types.NamespacedName{Namespace: namespace, Name: name}]
}

// liveDevices are the controller's Devices while resource.k8s.io/v1 is served: the inventory of
// classes and slices, and the claims and templates as the manager's informers show them.
type liveDevices struct {
	*quota.DeviceInventory
	claims, templates toolscache.Indexer
	// changed says that classes, slices or claims changed since the ledger last charged devices.
	changed atomic.Bool
}

var _ Devices = &liveDevices{}

func (d *liveDevices) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	obj, exists, err := d.claims.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	c, _ := obj.(*resourceapi.ResourceClaim)
	return c
}

func (d *liveDevices) ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate {
	obj, exists, err := d.templates.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	t, _ := obj.(*resourceapi.ResourceClaimTemplate)
	return t
}

// refresh charges devices again once classes, slices or claims changed: the cluster's devices,
// and every pod that uses claims (only those: a cluster without DRA workloads pays nothing).
func (d *liveDevices) refresh(feed *ledger.Feed, pods toolscache.Indexer) {
	if !d.changed.Swap(false) {
		return
	}
	feed.Ledger().SetDevices(d.Total())
	for _, obj := range pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok && usesClaims(pod) {
			feed.RefreshPod(pod)
		}
	}
}

// usesClaims says whether a pod's charge reads ResourceClaims.
func usesClaims(pod *corev1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil
}

// listDevices returns the Devices of one accounting: the inventory, and the claims and templates
// the reader holds. They are listed only when a pod uses claims, so that a cluster without DRA
// workloads pays nothing for them. The items are only read (no deep copy).
func listDevices(ctx context.Context, reader client.Reader, inventory *quota.DeviceInventory, pods []*corev1.Pod) (*cachedDevices, error) {
	d := &cachedDevices{DeviceInventory: inventory}
	needed := false
	for _, pod := range pods {
		if usesClaims(pod) {
			needed = true
			break
		}
	}
	if !needed {
		return d, nil
	}
	var claims resourceapi.ResourceClaimList
	if err := reader.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	var templates resourceapi.ResourceClaimTemplateList
	if err := reader.List(ctx, &templates, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ResourceClaimTemplates: %w", err)
	}
	d.claims = make(map[types.NamespacedName]*resourceapi.ResourceClaim, len(claims.Items))
	for i := range claims.Items {
		c := &claims.Items[i]
		d.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	d.templates = make(map[types.NamespacedName]*resourceapi.ResourceClaimTemplate, len(templates.Items))
	for i := range templates.Items {
		t := &templates.Items[i]
		d.templates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
	}
	return d, nil
}

// devicesSyncTimeout bounds the wait for the device informers when resource.k8s.io becomes
// served after the controller started.
const devicesSyncTimeout = 2 * time.Minute

// watchDevices makes the controller count devices once resource.k8s.io/v1 is served (a watch
// on a kind that is not served would stop the manager): it feeds the inventory from the cache's
// DeviceClass and ResourceSlice informers, reads claims and templates from the cache's, and
// charges devices again on any change of classes, slices, templates and ResourceClaims'
// allocation or users.
// Served at start, the controller's first reconcile waits for those informers like its others;
// served later (an apiserver restarted with another --runtime-config), the leader adds the
// watches, and devices count from the status computation after they have synced.
func (r *Reconciler) watchDevices(mgr ctrl.Manager, c controller.Controller, enqueue batchingHandler, nudge chan<- event.GenericEvent) error {
	// Setup runs now when the API is served, else later in the leader's recheck: then the
	// controller runs already.
	running := false
	log := mgr.GetLogger().WithName(ControllerName)
	err := whenserved.Start(mgr, log, whenserved.Adapter{
		Name: ControllerName + "-devices",
		GVK:  resourceapi.SchemeGroupVersion.WithKind("ResourceSlice"),
		Setup: func() error {
			d, err := newLiveDevices(mgr.GetCache())
			if err != nil {
				return err
			}
			sources := deviceSources(mgr.GetCache(), d, enqueue)
			for _, s := range sources {
				if err := c.Watch(s); err != nil {
					return err
				}
			}
			if !running {
				r.useDevices(d)
				return nil
			}
			return r.enableDevicesLate(log, d, sources, nudge)
		},
	})
	running = true
	return err
}

func newLiveDevices(c cache.Cache) (*liveDevices, error) {
	ctx := context.Background()
	claims, err := c.GetInformer(ctx, &resourceapi.ResourceClaim{})
	if err != nil {
		return nil, err
	}
	templates, err := c.GetInformer(ctx, &resourceapi.ResourceClaimTemplate{})
	if err != nil {
		return nil, err
	}
	ci, ok1 := claims.(indexedInformer)
	ti, ok2 := templates.(indexedInformer)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("the manager's informers keep no index")
	}
	return &liveDevices{DeviceInventory: quota.NewDeviceInventory(), claims: ci.GetIndexer(), templates: ti.GetIndexer()}, nil
}

// useDevices makes the ledger charge devices from now on, and the next status computation
// charge the pods known already.
func (r *Reconciler) useDevices(d *liveDevices) {
	r.feed.Ledger().UseDevices(d)
	d.changed.Store(true)
	r.devices.Store(d)
}

// enableDevicesLate waits for watches added to the running controller to sync, then counts
// devices from the next status computation, which it asks for.
func (r *Reconciler) enableDevicesLate(log logr.Logger, d *liveDevices, sources []source.SyncingSource, nudge chan<- event.GenericEvent) error {
	ctx, cancel := context.WithTimeout(context.Background(), devicesSyncTimeout)
	defer cancel()
	for _, s := range sources {
		if err := s.WaitForSync(ctx); err != nil {
			return fmt.Errorf("devices are not counted in the queues: %w", err)
		}
	}
	r.useDevices(d)
	log.Info("queues count the devices of Dynamic Resource Allocation: resource.k8s.io/v1 is served now")
	select {
	case nudge <- event.GenericEvent{}:
	default: // a status computation is asked for already
	}
	return nil
}

// deviceSources are the watches that keep the inventory and the queues' device accounting
// current. Their handlers update the inventory, and mark the devices changed, before they ask for
// the status computation, which so charges devices again.
func deviceSources(c cache.Cache, d *liveDevices, enqueue batchingHandler) []source.SyncingSource {
	inventory := d.DeviceInventory
	charge := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		d.changed.Store(true)
		enqueue.add(q)
	}
	classes := handler.TypedFuncs[*resourceapi.DeviceClass, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*resourceapi.DeviceClass], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetClass(e.Object)
			charge(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*resourceapi.DeviceClass], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetClass(e.ObjectNew)
			charge(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*resourceapi.DeviceClass], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.DeleteClass(e.Object.Name)
			charge(q)
		},
	}
	slices := handler.TypedFuncs[*resourceapi.ResourceSlice, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*resourceapi.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetSlice(e.Object)
			charge(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*resourceapi.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetSlice(e.ObjectNew)
			charge(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*resourceapi.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.DeleteSlice(e.Object.Name)
			charge(q)
		},
	}
	return []source.SyncingSource{
		source.Kind(c, &resourceapi.DeviceClass{}, handler.TypedEventHandler[*resourceapi.DeviceClass, reconcile.Request](classes), classSpecChanged),
		source.Kind(c, &resourceapi.ResourceSlice{}, handler.TypedEventHandler[*resourceapi.ResourceSlice, reconcile.Request](slices), sliceSpecChanged),
		source.Kind(c, &resourceapi.ResourceClaim{}, chargeOnAny[*resourceapi.ResourceClaim](charge), claimChargeChanged),
		// A pod whose claim is not generated yet is charged what its template asks for.
		source.Kind(c, &resourceapi.ResourceClaimTemplate{}, chargeOnAny[*resourceapi.ResourceClaimTemplate](charge)),
	}
}

// chargeOnAny charges devices again on any event of a kind.
func chargeOnAny[T client.Object](charge func(workqueue.TypedRateLimitingInterface[reconcile.Request])) handler.TypedEventHandler[T, reconcile.Request] {
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			charge(q)
		},
		UpdateFunc: func(_ context.Context, _ event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			charge(q)
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			charge(q)
		},
	}
}

// A class or a slice counts again only when its spec changed (not its labels or managed fields).
var (
	classSpecChanged = predicate.TypedFuncs[*resourceapi.DeviceClass]{
		UpdateFunc: func(e event.TypedUpdateEvent[*resourceapi.DeviceClass]) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.Spec, e.ObjectNew.Spec)
		},
	}
	sliceSpecChanged = predicate.TypedFuncs[*resourceapi.ResourceSlice]{
		UpdateFunc: func(e event.TypedUpdateEvent[*resourceapi.ResourceSlice]) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.Spec, e.ObjectNew.Spec)
		},
	}
	// A claim's charge changes with its allocation and its first user (status.reservedFor), not
	// with the device status its driver writes.
	claimChargeChanged = predicate.TypedFuncs[*resourceapi.ResourceClaim]{
		UpdateFunc: func(e event.TypedUpdateEvent[*resourceapi.ResourceClaim]) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.Status.Allocation, e.ObjectNew.Status.Allocation) ||
				!equality.Semantic.DeepEqual(e.ObjectOld.Status.ReservedFor, e.ObjectNew.Status.ReservedFor)
		},
	}
)
