// Package devices is the scheduler plugins' view of Dynamic Resource Allocation: the devices the
// cluster's ResourceSlices offer per DeviceClass, and the ResourceClaims and templates that say
// what each pod is charged for devices (quota.ChargeDevices). TephraQueue counts those charges
// in its queues, TephraGang in its jobs' dominant shares. One view is shared by every plugin and
// profile of a scheduler, fed once by the scheduler's informers.
package devices

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/quota"
)

// podClaimIndex indexes pods by the ResourceClaims they use ("namespace/claim"), named directly
// or generated from a template, so that a claim's change re-counts exactly its pods.
const podClaimIndex = "tephra.dev/resourceclaim"

// Devices is the scheduler's view of DRA for Tephra's plugins. It is the quota.DeviceLookup
// that pods' charges are read through.
type Devices struct {
	inventory *quota.DeviceInventory
	claims    resourcelisters.ResourceClaimLister
	templates resourcelisters.ResourceClaimTemplateLister
	pods      cache.Indexer
	synced    func() bool

	mu sync.RWMutex
	// podChanged are called with each pod whose charge may have changed, totalChanged with the
	// devices the slices offer whenever that may have.
	podChanged   []func(*corev1.Pod)
	totalChanged []func(quota.Amounts)
}

var _ quota.DeviceLookup = &Devices{}

var (
	viewsMu sync.Mutex
	// views are keyed by the scheduler's client configuration, which every profile's handle
	// returns.
	views = map[*rest.Config]*Devices{}
)

// For returns the scheduler's view, made and fed by its informers on the first call.
func For(handle fwk.Handle) (*Devices, error) {
	viewsMu.Lock()
	defer viewsMu.Unlock()
	if d, ok := views[handle.KubeConfig()]; ok {
		return d, nil
	}
	d, err := newDevices(handle)
	if err != nil {
		return nil, err
	}
	views[handle.KubeConfig()] = d
	return d, nil
}

func newDevices(handle fwk.Handle) (*Devices, error) {
	factory := handle.SharedInformerFactory().Resource().V1()
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	d := &Devices{
		inventory: quota.NewDeviceInventory(),
		claims:    factory.ResourceClaims().Lister(),
		templates: factory.ResourceClaimTemplates().Lister(),
		pods:      podInformer.GetIndexer(),
	}
	if _, indexed := podInformer.GetIndexer().GetIndexers()[podClaimIndex]; !indexed {
		if err := podInformer.AddIndexers(cache.Indexers{podClaimIndex: indexByClaim}); err != nil {
			return nil, fmt.Errorf("indexing pods by resource claim: %w", err)
		}
	}
	classReg, err := factory.DeviceClasses().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.classChanged(obj, false) },
		UpdateFunc: func(_, obj any) { d.classChanged(obj, false) },
		DeleteFunc: func(obj any) { d.classChanged(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	sliceReg, err := factory.ResourceSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.sliceChanged(obj, false) },
		UpdateFunc: func(_, obj any) { d.sliceChanged(obj, false) },
		DeleteFunc: func(obj any) { d.sliceChanged(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	claimReg, err := factory.ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    d.claimChanged,
		UpdateFunc: func(_, obj any) { d.claimChanged(obj) },
		DeleteFunc: d.claimChanged,
	})
	if err != nil {
		return nil, err
	}
	// Templates are read when a pod's claim is not generated yet: their informer must run.
	templateInformer := factory.ResourceClaimTemplates().Informer()
	d.synced = func() bool {
		return classReg.HasSynced() && sliceReg.HasSynced() && claimReg.HasSynced() && templateInformer.HasSynced()
	}
	return d, nil
}

// Notify registers what a plugin does when a pod's charge or the devices' total may have
// changed.
func (d *Devices) Notify(podChanged func(*corev1.Pod), totalChanged func(quota.Amounts)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if podChanged != nil {
		d.podChanged = append(d.podChanged, podChanged)
	}
	if totalChanged != nil {
		d.totalChanged = append(d.totalChanged, totalChanged)
		totalChanged(d.inventory.Total())
	}
}

// HasSynced says whether the view has seen every class, slice, claim and template.
func (d *Devices) HasSynced() bool { return d.synced() }

// Charge is what a pod is charged for its claims' devices.
func (d *Devices) Charge(pod *corev1.Pod) quota.PodDevices { return quota.ChargeDevices(pod, d) }

// Total is what the cluster's ResourceSlices offer.
func (d *Devices) Total() quota.Amounts { return d.inventory.Total() }

// OnNode is what the slices of one node offer.
func (d *Devices) OnNode(node string) quota.Amounts { return d.inventory.OnNode(node) }

// OfferedOnNodes is what the slices of single nodes offer, over all nodes.
func (d *Devices) OfferedOnNodes() quota.Amounts { return d.inventory.OfferedOnNodes() }

// DeviceClass returns a known DeviceClass (nil when unknown).
func (d *Devices) DeviceClass(name string) *resourceapi.DeviceClass {
	return d.inventory.DeviceClass(name)
}

// Device returns a device as its slice publishes it (nil when unknown).
func (d *Devices) Device(driver, pool, device string) *resourceapi.Device {
	return d.inventory.Device(driver, pool, device)
}

// SharesDevices says whether a class selects devices that allow several allocations.
func (d *Devices) SharesDevices(class string) bool { return d.inventory.SharesDevices(class) }

// DefaultShare is the capacity a share of a class's devices takes when its claim asks for none.
func (d *Devices) DefaultShare(class string) quota.Amounts { return d.inventory.DefaultShare(class) }

// ResourceClaim returns a claim (nil when unknown).
func (d *Devices) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	claim, err := d.claims.ResourceClaims(namespace).Get(name)
	if err != nil {
		return nil
	}
	return claim
}

// ResourceClaimTemplate returns a template (nil when unknown).
func (d *Devices) ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate {
	template, err := d.templates.ResourceClaimTemplates(namespace).Get(name)
	if err != nil {
		return nil
	}
	return template
}

func (d *Devices) notifyPod(pod *corev1.Pod) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, f := range d.podChanged {
		f(pod)
	}
}

func (d *Devices) notifyTotal() {
	total := d.inventory.Total()
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, f := range d.totalChanged {
		f(total.Clone())
	}
}

func unwrap(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

// classChanged counts the devices again, and the pods that use claims: a class created may be
// what their claims asked for, and a class's extended resource name changes their charge.
func (d *Devices) classChanged(obj any, deleted bool) {
	class, ok := unwrap(obj).(*resourceapi.DeviceClass)
	if !ok {
		return
	}
	if deleted {
		d.inventory.DeleteClass(class.Name)
	} else {
		d.inventory.SetClass(class)
	}
	d.notifyTotal()
	for _, obj := range d.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok && (len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil) {
			d.notifyPod(pod)
		}
	}
}

func (d *Devices) sliceChanged(obj any, deleted bool) {
	slice, ok := unwrap(obj).(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	if deleted {
		d.inventory.DeleteSlice(slice.Name)
	} else {
		d.inventory.SetSlice(slice)
	}
	d.notifyTotal()
}

// claimChanged re-counts the pods that use a claim: its allocation, or who reserved it first,
// changes what they are charged.
func (d *Devices) claimChanged(obj any) {
	claim, ok := unwrap(obj).(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	seen := map[types.UID]bool{}
	visit := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && !seen[pod.UID] {
			seen[pod.UID] = true
			d.notifyPod(pod)
		}
	}
	objs, _ := d.pods.ByIndex(podClaimIndex, claim.Namespace+"/"+claim.Name)
	for _, obj := range objs {
		visit(obj)
	}
	// The scheduler's claims for extended resources show in their pods' status only once the
	// pod is updated: their consumers and owners name them.
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource == "pods" {
			if obj, exists, _ := d.pods.GetByKey(claim.Namespace + "/" + ref.Name); exists {
				visit(obj)
			}
		}
	}
	for _, owner := range claim.OwnerReferences {
		if owner.Kind == "Pod" {
			if obj, exists, _ := d.pods.GetByKey(claim.Namespace + "/" + owner.Name); exists {
				visit(obj)
			}
		}
	}
}

// indexByClaim is the index function of podClaimIndex.
func indexByClaim(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, ref := range pod.Spec.ResourceClaims {
		if ref.ResourceClaimName != nil {
			keys = append(keys, pod.Namespace+"/"+*ref.ResourceClaimName)
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			keys = append(keys, pod.Namespace+"/"+*s.ResourceClaimName)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		keys = append(keys, pod.Namespace+"/"+s.ResourceClaimName)
	}
	return keys, nil
}
