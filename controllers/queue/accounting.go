package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/groupstatus"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Accounting is every queue's usage and share, read from a ledger (internal/ledger), the account
// tephra-scheduler decides from: the same rules charge each pod (quota.ChargeOf), and the same
// code sums them.
type Accounting struct {
	Tree      *quota.Tree
	Total     quota.Amounts
	Allocated map[string]quota.Amounts // by queue, subtrees summed
	// Demand is what waits and can run now, by leaf queue: not gated, in a queue that admits
	// it, of a group with the members its minimum needs. Deserved shares are of it and of
	// Allocated.
	Demand   map[string]quota.Amounts
	Deserved map[string]quota.Amounts
	// Usage is each queue's status.usage (nil when history is off).
	Usage map[string]*schedulingv1alpha1.QueueUsage
	// Workloads counts pod groups (and pods without a group) by queue and state.
	Workloads      map[string]*WorkloadCounts
	overGuaranteed map[string]string
}

// WorkloadCounts counts a queue's workloads.
type WorkloadCounts struct{ Pending, Inqueue, Running int32 }

// Account computes what every queue uses, waits for and deserves. The pods of schedulerNames
// count, and pods of other schedulers that name a queue or group (CountsInQueues). A pod is
// charged its requests and, with devices (nil: none counted), its ResourceClaims' devices as the
// scheduler charges them (quota.ChargeDevices); the cluster's total is the nodes' allocatable
// and the devices' Total. Usage history is off: AccountWithHistory accrues it.
func Account(queues []*schedulingv1alpha1.Queue, pods []corev1.Pod, nodes []corev1.Node, podGroups []schedulingv1alpha1.PodGroup, schedulerNames []string, devices Devices) *Accounting {
	return account(queues, pointers(pods), pointers(nodes), pointers(podGroups), nil, schedulerNames, devices, History{})
}

// AccountWithHistory is Account, with each queue's usage accrued from its status.usage and
// weighed in the deserved shares.
func AccountWithHistory(queues []*schedulingv1alpha1.Queue, pods []corev1.Pod, nodes []corev1.Node, podGroups []schedulingv1alpha1.PodGroup, schedulerNames []string, devices Devices, history History) *Accounting {
	return account(queues, pointers(pods), pointers(nodes), pointers(podGroups), nil, schedulerNames, devices, history)
}

// AccountFrom lists the queues, pods, PodGroups and (withNodes: for deserved shares) nodes
// through reader and accounts for them; it returns the queues too. With an inventory, pods are
// charged their ResourceClaims' devices too (read through reader), and the inventory's devices
// add to the cluster's total; nil counts no devices. upstream reads upstream PodGroups' groups
// (nil: none are read).
func AccountFrom(ctx context.Context, reader client.Reader, schedulerNames []string, withNodes bool, inventory *quota.DeviceInventory, upstream *groups.Upstream) (*Accounting, []*schedulingv1alpha1.Queue, error) {
	var queues schedulingv1alpha1.QueueList
	if err := reader.List(ctx, &queues); err != nil {
		return nil, nil, err
	}
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	var nodes corev1.NodeList
	if withNodes {
		if err := reader.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, err
		}
	}
	var podGroups schedulingv1alpha1.PodGroupList
	if err := reader.List(ctx, &podGroups, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	var devices Devices // a nil *cachedDevices would be a Devices that is not nil
	if inventory != nil {
		d, err := listDevices(ctx, reader, inventory, pointers(pods.Items))
		if err != nil {
			return nil, nil, err
		}
		devices = d
	}
	ptrs := pointers(queues.Items)
	return account(ptrs, pointers(pods.Items), pointers(nodes.Items), pointers(podGroups.Items), upstream, schedulerNames, devices, History{}), ptrs, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// account feeds a ledger of its own with the objects and upstream PodGroups' groups (upstream nil:
// none), and reads the accounting from it.
func account(queues []*schedulingv1alpha1.Queue, pods []*corev1.Pod, nodes []*corev1.Node, podGroups []*schedulingv1alpha1.PodGroup, upstream *groups.Upstream, schedulerNames []string, devices Devices, history History) *Accounting {
	l := ledger.New(schedulerNames...)
	listed := listGroups(podGroups, upstream)
	feed := ledger.NewFeed(l, listed)
	if devices != nil {
		l.UseDevices(devices)
		l.SetDevices(devices.Total())
	}
	for _, node := range nodes {
		feed.ObserveNode(node, false)
	}
	for _, pod := range pods {
		feed.ObservePod(pod)
	}
	if upstream == nil {
		return fromLedger(l, queues, podGroups, history)
	}
	members := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if name, ok := schedulingv1alpha1.PodGroupNameOf(pod); ok {
			members[pod.Namespace+"/"+name] = append(members[pod.Namespace+"/"+name], pod)
		}
	}
	counted := withUpstream(podGroups, upstream, func(namespace, name string) bool { return listed.objects[namespace+"/"+name] != nil },
		func(namespace, name string) []*corev1.Pod { return members[namespace+"/"+name] }, nil)
	return fromLedger(l, queues, counted, history)
}

// listedGroups are PodGroup objects listed once, by "namespace/name", and upstream PodGroups'
// groups (a group a pod carries has none: quota.ChargeOf reads it from the pod).
type listedGroups struct {
	objects  map[string]*schedulingv1alpha1.PodGroup
	upstream *groups.Upstream
}

func listGroups(podGroups []*schedulingv1alpha1.PodGroup, upstream *groups.Upstream) listedGroups {
	out := listedGroups{objects: make(map[string]*schedulingv1alpha1.PodGroup, len(podGroups)), upstream: upstream}
	for _, pg := range podGroups {
		out.objects[pg.Namespace+"/"+pg.Name] = pg
	}
	return out
}

func (g listedGroups) Get(namespace, name string) *schedulingv1alpha1.PodGroup {
	if pg := g.objects[namespace+"/"+name]; pg != nil || g.upstream == nil {
		return pg
	}
	pg, err := g.upstream.Get(namespace, name)
	if err != nil {
		return nil
	}
	return pg
}

// PodsOf is asked only when a group changes, which a list does not.
func (listedGroups) PodsOf(string, string) []*corev1.Pod { return nil }

// withUpstream returns objects and every upstream PodGroup's group whose name no object has
// (exists), in the phase its members (podsOf) make it, held by its queue as holdOf says (nil:
// admitted) (groupstatus.Phase): nobody writes the status of such a group, and the workloads of
// its queue count it by that phase, as they count a PodGroup object's.
func withUpstream(objects []*schedulingv1alpha1.PodGroup, upstream *groups.Upstream, exists func(namespace, name string) bool,
	podsOf func(namespace, name string) []*corev1.Pod, holdOf func(*schedulingv1alpha1.PodGroup) groupstatus.Hold) []*schedulingv1alpha1.PodGroup {
	if upstream == nil {
		return objects
	}
	for _, pg := range upstream.List("") {
		if exists(pg.Namespace, pg.Name) {
			continue
		}
		counted := *pg
		pods := podsOf(pg.Namespace, pg.Name)
		counted.Status.Phase = groupstatus.Phase(pg, pods, groupstatus.Hold{})
		if counted.Status.Phase == schedulingv1alpha1.PodGroupInqueue && holdOf != nil {
			// Only a group that would be Inqueue can be held: its hold is asked for no other.
			counted.Status.Phase = groupstatus.Phase(pg, pods, holdOf(pg))
		}
		objects = append(objects, &counted)
	}
	return objects
}

// fromLedger reads every queue's accounting from a ledger: its sums, by leaf queue, summed up the
// tree; the deserved shares of what is allocated and can run now; the workloads, the groups by
// their phase and the ledger's pods without a group.
func fromLedger(l *ledger.Ledger, queues []*schedulingv1alpha1.Queue, groups []*schedulingv1alpha1.PodGroup, history History) *Accounting {
	v := l.View()
	a := &Accounting{
		Tree:      quota.NewTree(queues),
		Total:     v.Total,
		Allocated: map[string]quota.Amounts{},
		Demand:    map[string]quota.Amounts{},
		Workloads: map[string]*WorkloadCounts{},
	}
	a.countGroups(groups)
	for queue, s := range v.Singles {
		c := a.counts(queue)
		c.Running += s.Placed
		c.Pending += s.Waiting
	}
	demand := map[string]quota.Amounts{}
	for queue, amounts := range v.Allocated {
		add(demand, queue, amounts)
	}
	for queue, amounts := range v.Pending {
		// A closed queue's backlog takes no share from the others.
		if a.Tree.Admits(queue) {
			add(a.Demand, queue, amounts)
			add(demand, queue, amounts)
		}
	}
	for _, n := range a.Tree.Nodes() {
		if !n.Leaf() {
			continue
		}
		for _, anc := range n.Ancestry() {
			add(a.Allocated, anc.Name, v.Allocated[n.Name])
		}
	}
	a.useHistory(queues, history)
	a.Deserved = quota.Deserved(a.Tree, a.Total, demand)
	a.countInParents()
	a.overGuaranteed = a.Tree.OverGuaranteed(a.Total)
	return a
}

// countGroups counts each queue's PodGroups by phase.
func (a *Accounting) countGroups(groups []*schedulingv1alpha1.PodGroup) {
	for _, g := range groups {
		queue := g.Spec.Queue
		if queue == "" {
			queue = schedulingv1alpha1.DefaultQueue
		}
		counts := a.counts(queue)
		switch g.Status.Phase {
		case schedulingv1alpha1.PodGroupPending, "":
			counts.Pending++
		case schedulingv1alpha1.PodGroupInqueue:
			counts.Inqueue++
		case schedulingv1alpha1.PodGroupRunning:
			counts.Running++
		}
	}
}

// countInParents adds each leaf queue's workload counts to its parents'.
func (a *Accounting) countInParents() {
	for _, n := range a.Tree.Nodes() {
		if !n.Leaf() {
			continue
		}
		c := a.Workloads[n.Name]
		if c == nil {
			continue
		}
		for p := n.Parent; p != nil; p = p.Parent {
			pc := a.counts(p.Name)
			pc.Pending += c.Pending
			pc.Inqueue += c.Inqueue
			pc.Running += c.Running
		}
	}
}

func (a *Accounting) counts(queue string) *WorkloadCounts {
	c := a.Workloads[queue]
	if c == nil {
		c = &WorkloadCounts{}
		a.Workloads[queue] = c
	}
	return c
}

// openCondition says whether the queue takes new workloads, and if not which queue closes it.
func (a *Accounting) openCondition(q *schedulingv1alpha1.Queue) metav1.Condition {
	open := metav1.Condition{Type: ConditionOpen, Status: metav1.ConditionTrue, Reason: "Open", Message: "the queue takes new workloads", ObservedGeneration: q.Generation}
	n := a.Tree.Get(q.Name)
	if n == nil {
		return open
	}
	switch closed := n.ClosedBy(); {
	case closed == n:
		open.Status, open.Reason, open.Message = metav1.ConditionFalse, "Closed", "the queue is closed: what runs goes on, new workloads wait"
	case closed != nil:
		open.Status, open.Reason = metav1.ConditionFalse, "ParentClosed"
		open.Message = fmt.Sprintf("%s: parent queue %q is closed: what runs goes on, new workloads of this queue and those below it wait", schedulingv1alpha1.ReasonQueueUnavailable, closed.Name)
	}
	return open
}

// Status is the status the queue should have.
func (a *Accounting) Status(q *schedulingv1alpha1.Queue) schedulingv1alpha1.QueueStatus {
	status := schedulingv1alpha1.QueueStatus{Conditions: q.Status.DeepCopy().Conditions}
	valid := metav1.Condition{Type: ConditionValid, Status: metav1.ConditionTrue, Reason: "InTree", Message: "the queue is part of the queue tree", ObservedGeneration: q.Generation}
	if problem, bad := a.Tree.Problems[q.Name]; bad {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, "NotInTree", problem+"; its workloads wait"
	}
	meta.SetStatusCondition(&status.Conditions, valid)
	fit := metav1.Condition{Type: ConditionGuaranteesFit, Status: metav1.ConditionTrue, Reason: "Fit", Message: "the children's guarantees fit in the queue", ObservedGeneration: q.Generation}
	if msg, over := a.overGuaranteed[q.Name]; over {
		fit.Status, fit.Reason, fit.Message = metav1.ConditionFalse, "GuaranteesExceedParent", msg+"; they are scaled down in proportion"
	}
	meta.SetStatusCondition(&status.Conditions, fit)
	meta.SetStatusCondition(&status.Conditions, a.openCondition(q))
	// Keep the transition times of unchanged conditions, so an unchanged status is not rewritten.
	for i := range status.Conditions {
		if old := meta.FindStatusCondition(q.Status.Conditions, status.Conditions[i].Type); old != nil && old.Status == status.Conditions[i].Status {
			status.Conditions[i].LastTransitionTime = old.LastTransitionTime
		}
	}
	status.AllocatedSummary, status.DeservedSummary = "0", "0"
	if a.Tree.Get(q.Name) == nil {
		return status
	}
	status.AllocatedSummary, status.DeservedSummary = a.Allocated[q.Name].Describe(), a.Deserved[q.Name].Describe()
	if l := a.Allocated[q.Name].List(); len(l) > 0 {
		status.Allocated = l
	}
	if l := a.Deserved[q.Name].List(); len(l) > 0 {
		status.Deserved = l
	}
	if c := a.Workloads[q.Name]; c != nil {
		status.Pending, status.Inqueue, status.Running = c.Pending, c.Inqueue, c.Running
	}
	status.Usage = a.Usage[q.Name]
	return status
}

func add(sums map[string]quota.Amounts, key string, v quota.Amounts) {
	if len(v) == 0 {
		return
	}
	if sums[key] == nil {
		sums[key] = quota.Amounts{}
	}
	sums[key].Add(v)
}
