package gang

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/quota"
)

// jobShares orders jobs of equal priority by their dominant resource share (DRF): the job that
// runs the smallest share of the cluster's most contended resource goes first. A share changes
// as pods bind, but the scheduler's active queue is a heap whose order must not change under it:
// so each queued pod's share is frozen when it enters the queue (its queue timestamp) and only
// recomputed when it enters again.
type jobShares struct {
	mu     sync.Mutex
	frozen map[types.UID]frozenShare
	// capacity is the cluster's allocatable capacity and the devices ResourceSlices offer.
	capacity quota.ClusterTotal
}

type frozenShare struct {
	at    time.Time
	share float64
}

// maxFrozen bounds the memo: pods deleted while queued leave their entry behind.
const maxFrozen = 200000

func newJobShares() *jobShares {
	s := &jobShares{frozen: map[types.UID]frozenShare{}}
	return s
}

// setNode records a node's allocatable (nil: gone).
func (s *jobShares) setNode(name string, allocatable corev1.ResourceList) {
	if allocatable == nil {
		s.capacity.RemoveNode(name)
		return
	}
	s.capacity.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: allocatable}})
}

// setDevices records the devices the cluster's ResourceSlices offer.
func (s *jobShares) setDevices(total quota.Amounts) { s.capacity.SetDevices(total) }

// nodeHandler keeps the total from the scheduler's node informer.
func (s *jobShares) nodeHandler() cache.ResourceEventHandler {
	set := func(obj any, deleted bool) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if node, ok := obj.(*corev1.Node); ok {
			if deleted {
				s.setNode(node.Name, nil)
			} else {
				s.setNode(node.Name, node.Status.Allocatable)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj, false) },
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: func(obj any) { set(obj, true) },
	}
}

// forget drops a pod that will not be queued again.
func (s *jobShares) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.frozen, uid)
	s.mu.Unlock()
}

// shareOf returns the frozen share of a queued pod's job: its group's bound requests over the
// cluster's total, in the resource where that ratio is highest. Pods without a group are jobs of
// one with nothing running: share 0.
func (g *groupManager) shareOf(e fwk.QueuedEntityInfo) float64 {
	getter, ok := e.(podInfoGetter)
	if !ok {
		return 0
	}
	pod := getter.GetPodInfo().GetPod()
	key, ok := groupOf(pod)
	if !ok {
		return 0
	}
	at := e.GetTimestamp()
	s := g.shares
	s.mu.Lock()
	if f, ok := s.frozen[pod.UID]; ok && f.at.Equal(at) {
		s.mu.Unlock()
		return f.share
	}
	s.mu.Unlock()
	share := g.groupShare(key)
	s.mu.Lock()
	if len(s.frozen) >= maxFrozen {
		clear(s.frozen)
	}
	s.frozen[pod.UID] = frozenShare{at: at, share: share}
	s.mu.Unlock()
	return share
}

// groupShare is the dominant share of a group's bound members now.
func (g *groupManager) groupShare(key groupKey) float64 {
	total := g.shares.capacity.Total()
	members, _ := g.members.ByIndex(podGroupIndex, key.String())
	bound := quota.Amounts{}
	for _, obj := range members {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName != "" {
			bound.Add(quota.FromList(podRequests(pod)))
			if g.devices != nil {
				bound.Add(g.devices.Charge(pod).Charged)
			}
		}
	}
	dominant := 0.0
	for name, v := range bound {
		if t := total[name]; t > 0 {
			dominant = max(dominant, float64(v)/float64(t))
		}
	}
	return dominant
}
