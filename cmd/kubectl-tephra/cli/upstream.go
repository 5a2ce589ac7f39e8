package cli

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/groupstatus"
)

// upstreamGroups are the groups of upstream PodGroups (scheduling.k8s.io/v1beta1) of a namespace
// ("" for all), as both of Tephra's binaries read them in memory (internal/groups), with the
// status their members make them (from pods, the namespace's or more; nil: listed here only if
// there are upstream PodGroups): no object holds either. Those
// whose name a Tephra PodGroup object has (objects) are left out: the object wins. None where the
// apiserver does not serve the API.
func (o *Options) upstreamGroups(ns string, objects []schedulingv1alpha1.PodGroup, pods []corev1.Pod) ([]schedulingv1alpha1.PodGroup, error) {
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		// What the user may read of Tephra's groups is still worth showing.
		fmt.Fprintf(o.ErrOut, "Warning: upstream PodGroups (scheduling.k8s.io/v1beta1) are not shown: %v\n", err)
		return nil, nil
	}
	if apierrors.IsNotFound(err) || (err == nil && len(list.Items) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	index := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	podGroups, workloads := cache.NewIndexer(cache.MetaNamespaceKeyFunc, index), cache.NewIndexer(cache.MetaNamespaceKeyFunc, index)
	for i := range list.Items {
		if err := podGroups.Add(&list.Items[i]); err != nil {
			return nil, err
		}
	}
	wls, err := o.kube.SchedulingV1beta1().Workloads(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		fmt.Fprintf(o.ErrOut, "Warning: Workloads are not read, so upstream PodGroups show the queue of their own label or the default: %v\n", err)
	} else if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil {
		for i := range wls.Items {
			if err := workloads.Add(&wls.Items[i]); err != nil {
				return nil, err
			}
		}
	}
	if pods == nil {
		all, err := o.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		pods = all.Items
	}
	taken := map[string]bool{}
	for _, g := range objects {
		taken[g.Namespace+"/"+g.Name] = true
	}
	members := map[string][]corev1.Pod{}
	for _, pod := range pods {
		if name, ok := schedulingv1alpha1.PodGroupNameOf(&pod); ok {
			members[pod.Namespace+"/"+name] = append(members[pod.Namespace+"/"+name], pod)
		}
	}
	upstream := groups.NewUpstream(upstreamlisters.NewPodGroupLister(podGroups), upstreamlisters.NewWorkloadLister(workloads))
	holdOf := o.queueHolds(ctx)
	var out []schedulingv1alpha1.PodGroup
	for _, pg := range upstream.List(ns) {
		key := pg.Namespace + "/" + pg.Name
		if taken[key] {
			continue
		}
		g := *pg.DeepCopy()
		g.Status = groupstatus.Desired(pg, members[key], holdOf(pg), "")
		out = append(out, g)
	}
	return out, nil
}

// upstreamGroup is the group of the upstream PodGroup ns/name (upstreamGroups), nil if there is
// none.
func (o *Options) upstreamGroup(ns, name string, pods []corev1.Pod) (*schedulingv1alpha1.PodGroup, error) {
	found, err := o.upstreamGroups(ns, nil, pods)
	if err != nil {
		return nil, err
	}
	for i := range found {
		if found[i].Name == name {
			return &found[i], nil
		}
	}
	return nil, nil
}

// queueHolds says why each group's queue holds it (groupstatus.HoldOf), as the PodGroup
// controller decides it for an object: an upstream group shows Pending while its queue holds it.
// Where the user may not read the queues or a group's namespace, a group counts as admitted.
func (o *Options) queueHolds(ctx context.Context) func(*schedulingv1alpha1.PodGroup) groupstatus.Hold {
	list, err := o.tephra.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return func(*schedulingv1alpha1.PodGroup) groupstatus.Hold { return groupstatus.Hold{} }
	}
	queues := make([]*schedulingv1alpha1.Queue, len(list.Items))
	for i := range list.Items {
		queues[i] = &list.Items[i]
	}
	holds := groupstatus.NewHolds(queues)
	type namespace struct {
		labels map[string]string
		read   bool
	}
	namespaces := map[string]namespace{}
	return func(pg *schedulingv1alpha1.PodGroup) groupstatus.Hold {
		n, asked := namespaces[pg.Namespace]
		if !asked {
			ns, err := o.kube.CoreV1().Namespaces().Get(ctx, pg.Namespace, metav1.GetOptions{})
			if err == nil {
				n = namespace{labels: ns.Labels, read: true}
			}
			namespaces[pg.Namespace] = n
		}
		if !n.read {
			return groupstatus.Hold{}
		}
		return holds.Of(pg, n.labels)
	}
}
