package queue

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// podClaimIndex indexes pods by the ResourceClaims they use ("namespace/claim"), named directly
// or generated from a template, so that a claim's change re-counts exactly its pods.
const podClaimIndex = "tephra.dev/resourceclaim"

// devices is the scheduler's view of Dynamic Resource Allocation for the queues: the devices the
// ResourceSlices offer per DeviceClass (the inventory), and the claims and templates pods' charges
// are read from (quota.ChargeDevices). It is the quota.DeviceLookup of the ledger.
type devices struct {
	inventory *quota.DeviceInventory
	claims    resourcelisters.ResourceClaimLister
	templates resourcelisters.ResourceClaimTemplateLister
}

var _ quota.DeviceLookup = &devices{}

func (d *devices) DeviceClass(name string) *resourceapi.DeviceClass {
	return d.inventory.DeviceClass(name)
}

func (d *devices) Device(driver, pool, device string) *resourceapi.Device {
	return d.inventory.Device(driver, pool, device)
}

func (d *devices) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	claim, err := d.claims.ResourceClaims(namespace).Get(name)
	if err != nil {
		return nil
	}
	return claim
}

func (d *devices) ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate {
	template, err := d.templates.ResourceClaimTemplates(namespace).Get(name)
	if err != nil {
		return nil
	}
	return template
}

// watchDevices feeds the inventory and the ledger from the scheduler's informers for
// DeviceClasses, ResourceSlices and ResourceClaims, and returns whether they have synced.
func (a *accounts) watchDevices(handle fwk.Handle) (func() bool, error) {
	factory := handle.SharedInformerFactory().Resource().V1()
	d := &devices{
		inventory: quota.NewDeviceInventory(),
		claims:    factory.ResourceClaims().Lister(),
		templates: factory.ResourceClaimTemplates().Lister(),
	}
	a.devices = d
	a.ledger.devices = d
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if _, indexed := podInformer.GetIndexer().GetIndexers()[podClaimIndex]; !indexed {
		if err := podInformer.AddIndexers(cache.Indexers{podClaimIndex: indexByClaim}); err != nil {
			return nil, fmt.Errorf("indexing pods by resource claim: %w", err)
		}
	}
	classReg, err := factory.DeviceClasses().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.classChanged(obj, false) },
		UpdateFunc: func(_, obj any) { a.classChanged(obj, false) },
		DeleteFunc: func(obj any) { a.classChanged(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	sliceReg, err := factory.ResourceSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.sliceChanged(obj, false) },
		UpdateFunc: func(_, obj any) { a.sliceChanged(obj, false) },
		DeleteFunc: func(obj any) { a.sliceChanged(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	claimReg, err := factory.ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.claimChanged,
		UpdateFunc: func(_, obj any) { a.claimChanged(obj) },
		DeleteFunc: a.claimChanged,
	})
	if err != nil {
		return nil, err
	}
	// Templates are read when a pod's claim is not generated yet; the informer must run.
	templateInformer := factory.ResourceClaimTemplates().Informer()
	return func() bool {
		return classReg.HasSynced() && sliceReg.HasSynced() && claimReg.HasSynced() && templateInformer.HasSynced()
	}, nil
}

func unwrap(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

// classChanged counts the devices again, and the pods that use claims: a class created may be
// what their claims asked for, and a class's extended resource name changes their charge.
func (a *accounts) classChanged(obj any, deleted bool) {
	class, ok := unwrap(obj).(*resourceapi.DeviceClass)
	if !ok {
		return
	}
	if deleted {
		a.devices.inventory.DeleteClass(class.Name)
	} else {
		a.devices.inventory.SetClass(class)
	}
	a.ledger.setDevices(a.devices.inventory.Total())
	for _, obj := range a.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok && (len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil) {
			a.observePod(pod)
		}
	}
}

func (a *accounts) sliceChanged(obj any, deleted bool) {
	slice, ok := unwrap(obj).(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	if deleted {
		a.devices.inventory.DeleteSlice(slice.Name)
	} else {
		a.devices.inventory.SetSlice(slice)
	}
	a.ledger.setDevices(a.devices.inventory.Total())
}

// claimChanged counts the pods that use a claim again: its allocation, or who reserved it first,
// changes what they are charged.
func (a *accounts) claimChanged(obj any) {
	claim, ok := unwrap(obj).(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	seen := map[types.UID]bool{}
	objs, _ := a.pods.ByIndex(podClaimIndex, claim.Namespace+"/"+claim.Name)
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			seen[pod.UID] = true
			a.observePod(pod)
		}
	}
	// The scheduler's claims for extended resources are named in the pod's status only.
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource != "pods" || seen[ref.UID] {
			continue
		}
		if obj, exists, _ := a.pods.GetByKey(claim.Namespace + "/" + ref.Name); exists {
			a.observePod(obj)
		}
	}
	for _, owner := range claim.OwnerReferences {
		if owner.Kind != "Pod" || seen[owner.UID] {
			continue
		}
		if obj, exists, _ := a.pods.GetByKey(claim.Namespace + "/" + owner.Name); exists {
			a.observePod(obj)
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

// devicesVerdict says why a pod's claims keep it out of its queue for good ("" if they do not):
// a request for all the devices of a class that a queue of its ancestry limits, since the count
// is known only once allocated, and a queue cannot admit what it cannot count. Claims that
// cannot be accounted (a DeviceClass that does not exist) are reported on the pod; DRA holds such
// pods itself.
func (q *Queue) devicesVerdict(pod *corev1.Pod, leaf *quota.Node, c charge) string {
	if len(c.problems) > 0 {
		q.podEvent(pod, v1alpha1.ReasonDevicesNotAccounted, fmt.Sprintf("%s: %s; the pod's queue does not count those devices", v1alpha1.ReasonDevicesNotAccounted, strings.Join(c.problems, "; ")))
	}
	for _, className := range c.uncounted {
		class := q.accounts.devices.DeviceClass(className)
		for _, n := range leaf.Ancestry() {
			if name := quota.LimitOnClass(n.Capability, className, class); name != "" {
				msg := fmt.Sprintf("%s: a claim asks for all the devices of DeviceClass %q (allocationMode: All), and queue %q limits them (%s): their count is known only once allocated, so the queue cannot admit the pod; ask for an exact count", v1alpha1.ReasonNeverFits, className, n.Name, name)
				q.podEvent(pod, v1alpha1.ReasonNeverFits, msg)
				return msg
			}
		}
	}
	return ""
}
