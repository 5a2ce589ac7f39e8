// Package chargingcases holds the cases that the ledger (internal/ledger), which tephra-scheduler
// decides from, and the Queue controller's accounting (controllers/queue), which writes Queue
// status, are both tested over: the same pods, PodGroups (Tephra's objects, and upstream
// PodGroups read in memory) and nodes must give the same sums on both sides, because one must
// never wake or refuse pods on figures the other's status does not show.
package chargingcases

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Case is a cluster and what every leaf queue's sums must be.
type Case struct {
	Name   string
	Queues []*v1alpha1.Queue
	Groups []v1alpha1.PodGroup
	// UpstreamGroups are upstream PodGroups (scheduling.k8s.io/v1beta1), and Workloads those
	// were made from: both binaries read them in memory (internal/groups), with no object.
	UpstreamGroups []schedulingv1beta1.PodGroup
	Workloads      []schedulingv1beta1.Workload
	Pods           []corev1.Pod
	Nodes          []corev1.Node
	// Total is the cluster's total that queues share.
	Total quota.Amounts
	// Allocated are the requests placed, by leaf queue.
	Allocated map[string]quota.Amounts
	// Demand are the requests that wait and can run now: not gated, and of a group that has the
	// members its minimum needs (every queue of a case admits its pods).
	Demand map[string]quota.Amounts
}

// SchedulerNames are the schedulers whose pods count in the cases.
var SchedulerNames = []string{v1alpha1.SchedulerName}

// Cases are the cases, each a rule of quota.ChargeOf and what the sums make of it.
func Cases() []Case {
	cpu := func(n int64) quota.Amounts { return quota.Amounts{corev1.ResourceCPU: n * 1000} }
	queues := []*v1alpha1.Queue{queue("a"), queue("b")}
	node := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
	total := cpu(16)
	return append([]Case{
		{
			Name:   "a bound pod is allocated, a waiting one pending, both in the queue its label names",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Pods:      []corev1.Pod{pod("p1", "a", "", 2, onNode), pod("p2", "a", "", 3), pod("p3", "b", "", 1)},
			Allocated: map[string]quota.Amounts{"a": cpu(2)},
			Demand:    map[string]quota.Amounts{"a": cpu(3), "b": cpu(1)},
		},
		{
			Name:   "a pod counts in its group's queue, whatever its own label says",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Groups:    []v1alpha1.PodGroup{group("g", "b", 1)},
			Pods:      []corev1.Pod{pod("p1", "a", "g", 2, onNode), pod("p2", "a", "g", 2)},
			Allocated: map[string]quota.Amounts{"b": cpu(2)},
			Demand:    map[string]quota.Amounts{"b": cpu(2)},
		},
		{
			Name:   "a pod that carries its group of one counts in the queue it names, with no PodGroup object",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Pods:      []corev1.Pod{pod("c1", "b", "one", 2, onNode, carries), pod("c2", "a", "two", 3, carries)},
			Allocated: map[string]quota.Amounts{"b": cpu(2)},
			Demand:    map[string]quota.Amounts{"a": cpu(3)},
		},
		{
			Name:   "a PodGroup object wins over the group a pod says it carries",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Groups:    []v1alpha1.PodGroup{group("g", "b", 1)},
			Pods:      []corev1.Pod{pod("c1", "a", "g", 2, onNode, carries)},
			Allocated: map[string]quota.Amounts{"b": cpu(2)},
		},
		{
			Name:   "the pods of a group not known yet count nowhere",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Pods: []corev1.Pod{pod("p1", "a", "missing", 2, onNode), pod("p2", "a", "missing", 2)},
		},
		{
			Name:   "a gated pod waits but asks for no room, and makes no member of its group",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Groups: []v1alpha1.PodGroup{group("g", "a", 2)},
			Pods:   []corev1.Pod{pod("p1", "a", "g", 1), pod("p2", "a", "g", 1, gated), pod("p3", "b", "", 4, gated)},
		},
		{
			Name:   "a group with the members its minimum needs asks for room; one short of them does not",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Groups: []v1alpha1.PodGroup{group("whole", "a", 2), group("short", "b", 3)},
			Pods:   []corev1.Pod{pod("w1", "a", "whole", 1), pod("w2", "a", "whole", 1), pod("s1", "b", "short", 2), pod("s2", "b", "short", 2)},
			Demand: map[string]quota.Amounts{"a": cpu(2)},
		},
		{
			Name:   "a pod going holds its room while on a node, and asks for none before",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Pods:      []corev1.Pod{pod("p1", "a", "", 2, onNode, going), pod("p2", "a", "", 3, going)},
			Allocated: map[string]quota.Amounts{"a": cpu(2)},
		},
		{
			Name:   "finished pods, system pods and other schedulers' pods without a queue count nowhere",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Pods: []corev1.Pod{
				pod("done", "a", "", 2, onNode, succeeded), pod("failed", "a", "", 2, onNode, failed),
				pod("dns", "", "", 1, onNode, system), pod("other", "", "", 1, otherScheduler),
			},
		},
		{
			Name:   "another scheduler's pod that names a queue counts in it",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Pods:      []corev1.Pod{pod("p1", "b", "", 2, onNode, otherScheduler)},
			Allocated: map[string]quota.Amounts{"b": cpu(2)},
		},
	}, upstreamCases(queues, node, total)...)
}

// upstreamCases are the cases of upstream PodGroups, which both binaries read in memory.
func upstreamCases(queues []*v1alpha1.Queue, node corev1.Node, total quota.Amounts) []Case {
	cpu := func(n int64) quota.Amounts { return quota.Amounts{corev1.ResourceCPU: n * 1000} }
	return []Case{
		{
			Name:   "a member of an upstream PodGroup counts in the queue its label names, with no PodGroup object",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			UpstreamGroups: []schedulingv1beta1.PodGroup{upstreamGroup("up", "b", "", 2)},
			Pods:           []corev1.Pod{pod("u1", "a", "", 2, onNode, linkedTo("up")), pod("u2", "", "", 1, linkedTo("up"))},
			Allocated:      map[string]quota.Amounts{"b": cpu(2)},
			Demand:         map[string]quota.Amounts{"b": cpu(1)},
		},
		{
			Name:   "an upstream PodGroup without a label is in the queue of its Workload's label, else the default queue",
			Queues: append(queues, queue(v1alpha1.DefaultQueue)), Nodes: []corev1.Node{node}, Total: total,
			UpstreamGroups: []schedulingv1beta1.PodGroup{upstreamGroup("from-workload", "", "wl", 1), upstreamGroup("plain", "", "", 1)},
			Workloads:      []schedulingv1beta1.Workload{workload("wl", "a")},
			Pods:           []corev1.Pod{pod("w1", "", "", 2, onNode, linkedTo("from-workload")), pod("d1", "b", "", 3, onNode, linkedTo("plain"))},
			Allocated:      map[string]quota.Amounts{"a": cpu(2), v1alpha1.DefaultQueue: cpu(3)},
		},
		{
			Name:   "a Tephra PodGroup object wins over an upstream PodGroup of its name; an upstream PodGroup short of its minCount asks for no room",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			Groups:         []v1alpha1.PodGroup{group("both", "a", 1)},
			UpstreamGroups: []schedulingv1beta1.PodGroup{upstreamGroup("both", "b", "", 1), upstreamGroup("short", "b", "", 3)},
			Pods:           []corev1.Pod{pod("o1", "", "", 2, onNode, linkedTo("both")), pod("s1", "", "", 1, linkedTo("short")), pod("s2", "", "", 1, linkedTo("short"))},
			Allocated:      map[string]quota.Amounts{"a": cpu(2)},
		},
		{
			Name:   "the pods of an upstream PodGroup being deleted, or that cannot be translated, count nowhere",
			Queues: queues, Nodes: []corev1.Node{node}, Total: total,
			UpstreamGroups: []schedulingv1beta1.PodGroup{upstreamGroup("going", "a", "", 1, deleting), upstreamGroup("bad", "Not_A_Queue", "", 1)},
			Pods:           []corev1.Pod{pod("g1", "a", "", 2, onNode, linkedTo("going")), pod("b1", "a", "", 2, onNode, linkedTo("bad"))},
		},
	}
}

func queue(name string) *v1alpha1.Queue {
	return &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Weight: 1}}
}

func group(name, queue string, minMember int32) v1alpha1.PodGroup {
	return v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       v1alpha1.PodGroupSpec{Queue: queue, MinMember: minMember},
	}
}

// upstreamGroup is an upstream PodGroup of namespace ns, a gang of minCount, in queue (its label,
// "" for none) and made from workload ("" for none).
func upstreamGroup(name, queue, workload string, minCount int32, opts ...func(*schedulingv1beta1.PodGroup)) schedulingv1beta1.PodGroup {
	pg := schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("up-" + name)},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
	if queue != "" {
		pg.Labels = map[string]string{v1alpha1.QueueLabel: queue}
	}
	if workload != "" {
		pg.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: workload}
	}
	for _, o := range opts {
		o(&pg)
	}
	return pg
}

var deleting = func(pg *schedulingv1beta1.PodGroup) { pg.DeletionTimestamp = &metav1.Time{} }

func workload(name, queue string) schedulingv1beta1.Workload {
	return schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{v1alpha1.QueueLabel: queue}}}
}

// linkedTo links a pod to an upstream PodGroup, as upstream does (spec.schedulingGroup).
func linkedTo(group string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
	}
}

// Pod options.
var (
	onNode         = func(p *corev1.Pod) { p.Spec.NodeName = "n1" }
	going          = func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	gated          = func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} }
	succeeded      = func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	failed         = func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
	system         = func(p *corev1.Pod) { p.Namespace = metav1.NamespaceSystem }
	otherScheduler = func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }
	carries        = func(p *corev1.Pod) { p.Annotations = map[string]string{v1alpha1.GroupOnPodAnnotation: "true"} }
)

// pod is a pod of namespace ns asking for cpus CPUs, in queue (its label, "" for none) and group
// ("" for none).
func pod(name, queue, group string, cpus int64, opts ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulerName: v1alpha1.SchedulerName,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)},
			}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if queue != "" {
		p.Labels[v1alpha1.QueueLabel] = queue
	}
	if group != "" {
		p.Labels[v1alpha1.PodGroupLabel] = group
	}
	for _, o := range opts {
		o(&p)
	}
	if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

// NonZero is amounts without their zero entries, nil for none: a sum that rose and fell back
// equals one never touched, on either side.
func NonZero(a quota.Amounts) quota.Amounts {
	var out quota.Amounts
	for name, v := range a {
		if v != 0 {
			if out == nil {
				out = quota.Amounts{}
			}
			out[name] = v
		}
	}
	return out
}

// Upstream reads the case's upstream PodGroups and Workloads as both binaries do (nil when it
// has none).
func (c Case) Upstream() *groups.Upstream {
	if len(c.UpstreamGroups) == 0 {
		return nil
	}
	index := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	podGroups, workloads := cache.NewIndexer(cache.MetaNamespaceKeyFunc, index), cache.NewIndexer(cache.MetaNamespaceKeyFunc, index)
	for i := range c.UpstreamGroups {
		_ = podGroups.Add(&c.UpstreamGroups[i])
	}
	for i := range c.Workloads {
		_ = workloads.Add(&c.Workloads[i])
	}
	return groups.NewUpstream(upstreamlisters.NewPodGroupLister(podGroups), upstreamlisters.NewWorkloadLister(workloads))
}

// Lister reads the case's groups as the scheduler's ledger does: the objects, else the upstream
// PodGroups' translations (a group a pod carries, quota.ChargeOf reads from the pod).
func (c Case) Lister() schedulinglisters.PodGroupLister {
	objects := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range c.Groups {
		_ = objects.Add(&c.Groups[i])
	}
	return groups.NewLister(schedulinglisters.NewPodGroupLister(objects), nil, c.Upstream())
}
