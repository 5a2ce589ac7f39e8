package quota

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// The rules that charge a pod to a queue, in one place: tephra-scheduler's ledger applies them
// to each pod as its informer shows it (plugins/queue), and the Queue controller sums them over
// every pod for the Queue status (controllers/queue). What the pod asks for is PodRequests and
// ChargeDevices; where it counts, and as what, is ChargeOf.

// Standing is what a pod is to its queue's sums.
type Standing int

const (
	// Uncounted pods count in no queue: finished, or not counted in queues at all (another
	// scheduler's without a queue or group, a system pod).
	Uncounted Standing = iota
	// Unresolved pods name a PodGroup not known yet: they count nowhere until it is.
	Unresolved
	// Placed pods are on a node, going or not: their queue has the room allocated.
	Placed
	// Waiting pods are not on a node and not going: their queue's pending requests.
	Waiting
	// Leaving pods are going before they were placed: they hold and ask for nothing.
	Leaving
)

// PodCharge is where a pod counts and as what.
type PodCharge struct {
	// Queue is the pod's leaf queue; "" when Uncounted or Unresolved.
	Queue string
	// Group is the pod's PodGroup as "namespace/name" ("" for none), known or not.
	Group    string
	Standing Standing
	// Terminating: the pod is going (a deletion timestamp); placed, it still holds its room.
	Terminating bool
	// Gated: the pod waits behind scheduling gates and cannot be scheduled yet.
	Gated bool
	// Carried: the pod carries its group of one (v1alpha1.GroupOnPod), no object of which is
	// known, and names its queue itself: a workload of one pod, as a pod without a group is.
	Carried bool
}

// Demand says whether the pod asks for room now: waiting, and not gated. Whether its group has
// the members its minimum needs, and whether its queue admits it, are decided beside it, from the
// group's and the queue's facts.
func (c PodCharge) Demand() bool { return c.Standing == Waiting && !c.Gated }

// Member says whether the pod counts among the members its group could run with: not going,
// not gated.
func (c PodCharge) Member() bool { return c.Group != "" && !c.Terminating && !c.Gated }

// ChargeOf decides where a pod counts and as what. schedulerNames are the schedulers whose pods
// count in queues (v1alpha1.CountsInQueues); groupQueue returns the queue of a PodGroup ("" for
// the default queue), false while the group is not known. A pod that carries its group of one
// (v1alpha1.GroupOnPod) counts in the queue it names when no PodGroup object of its group is known.
func ChargeOf(pod *corev1.Pod, schedulerNames []string, groupQueue func(namespace, name string) (string, bool)) PodCharge {
	c := PodCharge{Terminating: pod.DeletionTimestamp != nil, Gated: Gated(pod)}
	name, grouped := v1alpha1.PodGroupNameOf(pod)
	if grouped {
		c.Group = pod.Namespace + "/" + name
	}
	if !v1alpha1.CountsInQueues(pod, schedulerNames) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return c
	}
	queue := ""
	if grouped {
		q, known := groupQueue(pod.Namespace, name)
		switch {
		case known:
			queue = q
		case v1alpha1.CarriesGroup(pod):
			// A pod that carries its group of one (no PodGroup object) names its queue itself.
			queue, c.Carried = v1alpha1.CarriedQueue(pod), true
		default:
			c.Standing = Unresolved
			return c
		}
	}
	c.Queue = v1alpha1.QueueOfPod(pod, queue)
	switch {
	case pod.Spec.NodeName != "":
		c.Standing = Placed
	case c.Terminating:
		c.Standing = Leaving
	default:
		c.Standing = Waiting
	}
	return c
}

// NodeCapacity is what a node adds to the cluster's total that queues share: its allocatable,
// but for the pod count, which no queue shares.
func NodeCapacity(node *corev1.Node) Amounts {
	capacity := FromList(node.Status.Allocatable)
	delete(capacity, corev1.ResourcePods)
	return capacity
}

// ClusterTotal is the cluster's total that queues share: every node's capacity (NodeCapacity)
// and the devices the cluster's ResourceSlices offer. tephra-scheduler's ledger and its job
// shares keep one each from the scheduler's informers, and the Queue controller's ledger one.
// It is safe for concurrent use; Total reads without a lock.
type ClusterTotal struct {
	mu      sync.Mutex
	nodes   map[string]Amounts
	devices Amounts
	sum     Amounts
	total   atomic.Pointer[Amounts]
}

// SetNode records a node's capacity, replacing what it had.
func (t *ClusterTotal) SetNode(node *corev1.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(node.Name)
	capacity := NodeCapacity(node)
	if t.nodes == nil {
		t.nodes = map[string]Amounts{}
	}
	t.nodes[node.Name] = capacity
	t.addLocked(capacity, 1)
}

// RemoveNode forgets a node.
func (t *ClusterTotal) RemoveNode(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(name)
	t.publishLocked()
}

// SetDevices records what the ResourceSlices offer, replacing what they offered.
func (t *ClusterTotal) SetDevices(devices Amounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(t.devices, -1)
	t.devices = devices.Clone()
	t.addLocked(t.devices, 1)
}

// Total is the sum, which the caller must not change.
func (t *ClusterTotal) Total() Amounts {
	if p := t.total.Load(); p != nil {
		return *p
	}
	return Amounts{}
}

func (t *ClusterTotal) removeLocked(name string) {
	if old, ok := t.nodes[name]; ok {
		delete(t.nodes, name)
		t.addLocked(old, -1)
	}
}

// addLocked adds (sign 1) or removes amounts and publishes the new sum.
func (t *ClusterTotal) addLocked(a Amounts, sign int64) {
	if t.sum == nil {
		t.sum = Amounts{}
	}
	for name, v := range a {
		t.sum[name] += sign * v
		if t.sum[name] == 0 {
			delete(t.sum, name)
		}
	}
	t.publishLocked()
}

func (t *ClusterTotal) publishLocked() {
	total := t.sum.Clone()
	if total == nil {
		total = Amounts{}
	}
	t.total.Store(&total)
}
