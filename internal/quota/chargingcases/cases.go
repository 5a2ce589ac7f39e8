// Package chargingcases holds the cases that the ledger (internal/ledger), which tephra-scheduler
// decides from, and the Queue controller's accounting (controllers/queue), which writes Queue
// status, are both tested over: the same pods, PodGroups and nodes must give the same sums on
// both sides, because one must never wake or refuse pods on figures the other's status does not
// show.
package chargingcases

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Case is a cluster and what every leaf queue's sums must be.
type Case struct {
	Name   string
	Queues []*v1alpha1.Queue
	Groups []v1alpha1.PodGroup
	Pods   []corev1.Pod
	Nodes  []corev1.Node
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
	return []Case{
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
