package ledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Groups is what charging a pod reads of PodGroups, as an informer shows them.
type Groups interface {
	// Get returns a PodGroup, nil when it does not exist.
	Get(namespace, name string) *v1alpha1.PodGroup
	// PodsOf returns the pods that name a PodGroup.
	PodsOf(namespace, name string) []*corev1.Pod
}

// Feed keeps a ledger current from informer events of pods, nodes and PodGroups, one object at a
// time: tephra-scheduler's TephraQueue and tephra-controllers' Queue controller feed theirs the
// same way, so that both count every queue by the same rules and from the same events.
type Feed struct {
	ledger *Ledger
	groups Groups
}

// NewFeed returns the feed of l, which reads PodGroups from groups and decides from them which
// groups are short of their minimum.
func NewFeed(l *Ledger, groups Groups) *Feed {
	f := &Feed{ledger: l, groups: groups}
	l.MinMember = f.minimum
	return f
}

// Ledger is the ledger fed.
func (f *Feed) Ledger() *Ledger { return f.ledger }

// ObservePod records a pod (a *corev1.Pod, or anything else, which is ignored).
func (f *Feed) ObservePod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		f.ledger.Observe(pod, f.Queue)
	}
}

// RefreshPod records a known pod again, whose charge may have changed (Ledger.Refresh).
func (f *Feed) RefreshPod(pod *corev1.Pod) { f.ledger.Refresh(pod, f.Queue) }

// ForgetPod drops a deleted pod (or its tombstone).
func (f *Feed) ForgetPod(obj any) {
	if pod, ok := unwrap(obj).(*corev1.Pod); ok {
		f.ledger.Forget(pod.UID, pod)
	}
}

// ObserveNode records a node's allocatable, or that it is gone.
func (f *Feed) ObserveNode(obj any, deleted bool) {
	node, ok := unwrap(obj).(*corev1.Node)
	if !ok {
		return
	}
	if deleted {
		f.ledger.SetNode(node.Name, nil)
		return
	}
	f.ledger.SetNode(node.Name, node.Status.Allocatable)
}

// GroupAdded charges the pods that named a PodGroup before it existed, and charges again those
// charged by another group of the name: the one they carried (v1alpha1.GroupOnPod), or an
// upstream PodGroup's, over which a Tephra object wins. Its minimum may differ from theirs.
func (f *Feed) GroupAdded(obj any) {
	pg, ok := obj.(*v1alpha1.PodGroup)
	if !ok {
		return
	}
	key := pg.Namespace + "/" + pg.Name
	f.ledger.GroupAdded(key, f.Queue)
	pods := f.groups.PodsOf(pg.Namespace, pg.Name)
	for _, pod := range pods {
		f.ledger.Refresh(pod, f.Queue)
	}
	if len(pods) > 0 {
		f.ledger.MinimumChanged(key)
	}
}

// GroupUpdated follows a PodGroup's change: a group moved to another queue takes its pods' usage
// along, and a changed minimum changes which groups are short. It says whether the change may
// let the group's pods go on. Doing it twice changes nothing.
func (f *Feed) GroupUpdated(oldObj, newObj any) bool {
	old, ok1 := oldObj.(*v1alpha1.PodGroup)
	pg, ok2 := newObj.(*v1alpha1.PodGroup)
	if !ok1 || !ok2 {
		return false
	}
	changed := false
	if old.Spec.Queue != pg.Spec.Queue {
		f.ReobserveGroup(pg.Namespace, pg.Name)
		changed = true
	}
	if old.Spec.MinMember != pg.Spec.MinMember {
		f.ledger.MinimumChanged(pg.Namespace + "/" + pg.Name)
		changed = true
	}
	return changed || !equality.Semantic.DeepEqual(old.Spec.MinResources, pg.Spec.MinResources)
}

// GroupDeleted leaves a deleted group's pods counted nowhere until it exists again (GroupAdded).
func (f *Feed) GroupDeleted(obj any) {
	if pg, ok := unwrap(obj).(*v1alpha1.PodGroup); ok {
		f.ReobserveGroup(pg.Namespace, pg.Name)
	}
}

// ReobserveGroup records a group's pods again, with the group's queue as it is now (those the
// ledger holds in the version the informer shows: Ledger.Refresh).
func (f *Feed) ReobserveGroup(namespace, name string) {
	for _, pod := range f.groups.PodsOf(namespace, name) {
		f.ledger.Refresh(pod, f.Queue)
	}
}

// Queue returns the queue of a PodGroup, "" when it does not exist.
func (f *Feed) Queue(namespace, name string) string {
	pg := f.groups.Get(namespace, name)
	switch {
	case pg == nil:
		return ""
	case pg.Spec.Queue == "":
		return v1alpha1.DefaultQueue
	}
	return pg.Spec.Queue
}

// minimum returns a group's minMember ("namespace/name"), 0 when it does not exist.
func (f *Feed) minimum(group string) int {
	namespace, name, _ := cache.SplitMetaNamespaceKey(group)
	if pg := f.groups.Get(namespace, name); pg != nil {
		return int(pg.Spec.MinMember)
	}
	return 0
}

// PodHandlers, NodeHandlers and GroupHandlers feed the ledger from an informer's events.
func (f *Feed) PodHandlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    f.ObservePod,
		UpdateFunc: func(_, obj any) { f.ObservePod(obj) },
		DeleteFunc: f.ForgetPod,
	}
}

func (f *Feed) NodeHandlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.ObserveNode(obj, false) },
		UpdateFunc: func(_, obj any) { f.ObserveNode(obj, false) },
		DeleteFunc: func(obj any) { f.ObserveNode(obj, true) },
	}
}

func (f *Feed) GroupHandlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    f.GroupAdded,
		UpdateFunc: func(oldObj, newObj any) { f.GroupUpdated(oldObj, newObj) },
		DeleteFunc: f.GroupDeleted,
	}
}

func unwrap(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

// PodGroupIndex indexes a pod informer by "namespace/group", for Groups.PodsOf.
const PodGroupIndex = "tephra.podgroup"

// PodsIndexedByGroup returns the pods of a group from a pod indexer with PodGroupIndex.
func PodsIndexedByGroup(pods cache.Indexer, namespace, name string) []*corev1.Pod {
	objs, _ := pods.ByIndex(PodGroupIndex, namespace+"/"+name)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out
}

// IndexByGroup is the index function of PodGroupIndex.
func IndexByGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	name, ok := v1alpha1.PodGroupNameOf(pod)
	if !ok {
		return nil, nil
	}
	return []string{pod.Namespace + "/" + name}, nil
}
