package groupstatus

import (
	"fmt"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Hold is why a group's queue does not admit its minimum now; empty when it does.
type Hold struct{ Reason, Message string }

// HoldOf checks the group's minimum against its queue as the Queue controller reports it: the
// queue must be a usable leaf, and minResources must fit under the capability of the queue and
// its ancestors beside what they have allocated. The scheduler applies the same rules when it
// places the pods; this is what users see on the group meanwhile. The Volcano adapter
// (controllers/foreign) reads it too, to move a Volcano PodGroup without pods to Inqueue, as
// Volcano's enqueue action does.
//
// nsLabels are the labels of the group's namespace, which the namespaceSelector of its queue and
// their ancestors must match.
func HoldOf(group *schedulingv1alpha1.PodGroup, queues []*schedulingv1alpha1.Queue, nsLabels map[string]string) Hold {
	return NewHolds(queues).Of(group, nsLabels)
}

// Holds decides HoldOf for many groups against one list of queues, whose tree and allocations
// it reads once.
type Holds struct {
	tree      *quota.Tree
	allocated map[string]quota.Amounts
}

// NewHolds reads the queues' tree and what each has allocated, as their status says.
func NewHolds(queues []*schedulingv1alpha1.Queue) *Holds {
	allocated := make(map[string]quota.Amounts, len(queues))
	for _, q := range queues {
		allocated[q.Name] = quota.FromList(q.Status.Allocated)
	}
	return &Holds{tree: quota.NewTree(queues), allocated: allocated}
}

// Of is HoldOf for the group, whose namespace has the labels nsLabels.
func (h *Holds) Of(group *schedulingv1alpha1.PodGroup, nsLabels map[string]string) Hold {
	name := group.Spec.Queue
	if name == "" {
		name = schedulingv1alpha1.DefaultQueue
	}
	leaf, why := h.tree.WorkloadQueue(name)
	if why != "" {
		return Hold{schedulingv1alpha1.ReasonQueueUnavailable, fmt.Sprintf("%s: %s; the group waits", schedulingv1alpha1.ReasonQueueUnavailable, why)}
	}
	if why := leaf.AdmitsNamespace(group.Namespace, nsLabels); why != "" {
		return Hold{schedulingv1alpha1.ReasonQueueForbidden, fmt.Sprintf("%s: %s; the group waits", schedulingv1alpha1.ReasonQueueForbidden, why)}
	}
	need := quota.FromList(group.Spec.MinResources)
	for _, n := range leaf.Ancestry() {
		if over := need.Exceeding(n.Capability); over != "" {
			return Hold{schedulingv1alpha1.ReasonNeverFits, fmt.Sprintf("%s: the group's minResources exceed the capability of queue %q (%s); it can never run there", schedulingv1alpha1.ReasonNeverFits, n.Name, over)}
		}
		used := h.allocated[n.Name].Clone()
		for r, v := range need {
			if _, limited := n.Capability[r]; limited {
				used[r] += v
			}
		}
		if over := used.Exceeding(n.Capability); over != "" {
			return Hold{schedulingv1alpha1.ReasonQueueCapability, fmt.Sprintf("%s: the group's minimum waits for room under the capability of queue %q (%s)", schedulingv1alpha1.ReasonQueueCapability, n.Name, over)}
		}
	}
	return Hold{}
}
