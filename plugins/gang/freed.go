package gang

import (
	corev1 "k8s.io/api/core/v1"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// A group's failed capacity check is kept for its other members (keptUnfit), so that a gang of
// hundreds does not check the cluster once per member. Queueing hints forget it when an event may
// let the group fit, but they run only for members in the unschedulable pool: a member already in
// the active queue when a pod is deleted would be refused on the kept verdict, then wait for the
// next event. So the tracker also counts the events that free capacity, from the informers, and a
// verdict made before the last of them is not kept.

// freedCapacityHandler counts, from the pod informer, the pods that stop holding their node's
// capacity: bound pods deleted, or seen ended.
func (t *tracker) freedCapacityHandler() cache.ResourceEventHandler {
	holds := func(obj any) bool {
		pod, ok := obj.(*corev1.Pod)
		return ok && pod.Spec.NodeName != "" && !v1alpha1.IsSystemPod(pod) &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if holds(oldObj) && !holds(newObj) {
				t.freed.Add(1)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if holds(obj) {
				t.freed.Add(1)
			}
		},
	}
}

// freedNodeCapacityHandler counts, from the node informer, the nodes added and those whose
// allocatable changed.
func (t *tracker) freedNodeCapacityHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.freed.Add(1) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && !quotav1.Equals(o.Status.Allocatable, n.Status.Allocatable) {
				t.freed.Add(1)
			}
		},
	}
}
