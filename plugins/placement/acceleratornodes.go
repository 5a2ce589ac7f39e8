package placement

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// acceleratorNodes knows, from the node informer, which nodes offer an accelerator in their
// allocatable: on a cluster with none, PreScore skips a pod that asks for none without looking at
// every node for one (5000 map lookups per pod in make bench-upstream's 5000-node workloads).
type acceleratorNodes struct {
	accelerators []corev1.ResourceName
	// synced says whether the handler has seen the informer's first list; until then the nodes
	// are looked at, as without this.
	synced func() bool

	mu    sync.Mutex
	names map[string]struct{}
}

func newAcceleratorNodes(accelerators []corev1.ResourceName) *acceleratorNodes {
	return &acceleratorNodes{accelerators: accelerators, names: map[string]struct{}{}}
}

// watch keeps the set from informer's events.
func (a *acceleratorNodes) watch(informer cache.SharedIndexInformer) error {
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observe(obj, false) },
		UpdateFunc: func(_, obj any) { a.observe(obj, false) },
		DeleteFunc: func(obj any) { a.observe(obj, true) },
	})
	if err != nil {
		return err
	}
	a.synced = reg.HasSynced
	return nil
}

func (a *acceleratorNodes) observe(obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	offers := false
	if !deleted {
		for _, name := range a.accelerators {
			if q, ok := node.Status.Allocatable[name]; ok && q.Sign() > 0 {
				offers = true
				break
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if offers {
		a.names[node.Name] = struct{}{}
	} else {
		delete(a.names, node.Name)
	}
}

// noneKnown says whether the informer has been listed and no node offers an accelerator.
func (a *acceleratorNodes) noneKnown() bool {
	if a == nil || a.synced == nil || !a.synced() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.names) == 0
}
