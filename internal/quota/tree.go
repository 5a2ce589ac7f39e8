// Package quota is Tephra's queue model: the tree of Queues, what each queue deserves at the
// current demand, and whether a request fits a queue's limits. It is pure computation, shared by
// the scheduler's queue plugin (which decides placement from it) and the Queue controller (which
// reports it in Queue status), so that both apply exactly the same rules.
package quota

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Node is one queue of the tree.
type Node struct {
	Name   string
	Parent *Node
	// Children are sorted by name, so every computation over the tree is deterministic.
	Children []*Node
	Weight   int64
	// Guarantee and Capability are the queue's floor and hard limit; nil when unset.
	Guarantee, Capability Amounts
	Open, Reclaimable     bool
	// ReclaimMinRuntime is how long the queue's jobs run before they may be reclaimed; nil when
	// the Queue leaves it to the scheduler's default.
	ReclaimMinRuntime *time.Duration
	// ReclaimPatienceLimit is the longest reclaim patience makes the queue's pods wait while it
	// is below its deserved share (0: no limit); nil when the Queue leaves it to the scheduler's
	// default.
	ReclaimPatienceLimit *time.Duration
	// Usage is the queue's decayed usage, which lowers its weight against its siblings' when
	// Deserved divides their parent's share (history.go); nil when history is off or the queue
	// has none. NewTree leaves it nil: UseHistory sets it from Queue status, the Queue
	// controller from what it accrues.
	Usage Usage
	// statusUsage is the Queue's status.usage, for UseHistory.
	statusUsage *v1alpha1.QueueUsage
	// namespaces selects the namespaces that may submit to the queue (nil: all); selectorText
	// is spec.namespaceSelector as users wrote it, for messages, and selectorProblem why it
	// could not be read (then the queue admits no namespace).
	namespaces      labels.Selector
	selectorText    string
	selectorProblem string
}

// AdmitsNamespace says why a workload of namespace (whose labels are nsLabels) may not use the
// queue: the namespaceSelector of the queue or of one of its ancestors does not match it. ""
// when it may.
func (n *Node) AdmitsNamespace(namespace string, nsLabels map[string]string) string {
	for _, q := range n.Ancestry() {
		switch {
		case q.selectorProblem != "":
			return fmt.Sprintf("the namespaceSelector of queue %q is not valid (%s): it admits no namespace", q.Name, q.selectorProblem)
		case q.namespaces != nil && !q.namespaces.Matches(labels.Set(nsLabels)):
			return fmt.Sprintf("namespace %q does not match the namespaceSelector of queue %q (%s)", namespace, q.Name, q.selectorText)
		}
	}
	return ""
}

// RestrictsNamespaces says whether the queue or an ancestor has a namespaceSelector.
func (n *Node) RestrictsNamespaces() bool {
	for _, q := range n.Ancestry() {
		if q.namespaces != nil || q.selectorProblem != "" {
			return true
		}
	}
	return false
}

// Leaf says whether the queue may hold workloads.
func (n *Node) Leaf() bool { return len(n.Children) == 0 }

// Ancestry returns the queue and its ancestors up to the root.
func (n *Node) Ancestry() []*Node {
	var out []*Node
	for q := n; q != nil; q = q.Parent {
		out = append(out, q)
	}
	return out
}

// Tree is the queue hierarchy under root.
type Tree struct {
	Root  *Node
	nodes map[string]*Node
	// Problems says, for each Queue left out of the tree, why (parent missing, a cycle).
	Problems map[string]string
	// HistoryHalfLife is the half-life the nodes' Usage was accrued with, against which Deserved
	// measures it (history.go); 0 when history is off.
	HistoryHalfLife time.Duration
}

// NewTree builds the tree from Queue objects. A root is assumed when none exists. Queues whose
// parent is missing, or that form a cycle, are left out with a problem: their workloads wait.
func NewTree(queues []*v1alpha1.Queue) *Tree {
	t := &Tree{nodes: map[string]*Node{}, Problems: map[string]string{}}
	byName := map[string]*v1alpha1.Queue{}
	for _, q := range queues {
		byName[q.Name] = q
	}
	t.Root = newNode(byName[v1alpha1.RootQueue], v1alpha1.RootQueue)
	t.nodes[v1alpha1.RootQueue] = t.Root
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.attach(name, byName, map[string]bool{})
	}
	return t
}

// attach adds the named queue (and its ancestors first) to the tree; it returns nil when the
// queue cannot be attached.
func (t *Tree) attach(name string, byName map[string]*v1alpha1.Queue, visiting map[string]bool) *Node {
	if n, ok := t.nodes[name]; ok {
		return n
	}
	if _, bad := t.Problems[name]; bad {
		return nil
	}
	q, ok := byName[name]
	if !ok {
		return nil
	}
	if visiting[name] {
		t.Problems[name] = fmt.Sprintf("queue %q is its own ancestor", name)
		return nil
	}
	visiting[name] = true
	parentName := q.Spec.Parent
	if parentName == "" {
		parentName = v1alpha1.RootQueue
	}
	parent := t.attach(parentName, byName, visiting)
	if parent == nil {
		if _, exists := byName[parentName]; !exists {
			t.Problems[name] = fmt.Sprintf("parent queue %q does not exist", parentName)
		} else if problem, ok := t.Problems[parentName]; ok {
			t.Problems[name] = fmt.Sprintf("parent queue %q is not in the tree: %s", parentName, problem)
		} else {
			t.Problems[name] = fmt.Sprintf("queue %q is its own ancestor", name)
		}
		return nil
	}
	n := newNode(q, name)
	n.Parent = parent
	parent.Children = append(parent.Children, n)
	sort.Slice(parent.Children, func(i, j int) bool { return parent.Children[i].Name < parent.Children[j].Name })
	t.nodes[name] = n
	return n
}

func newNode(q *v1alpha1.Queue, name string) *Node {
	n := &Node{Name: name, Weight: 1, Open: true, Reclaimable: true}
	if q == nil {
		return n
	}
	if q.Spec.Weight > 0 {
		n.Weight = int64(q.Spec.Weight)
	}
	if len(q.Spec.Guarantee) > 0 {
		n.Guarantee = FromList(q.Spec.Guarantee)
	}
	if len(q.Spec.Capability) > 0 {
		n.Capability = FromList(q.Spec.Capability)
	}
	n.statusUsage = q.Status.Usage
	n.Open = q.Spec.State != v1alpha1.QueueClosed
	n.Reclaimable = q.Spec.Reclaimable == nil || *q.Spec.Reclaimable
	if v := q.Spec.ReclaimMinRuntimeSeconds; v != nil {
		d := time.Duration(*v) * time.Second
		n.ReclaimMinRuntime = &d
	}
	if v := q.Spec.ReclaimPatienceLimitSeconds; v != nil {
		d := time.Duration(*v) * time.Second
		n.ReclaimPatienceLimit = &d
	}
	if sel := q.Spec.NamespaceSelector; sel != nil {
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			n.selectorProblem = err.Error()
		} else if !selector.Empty() {
			n.namespaces, n.selectorText = selector, selector.String()
		}
	}
	return n
}

// Get returns the named queue, or nil when it is not in the tree.
func (t *Tree) Get(name string) *Node { return t.nodes[name] }

// Nodes returns every queue of the tree, parents before children.
func (t *Tree) Nodes() []*Node {
	var out []*Node
	var walk func(*Node)
	walk = func(n *Node) {
		out = append(out, n)
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(t.Root)
	return out
}

// WorkloadQueue resolves the queue a workload names: it returns the leaf, or a reason why the
// workload must wait (missing, not a leaf, closed).
func (t *Tree) WorkloadQueue(name string) (*Node, string) {
	n := t.nodes[name]
	switch {
	case n == nil && t.Problems[name] != "":
		return nil, fmt.Sprintf("queue %q is not usable: %s", name, t.Problems[name])
	case n == nil:
		return nil, fmt.Sprintf("queue %q does not exist", name)
	case !n.Leaf():
		return nil, fmt.Sprintf("queue %q has child queues; only leaf queues hold workloads", name)
	}
	switch closed := n.ClosedBy(); {
	case closed == n:
		return n, fmt.Sprintf("queue %q is closed", name)
	case closed != nil:
		return n, fmt.Sprintf("parent queue %q is closed", closed.Name)
	}
	return n, ""
}

// ClosedBy returns the queue that keeps this one closed: itself when it is closed, else its
// nearest closed ancestor; nil when the queue and every ancestor are open. A tree closes as a
// tree: closing a parent holds the new workloads of every queue below it, whatever their own
// state, as Volcano does.
func (n *Node) ClosedBy() *Node {
	for _, q := range n.Ancestry() {
		if !q.Open {
			return q
		}
	}
	return nil
}

// Admits says whether the queue takes workloads now: it exists, is a leaf, and it and its
// ancestors are open. Pods waiting for a queue that does not are no demand: counted, they would
// hold a share of the cluster that nobody can use.
func (t *Tree) Admits(name string) bool {
	n := t.nodes[name]
	return n != nil && n.Leaf() && n.ClosedBy() == nil
}

// OverGuaranteed lists the queues whose children's guarantees do not fit in the queue's own
// guarantee (or, for root, in the cluster total), by resource.
func (t *Tree) OverGuaranteed(total Amounts) map[string]string {
	out := map[string]string{}
	for _, n := range t.Nodes() {
		if n.Leaf() {
			continue
		}
		sum := Amounts{}
		for _, c := range n.Children {
			sum.Add(c.Guarantee)
		}
		limit := n.Guarantee
		if n == t.Root {
			limit = total
		}
		if limit == nil {
			continue
		}
		bounded := Amounts{}
		for name := range sum {
			if _, ok := limit[name]; ok {
				bounded[name] = limit[name]
			}
		}
		if over := sum.Exceeding(bounded); over != "" {
			out[n.Name] = "the children's guarantees exceed what the queue has: " + over
		}
	}
	return out
}
