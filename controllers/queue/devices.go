package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
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
// DeviceClass and ResourceSlice informers, and recounts the queues on any change of those and of
// ResourceClaims' allocation or users. Served at start, the controller's first reconcile waits
// for those informers like its others; served later (an apiserver restarted with another
// --runtime-config), the leader adds the watches, and devices count from the recount after they
// have synced.
func (r *Reconciler) watchDevices(mgr ctrl.Manager, c controller.Controller, enqueue batchingHandler, nudge chan<- event.GenericEvent) error {
	inventory := quota.NewDeviceInventory()
	// Setup runs now when the API is served, else later in the leader's recheck: then the
	// controller runs already.
	running := false
	log := mgr.GetLogger().WithName(ControllerName)
	err := whenserved.Start(mgr, log, whenserved.Adapter{
		Name: ControllerName + "-devices",
		GVK:  resourceapi.SchemeGroupVersion.WithKind("ResourceSlice"),
		Setup: func() error {
			sources := deviceSources(mgr.GetCache(), inventory, enqueue)
			for _, s := range sources {
				if err := c.Watch(s); err != nil {
					return err
				}
			}
			if !running {
				r.devices.Store(inventory)
				return nil
			}
			return r.enableDevicesLate(log, inventory, sources, nudge)
		},
	})
	running = true
	return err
}

// enableDevicesLate waits for watches added to the running controller to sync, then counts
// devices from the next recount, which it asks for.
func (r *Reconciler) enableDevicesLate(log logr.Logger, inventory *quota.DeviceInventory, sources []source.SyncingSource, nudge chan<- event.GenericEvent) error {
	ctx, cancel := context.WithTimeout(context.Background(), devicesSyncTimeout)
	defer cancel()
	for _, s := range sources {
		if err := s.WaitForSync(ctx); err != nil {
			return fmt.Errorf("devices are not counted in the queues: %w", err)
		}
	}
	r.devices.Store(inventory)
	log.Info("queues count the devices of Dynamic Resource Allocation: resource.k8s.io/v1 is served now")
	select {
	case nudge <- event.GenericEvent{}:
	default: // a recount is asked for already
	}
	return nil
}

// deviceSources are the watches that keep the inventory and the queues' device accounting
// current. The inventory's handlers update it before they ask for the recount, so the recount
// sees the change.
func deviceSources(c cache.Cache, inventory *quota.DeviceInventory, enqueue batchingHandler) []source.SyncingSource {
	recount := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(allQueues, enqueue.delay())
	}
	classes := handler.TypedFuncs[*resourceapi.DeviceClass, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*resourceapi.DeviceClass], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetClass(e.Object)
			recount(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*resourceapi.DeviceClass], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetClass(e.ObjectNew)
			recount(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*resourceapi.DeviceClass], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.DeleteClass(e.Object.Name)
			recount(q)
		},
	}
	slices := handler.TypedFuncs[*resourceapi.ResourceSlice, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*resourceapi.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetSlice(e.Object)
			recount(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*resourceapi.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.SetSlice(e.ObjectNew)
			recount(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*resourceapi.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inventory.DeleteSlice(e.Object.Name)
			recount(q)
		},
	}
	return []source.SyncingSource{
		source.Kind(c, &resourceapi.DeviceClass{}, handler.TypedEventHandler[*resourceapi.DeviceClass, reconcile.Request](classes), classSpecChanged),
		source.Kind(c, &resourceapi.ResourceSlice{}, handler.TypedEventHandler[*resourceapi.ResourceSlice, reconcile.Request](slices), sliceSpecChanged),
		source.Kind(c, &resourceapi.ResourceClaim{}, handler.TypedEventHandler[*resourceapi.ResourceClaim, reconcile.Request](enqueueTyped[*resourceapi.ResourceClaim](enqueue)), claimChargeChanged),
	}
}

// enqueueTyped is the batching handler for a typed source.
func enqueueTyped[T client.Object](h batchingHandler) handler.TypedFuncs[T, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.AddAfter(allQueues, h.delay()) }
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, _ event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
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
