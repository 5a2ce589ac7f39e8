// Package groups is the PodGroups Tephra schedules by, as tephra-scheduler's plugins and kubectl
// tephra read them: the PodGroup objects, and the groups of one pod that a pod carries itself
// (v1alpha1.GroupOnPod), for which no object is written. Code that reads a group by name reads it
// here, so that it need not know which of the two it has. (Queue accounting needs no lookup:
// quota.ChargeOf reads a carried group from its pod.)
package groups

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
)

// NewLister returns a PodGroupLister whose Get finds a group's PodGroup object, else the group
// a pod of it carries. pods is a pod informer's indexer with ledger.PodGroupIndex. List lists
// the objects only: nothing lists groups to schedule them.
func NewLister(objects schedulinglisters.PodGroupLister, pods cache.Indexer) schedulinglisters.PodGroupLister {
	return lister{objects: objects, pods: pods}
}

type lister struct {
	objects schedulinglisters.PodGroupLister
	pods    cache.Indexer
}

func (l lister) List(selector labels.Selector) ([]*v1alpha1.PodGroup, error) {
	return l.objects.List(selector)
}

func (l lister) PodGroups(namespace string) schedulinglisters.PodGroupNamespaceLister {
	return namespaced{objects: l.objects.PodGroups(namespace), pods: l.pods, namespace: namespace}
}

type namespaced struct {
	objects   schedulinglisters.PodGroupNamespaceLister
	pods      cache.Indexer
	namespace string
}

func (n namespaced) List(selector labels.Selector) ([]*v1alpha1.PodGroup, error) {
	return n.objects.List(selector)
}

func (n namespaced) Get(name string) (*v1alpha1.PodGroup, error) {
	pg, err := n.objects.Get(name)
	if !apierrors.IsNotFound(err) {
		return pg, err
	}
	if carried := OnPods(ledger.PodsIndexedByGroup(n.pods, n.namespace, name)); carried != nil {
		return carried, nil
	}
	return nil, err
}

// OnPods returns the group of one that one of a group's pods carries, nil if none does. A pod
// being deleted carries its group only when no live pod of the group does: a Job's pod and the
// one that replaces it may both exist for a while, and the group is the new one's.
func OnPods(pods []*corev1.Pod) *v1alpha1.PodGroup {
	var found *v1alpha1.PodGroup
	for _, pod := range pods {
		pg, ok := v1alpha1.GroupOnPod(pod)
		if !ok {
			continue
		}
		if pod.DeletionTimestamp == nil {
			return pg
		}
		found = pg
	}
	return found
}
