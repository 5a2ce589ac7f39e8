package setup

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// EvictionListener is told that TephraQueue's PostFilter is evicting pods for pod (reclaim or
// preemption), in the scheduling cycle that chose the victims.
type EvictionListener func(ctx context.Context, pod *corev1.Pod)

var (
	evictionsMu       sync.Mutex
	evictionListeners = map[fwk.Handle][]EvictionListener{}
)

// OnEvictionsFor registers a listener for the evictions made for the pods of handle's profile
// (each profile has its own handle, shared by its plugins).
//
// TephraGang holds a group's members back while one of them (the pilot) is tried, and lets them
// go once pods are evicted for the group: each member needs evictions of its own. It must learn
// of an eviction in the cycle that made it. The pod's nomination, as the pod informer shows it
// later, says too little too late: it comes at no fixed time relative to the group's other
// decisions (the eviction may be made in the very cycle that found the group unfit, before any
// member is its pilot), it does not change when a pod evicts again on the node it is nominated
// to, and one left from an earlier attempt says nothing about now.
func OnEvictionsFor(handle fwk.Handle, listener EvictionListener) {
	evictionsMu.Lock()
	defer evictionsMu.Unlock()
	evictionListeners[handle] = append(evictionListeners[handle], listener)
}

// EvictingFor tells the listeners of handle's profile that pods are being evicted for pod.
func EvictingFor(ctx context.Context, handle fwk.Handle, pod *corev1.Pod) {
	evictionsMu.Lock()
	listeners := evictionListeners[handle]
	evictionsMu.Unlock()
	for _, listener := range listeners {
		listener(ctx, pod)
	}
}
