// Package groups is the PodGroups Tephra schedules by, as both binaries and kubectl tephra read
// them: the PodGroup objects; upstream Kubernetes' PodGroups (scheduling.k8s.io/v1beta1),
// translated in memory (Upstream); and the groups of one pod that a pod carries itself
// (v1alpha1.GroupOnPod). No object is written for the last two. Code that reads a group by name
// reads it here, so that it need not know which of the three it has. (Queue accounting reads a
// carried group from its pod: quota.ChargeOf.)
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

// NewLister returns a PodGroupLister whose Get finds a group's PodGroup object, else its upstream
// PodGroup's translation (upstream nil: none are read), else the group a pod of it carries (pods
// nil: none are read). pods is a pod informer's indexer with ledger.PodGroupIndex. A Tephra object
// wins over an upstream PodGroup of the same name, which wins over what a pod carries. List lists
// the objects only: nothing lists groups to schedule them.
func NewLister(objects schedulinglisters.PodGroupLister, pods cache.Indexer, upstream *Upstream) schedulinglisters.PodGroupLister {
	return lister{objects: objects, pods: pods, upstream: upstream}
}

type lister struct {
	objects  schedulinglisters.PodGroupLister
	pods     cache.Indexer
	upstream *Upstream
}

func (l lister) List(selector labels.Selector) ([]*v1alpha1.PodGroup, error) {
	return l.objects.List(selector)
}

func (l lister) PodGroups(namespace string) schedulinglisters.PodGroupNamespaceLister {
	return namespaced{objects: l.objects.PodGroups(namespace), pods: l.pods, upstream: l.upstream, namespace: namespace}
}

type namespaced struct {
	objects   schedulinglisters.PodGroupNamespaceLister
	pods      cache.Indexer
	upstream  *Upstream
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
	if n.upstream != nil {
		if pg, found, upErr := n.upstream.lookup(n.namespace, name); found || upErr != nil {
			return pg, upErr
		}
	}
	if n.pods == nil {
		return nil, err
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
