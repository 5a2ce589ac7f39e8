package groups

import (
	"fmt"
	"sync"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// UpstreamGroupVersion is upstream Kubernetes' gang API, which Tephra reads where it is served.
var UpstreamGroupVersion = schedulingv1beta1.SchemeGroupVersion

// Upstream is the upstream PodGroups (scheduling.k8s.io/v1beta1) as the groups Tephra schedules
// them by: each translated in memory (v1alpha1.FromUpstream), with the queue label of the Workload
// it was made from. No Tephra object is written for them. A PodGroup being deleted, one of a
// CompositePodGroup (whose own group stands for it) and one that cannot be translated are no
// group: their pods wait as for a group that does not exist.
type Upstream struct {
	podGroups upstreamlisters.PodGroupLister
	// workloads is nil when Workloads are not served: no queue is read from them.
	workloads upstreamlisters.WorkloadLister
	// translated keeps the last translation of each PodGroup ("namespace/name"), which the
	// scheduler reads many times a cycle: it is made again only when the PodGroup or its Workload
	// is another version (informers replace objects, never change them).
	translated sync.Map
}

type translation struct {
	up       *schedulingv1beta1.PodGroup
	workload *schedulingv1beta1.Workload
	group    *v1alpha1.PodGroup
}

// NewUpstream reads upstream PodGroups from podGroups and, unless it is nil, the Workloads they
// were made from from workloads.
func NewUpstream(podGroups upstreamlisters.PodGroupLister, workloads upstreamlisters.WorkloadLister) *Upstream {
	return &Upstream{podGroups: podGroups, workloads: workloads}
}

// UpstreamServed says whether the apiserver serves scheduling.k8s.io/v1beta1 podgroups (it does
// only with the GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1beta1=true),
// and workloads beside them.
func UpstreamServed(config *rest.Config) (podGroups, workloads bool, err error) {
	served, err := ServedResources(config, UpstreamGroupVersion.String())
	return served["podgroups"], served["workloads"], err
}

// ServedResources lists the resources the apiserver serves in a group version (none when it
// does not serve the group version).
func ServedResources(config *rest.Config, groupVersion string) (map[string]bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	list, err := dc.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", groupVersion, err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	return served, nil
}

// Get returns the group of an upstream PodGroup, a NotFound error when there is none.
func (u *Upstream) Get(namespace, name string) (*v1alpha1.PodGroup, error) {
	group, found, err := u.lookup(namespace, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, apierrors.NewNotFound(v1alpha1.Resource("podgroup"), name)
	}
	return group, nil
}

// lookup is Get without the NotFound error, which the scheduler, asking for groups many times a
// cycle, would build for every group that is not upstream's.
func (u *Upstream) lookup(namespace, name string) (*v1alpha1.PodGroup, bool, error) {
	up, err := u.podGroups.PodGroups(namespace).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			u.translated.Delete(namespace + "/" + name)
			return nil, false, nil
		}
		return nil, false, err
	}
	key := namespace + "/" + name
	workload := u.workloadOf(up)
	if t, ok := u.translated.Load(key); ok {
		if t := t.(*translation); t.up == up && t.workload == workload {
			return t.group, t.group != nil, nil
		}
	}
	group := translate(up, workload)
	u.translated.Store(key, &translation{up: up, workload: workload, group: group})
	return group, group != nil, nil
}

// Translate is the group of an upstream PodGroup, nil when it is none; invalid says why one that
// cannot be translated is not (FromUpstream).
func (u *Upstream) Translate(up *schedulingv1beta1.PodGroup) (group *v1alpha1.PodGroup, invalid string) {
	if up.DeletionTimestamp != nil || v1alpha1.IsCompositeChild(up) {
		return nil, ""
	}
	return v1alpha1.FromUpstream(up, u.workloadOf(up))
}

func translate(up *schedulingv1beta1.PodGroup, workload *schedulingv1beta1.Workload) *v1alpha1.PodGroup {
	if up.DeletionTimestamp != nil || v1alpha1.IsCompositeChild(up) {
		return nil
	}
	group, _ := v1alpha1.FromUpstream(up, workload)
	return group
}

// workloadOf is the Workload an upstream PodGroup was made from, nil when it has none, it does
// not exist, or Workloads are not read.
func (u *Upstream) workloadOf(up *schedulingv1beta1.PodGroup) *schedulingv1beta1.Workload {
	name := v1alpha1.UpstreamWorkloadName(up)
	if name == "" || u.workloads == nil {
		return nil
	}
	w, err := u.workloads.Workloads(up.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return w
}

// List returns the groups of the upstream PodGroups of a namespace ("" for all). Listing all
// forgets the translations of PodGroups that are gone, which a reader without the informer's
// handlers (Handler) keeps until then.
func (u *Upstream) List(namespace string) []*v1alpha1.PodGroup {
	var ups []*schedulingv1beta1.PodGroup
	if namespace == "" {
		ups, _ = u.podGroups.List(labels.Everything())
	} else {
		ups, _ = u.podGroups.PodGroups(namespace).List(labels.Everything())
	}
	out := make([]*v1alpha1.PodGroup, 0, len(ups))
	listed := make(map[string]bool, len(ups))
	for _, up := range ups {
		listed[up.Namespace+"/"+up.Name] = true
		if group, err := u.Get(up.Namespace, up.Name); err == nil {
			out = append(out, group)
		}
	}
	if namespace == "" {
		u.translated.Range(func(key, _ any) bool {
			if !listed[key.(string)] {
				u.translated.Delete(key)
			}
			return true
		})
	}
	return out
}

// ObjectLister lists Tephra's PodGroup objects.
type ObjectLister = schedulinglisters.PodGroupLister

// Handler turns the events of the informer of upstream PodGroups into events of their groups for
// h, a handler of Tephra's PodGroups: a PodGroup that becomes a group is added, one that stops
// being one (deleted, being deleted, no longer translatable) is deleted, and a change of its
// translation is an update. objects are Tephra's PodGroup objects (nil: none): an upstream
// PodGroup whose name a Tephra object has is left to the object's own events, as the object wins.
func (u *Upstream) Handler(h cache.ResourceEventHandler, objects ObjectLister) cache.ResourceEventHandlerFuncs {
	shadowed := func(namespace, name string) bool {
		if objects == nil {
			return false
		}
		_, err := objects.PodGroups(namespace).Get(name)
		return err == nil
	}
	translated := func(obj any) *v1alpha1.PodGroup {
		up, ok := obj.(*schedulingv1beta1.PodGroup)
		if !ok || shadowed(up.Namespace, up.Name) {
			return nil
		}
		group, _ := u.Translate(up)
		return group
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { transition(h, nil, translated(obj)) },
		UpdateFunc: func(oldObj, newObj any) { transition(h, translated(oldObj), translated(newObj)) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if up, ok := obj.(*schedulingv1beta1.PodGroup); ok {
				u.translated.Delete(up.Namespace + "/" + up.Name)
				// One being deleted stopped being a group at that update.
				if group, _ := u.Translate(up); group != nil && !shadowed(up.Namespace, up.Name) {
					h.OnDelete(group)
				}
			}
		},
	}
}

// WorkloadHandler turns the events of the informer of Workloads into updates, for h, of the
// groups of the upstream PodGroups made from them whose queue they change.
func (u *Upstream) WorkloadHandler(h cache.ResourceEventHandler, objects ObjectLister) cache.ResourceEventHandlerFuncs {
	changed := func(oldObj, newObj any) {
		old, _ := oldObj.(*schedulingv1beta1.Workload)
		w, _ := newObj.(*schedulingv1beta1.Workload)
		some := w
		if some == nil {
			some = old
		}
		if some == nil || (old != nil && w != nil && old.Labels[v1alpha1.QueueLabel] == w.Labels[v1alpha1.QueueLabel]) {
			return
		}
		ups, _ := u.podGroups.PodGroups(some.Namespace).List(labels.Everything())
		for _, up := range ups {
			if v1alpha1.UpstreamWorkloadName(up) != some.Name || up.DeletionTimestamp != nil || v1alpha1.IsCompositeChild(up) {
				continue
			}
			if objects != nil {
				if _, err := objects.PodGroups(up.Namespace).Get(up.Name); err == nil {
					continue
				}
			}
			before, _ := v1alpha1.FromUpstream(up, old)
			after, _ := v1alpha1.FromUpstream(up, w)
			transition(h, before, after)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { changed(nil, obj) },
		UpdateFunc: changed,
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			changed(obj, nil)
		},
	}
}

// transition tells h how a group changed: added (old nil), deleted (group nil) or updated.
func transition(h cache.ResourceEventHandler, old, group *v1alpha1.PodGroup) {
	switch {
	case old == nil && group != nil:
		h.OnAdd(group, false)
	case old != nil && group == nil:
		h.OnDelete(old)
	case old != nil:
		h.OnUpdate(old, group)
	}
}
