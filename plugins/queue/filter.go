package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
)

// Filter keeps the devices a preemption freed on a node for the pods nominated there. The
// scheduler holds a nominated pod's CPU and memory on its node against pods of no higher priority
// (it filters them with the nominated pods added), but DynamicResources allocates from what is
// free now: another pod, of any queue, would take the devices its victims left, and the preemptor
// would find none, and evict again, or wait with a nomination that holds nothing. A pod that
// claims devices passes a node only if the node's free devices hold its own and those of every
// pod nominated there with at least its priority.
func (q *Queue) Filter(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if q.accounts.devices == nil || !devices.UsesDevices(pod) || nodeInfo.Node() == nil {
		return nil
	}
	node := nodeInfo.Node().Name
	priority := corev1helpers.PodPriority(pod)
	held := quota.Amounts{}
	var holder *corev1.Pod
	var onNode map[types.UID]bool
	for _, pi := range q.handle.NominatedPodsForNode(node) {
		nominated := pi.GetPod()
		if nominated.UID == pod.UID || corev1helpers.PodPriority(nominated) < priority || !devices.UsesDevices(nominated) {
			continue
		}
		if onNode == nil {
			onNode = map[types.UID]bool{}
			for _, p := range nodeInfo.GetPods() {
				onNode[p.GetPod().UID] = true
			}
		}
		if onNode[nominated.UID] {
			// The scheduler's pass with the nominated pods added to the node: FreeOn counts it.
			holder = nominated
			continue
		}
		// The claims it names directly may be shared (with this very pod, a sibling of its
		// gang): they hold nothing the pod would take again.
		c := q.ledger.ChargeOf(nominated)
		own := c.Requests.Clone()
		own.Sub(c.Direct)
		if d := deviceAmounts(own); len(d) > 0 {
			held.Add(d)
			holder = nominated
		}
	}
	if holder == nil {
		return nil
	}
	// held may be empty when the nominated pods are on the node already: their charges count
	// in FreeOn then.
	free := q.accounts.devices.FreeOn(nodeInfo)
	offered := q.accounts.devices.OnNode(node)
	for name, v := range deviceAmounts(q.ledger.ChargeOf(pod).Requests) {
		// Only the node's own devices are held: those of slices for many nodes (a network's)
		// count on no node.
		if _, local := offered[name]; !local || held[name] == 0 {
			continue
		}
		if v+held[name] > free[name] {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("the free %s of node %s are held for pod %s/%s, nominated there by a preemption", quota.Label(name), node, holder.Namespace, holder.Name))
		}
	}
	return nil
}

// deviceAmounts keeps the device resources of amounts.
func deviceAmounts(a quota.Amounts) quota.Amounts {
	out := quota.Amounts{}
	for name, v := range a {
		if quota.IsDevice(name) && v > 0 {
			out[name] = v
		}
	}
	return out
}
