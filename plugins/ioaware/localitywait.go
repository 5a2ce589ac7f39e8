package ioaware

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/datasets"
)

// Delay scheduling (Zaharia et al., EuroSys 2010): a pod that prefers its data, when no node
// that caches it has room, waits up to localityWait for one before it takes room elsewhere. A
// pull of hundreds of gigabytes costs minutes, and where jobs end often a node that caches the
// data frees room sooner. The pod is kept off the other nodes by Filter, as a pod that requires
// its data is; it is tried again when room frees (NodeResourcesFit's hint) or a node comes to
// cache its data, and when its wait is over. The wait is counted from the first cycle that kept
// it off: a pod its queue held back for an hour still waits for its data once it may run.

// localityWaits are the pods that wait for their data.
type localityWaits struct {
	wait time.Duration
	now  func() time.Time
	// activate tries a pod again at once (the framework's Activate); nil in unit tests.
	activate func(pod *corev1.Pod)

	mu sync.Mutex
	// since is when each pod, by UID, began to wait: kept until it is bound or deleted, so that
	// its wait is not begun again by a later cycle.
	since map[types.UID]time.Time
}

func newLocalityWaits(wait time.Duration, activate func(*corev1.Pod)) *localityWaits {
	return &localityWaits{wait: wait, now: time.Now, activate: activate, since: map[types.UID]time.Time{}}
}

// until returns when the pod's wait ends, beginning it, and the timer that tries the pod again
// then, if it has not begun.
func (w *localityWaits) until(pod *corev1.Pod) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	since, ok := w.since[pod.UID]
	if !ok {
		since = w.now()
		w.since[pod.UID] = since
		if w.activate != nil {
			time.AfterFunc(w.wait, func() {
				if w.has(pod.UID) {
					w.activate(pod)
				}
			})
		}
	}
	return since.Add(w.wait)
}

// has says whether the pod began to wait and is not bound yet.
func (w *localityWaits) has(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.since[uid]
	return ok
}

// forget drops a pod that is bound or deleted.
func (w *localityWaits) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.since, uid)
}

// podHandler forgets the pods that are bound or deleted.
func (w *localityWaits) podHandler() cache.ResourceEventHandlerFuncs {
	gone := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			w.forget(pod.UID)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, newObj any) {
			if pod, ok := newObj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
				w.forget(pod.UID)
			}
		},
		DeleteFunc: gone,
	}
}

// waitsForData says until when the pod waits for a node that caches its data: zero when it does
// not. It waits when it prefers the datasets it declares, is in no gang (TephraGang chooses a
// gang's domain for its data), some node caches all of them, and its wait is not over.
func (p *IO) waitsForData(pod *corev1.Pod, d *demand, nodes []fwk.NodeInfo) time.Time {
	if p.waits == nil || d.Locality != datasets.Preferred || d.None() || inGang(pod) || !someNodeCaches(pod, nodes, d) {
		return time.Time{}
	}
	until := p.waits.until(pod)
	if !p.waits.now().Before(until) {
		return time.Time{}
	}
	return until
}

// inGang says whether the pod is a member of a group that has a PodGroup: a pod that carries its
// group of one is not.
func inGang(pod *corev1.Pod) bool {
	_, in := v1alpha1.PodGroupNameOf(pod)
	return in && pod.Annotations[v1alpha1.GroupOnPodAnnotation] != "true"
}

// someNodeCaches says whether a node that the pod's node selector and required affinity allow
// caches all its data: a pod kept from the cache nodes by its own constraints has nothing to wait
// for.
func someNodeCaches(pod *corev1.Pod, nodes []fwk.NodeInfo, d *demand) bool {
	var allowed nodeaffinity.RequiredNodeAffinity
	read := false
	for _, n := range nodes {
		node := n.Node()
		if node == nil {
			continue
		}
		if _, missing := d.CachedOn(node.Labels); len(missing) > 0 {
			continue
		}
		if !read {
			allowed, read = nodeaffinity.GetRequiredNodeAffinity(pod), true
		}
		if ok, _ := allowed.Match(node); ok {
			return true
		}
	}
	return false
}

// waitingStatus is Filter's answer on a node that does not cache all of a waiting pod's data:
// UnschedulableAndUnresolvable, so that no preemption is tried there.
func (p *IO) waitingStatus(d *demand) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"node(s) do not cache all the datasets the pod reads (%s); it waits up to %s for a node that does (TephraIO localityWait)",
		strings.Join(d.names(), ", "), p.waits.wait))
}
