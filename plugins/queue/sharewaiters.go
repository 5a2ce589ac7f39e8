package queue

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// shareWaiters are the pods this profile's PostFilter (or PodGroupPostFilter) turned away, by
// leaf queue: the pods that may wait for their queue's deserved share to rise, to reclaim then
// (queueShareRose). A pod refused by TephraQueue's PreFilter needs no such help: the plugin's
// Queue event brings it back on any Queue change; nor does a pod never refused, which waits for
// nothing a share decides.
//
// Bringing back every pending pod of the queue instead meant reading every pod of the cluster,
// and resolving each pending one's queue, on each Queue status that showed a share risen: with
// 9000 gang members arriving, the shares rose on nearly every status the controller wrote, and
// that was 7 % of make bench-upstream's 3000-gang run.
type shareWaiters struct {
	mu sync.Mutex
	// byQueue holds the pods by leaf queue and key; queueOf finds a pod's queue by UID.
	byQueue map[string]map[types.UID]types.NamespacedName
	queueOf map[types.UID]string
}

// add remembers pod as turned away in queue (replacing the queue it had).
func (w *shareWaiters) add(queue string, pod *corev1.Pod) {
	if queue == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(pod.UID)
	if w.byQueue == nil {
		w.byQueue, w.queueOf = map[string]map[types.UID]types.NamespacedName{}, map[types.UID]string{}
	}
	if w.byQueue[queue] == nil {
		w.byQueue[queue] = map[types.UID]types.NamespacedName{}
	}
	w.byQueue[queue][pod.UID] = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.queueOf[pod.UID] = queue
}

// forget drops a pod placed (Reserve) or deleted.
func (w *shareWaiters) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(uid)
}

func (w *shareWaiters) forgetLocked(uid types.UID) {
	queue, ok := w.queueOf[uid]
	if !ok {
		return
	}
	delete(w.queueOf, uid)
	delete(w.byQueue[queue], uid)
	if len(w.byQueue[queue]) == 0 {
		delete(w.byQueue, queue)
	}
}

// podDeleted is the pod informer's DeleteFunc.
func (w *shareWaiters) podDeleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		w.forget(pod.UID)
	}
}

// take removes the pods of the named queues and returns those still pending, by key, as
// Handle.Activate takes them. A pod turned away again is added again by its next PostFilter.
func (w *shareWaiters) take(queues map[string]bool, pods corelisters.PodLister) map[string]*corev1.Pod {
	w.mu.Lock()
	var keys []types.NamespacedName
	var uids []types.UID
	for queue := range queues {
		for uid, key := range w.byQueue[queue] {
			keys, uids = append(keys, key), append(uids, uid)
			delete(w.queueOf, uid)
		}
		delete(w.byQueue, queue)
	}
	w.mu.Unlock()
	pending := map[string]*corev1.Pod{}
	for i, key := range keys {
		pod, err := pods.Pods(key.Namespace).Get(key.Name)
		if err != nil || pod.UID != uids[i] || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		pending[key.String()] = pod
	}
	return pending
}
