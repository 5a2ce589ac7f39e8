package quota

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func queue(name, parent string, weight int32, guarantee, capability int64) *v1alpha1.Queue {
	q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Parent: parent, Weight: weight}}
	if guarantee > 0 {
		q.Spec.Guarantee = corev1.ResourceList{gpu: *resource.NewQuantity(guarantee, resource.DecimalSI)}
	}
	if capability >= 0 {
		q.Spec.Capability = corev1.ResourceList{gpu: *resource.NewQuantity(capability, resource.DecimalSI)}
	}
	return q
}

func gpus(n int64) Amounts { return Amounts{gpu: n} }

func TestDeservedExamples(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queues []*v1alpha1.Queue
		total  int64
		demand map[string]int64
		want   map[string]int64
	}{{
		name:   "equal weights split evenly",
		queues: []*v1alpha1.Queue{queue("a", "root", 1, 0, -1), queue("b", "root", 1, 0, -1)},
		total:  10, demand: map[string]int64{"a": 10, "b": 10},
		want: map[string]int64{"root": 10, "a": 5, "b": 5},
	}, {
		name:   "weights 3:1",
		queues: []*v1alpha1.Queue{queue("a", "root", 3, 0, -1), queue("b", "root", 1, 0, -1)},
		total:  12, demand: map[string]int64{"a": 100, "b": 100},
		want: map[string]int64{"a": 9, "b": 3},
	}, {
		name:   "idle share goes to who asks",
		queues: []*v1alpha1.Queue{queue("a", "root", 1, 0, -1), queue("b", "root", 1, 0, -1)},
		total:  10, demand: map[string]int64{"a": 10, "b": 2},
		want: map[string]int64{"a": 8, "b": 2},
	}, {
		name: "tree",
		queues: []*v1alpha1.Queue{
			queue("eng", "root", 3, 0, -1), queue("train", "eng", 2, 0, -1), queue("infer", "eng", 1, 0, -1),
			queue("research", "root", 1, 0, -1),
		},
		total: 12, demand: map[string]int64{"train": 50, "infer": 50, "research": 50},
		want: map[string]int64{"eng": 9, "train": 6, "infer": 3, "research": 3},
	}, {
		name: "a guarantee is a floor",
		queues: []*v1alpha1.Queue{
			queue("eng", "root", 3, 0, -1), queue("train", "eng", 2, 0, -1), queue("infer", "eng", 1, 0, -1),
			queue("research", "root", 1, 6, -1),
		},
		total: 12, demand: map[string]int64{"train": 50, "infer": 50, "research": 50},
		want: map[string]int64{"eng": 6, "train": 4, "infer": 2, "research": 6},
	}, {
		name:   "a guarantee is bounded by demand",
		queues: []*v1alpha1.Queue{queue("a", "root", 1, 0, -1), queue("b", "root", 1, 8, -1)},
		total:  10, demand: map[string]int64{"a": 10, "b": 1},
		want: map[string]int64{"a": 9, "b": 1},
	}, {
		name:   "capability holds a queue and gives the rest back",
		queues: []*v1alpha1.Queue{queue("a", "root", 3, 0, 2), queue("b", "root", 1, 0, -1)},
		total:  12, demand: map[string]int64{"a": 12, "b": 12},
		want: map[string]int64{"a": 2, "b": 10},
	}, {
		name:   "guarantees that do not fit are scaled",
		queues: []*v1alpha1.Queue{queue("a", "root", 1, 8, -1), queue("b", "root", 1, 8, -1)},
		total:  10, demand: map[string]int64{"a": 10, "b": 10},
		want: map[string]int64{"a": 5, "b": 5},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tree := NewTree(tc.queues)
			require.Empty(t, tree.Problems)
			demand := map[string]Amounts{}
			for q, d := range tc.demand {
				demand[q] = gpus(d)
			}
			got := Deserved(tree, gpus(tc.total), demand)
			for q, want := range tc.want {
				assert.Equal(t, want, got[q][gpu], "deserved GPUs of queue %s", q)
			}
		})
	}
}

func TestTreeProblems(t *testing.T) {
	tree := NewTree([]*v1alpha1.Queue{
		queue("orphan", "missing", 1, 0, -1),
		queue("x", "y", 1, 0, -1), queue("y", "x", 1, 0, -1),
		queue("team", "root", 1, 0, -1), queue("leaf", "team", 1, 0, -1),
	})
	assert.Contains(t, tree.Problems["orphan"], `parent queue "missing" does not exist`)
	assert.Contains(t, tree.Problems["x"], "own ancestor")
	assert.Contains(t, tree.Problems["y"], "own ancestor")
	_, why := tree.WorkloadQueue("team")
	assert.Contains(t, why, "only leaf queues hold workloads")
	_, why = tree.WorkloadQueue("nope")
	assert.Contains(t, why, `queue "nope" does not exist`)
	_, why = tree.WorkloadQueue("orphan")
	assert.Contains(t, why, "does not exist")
	leaf, why := tree.WorkloadQueue("leaf")
	assert.Empty(t, why)
	assert.Equal(t, []string{"leaf", "team", "root"}, names(leaf.Ancestry()))
}

func names(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// FuzzDeserved checks the invariants of the deserved share on random trees: no queue gets more
// than its capability, its demand or its parent; siblings never sum above their parent; a
// guarantee that fits (siblings' guarantees within the parent's share) is met up to demand; and
// the whole share is handed out when there is demand for it.
func FuzzDeserved(f *testing.F) {
	for seed := range uint64(20) {
		f.Add(seed, int64(10+seed*7))
	}
	f.Fuzz(func(t *testing.T, seed uint64, total int64) {
		if total < 0 || total > 1<<40 {
			return
		}
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		queues, demand := randomTree(r, total)
		tree := NewTree(queues)
		require.Empty(t, tree.Problems)
		got := Deserved(tree, gpus(total), demand)
		sub := subtreeDemand(tree, demand)
		for _, n := range tree.Nodes() {
			share := got[n.Name][gpu]
			require.GreaterOrEqual(t, share, int64(0), n.Name)
			require.LessOrEqual(t, share, total, "queue %s exceeds the cluster", n.Name)
			require.LessOrEqual(t, share, sub[n.Name][gpu], "queue %s exceeds its demand", n.Name)
			if limit, ok := n.Capability[gpu]; ok {
				require.LessOrEqual(t, share, limit, "queue %s exceeds its capability", n.Name)
			}
			if n.Leaf() {
				continue
			}
			var sum, guarantees int64
			for _, c := range n.Children {
				sum += got[c.Name][gpu]
				guarantees += min(c.Guarantee[gpu], sub[c.Name][gpu], capOr(c, total))
			}
			require.LessOrEqual(t, sum, share, "children of %s exceed it", n.Name)
			if guarantees <= share {
				for _, c := range n.Children {
					want := min(c.Guarantee[gpu], sub[c.Name][gpu], capOr(c, total))
					require.GreaterOrEqual(t, got[c.Name][gpu], want, "queue %s misses its guarantee", c.Name)
				}
			}
			var wanted int64
			for _, c := range n.Children {
				wanted += min(sub[c.Name][gpu], capOr(c, total))
			}
			// All of the parent's share is handed out, but for rounding (a unit per child).
			require.GreaterOrEqual(t, sum, min(share, wanted)-int64(len(n.Children)), "share of %s left idle", n.Name)
		}
	})
}

func capOr(n *Node, otherwise int64) int64 {
	if limit, ok := n.Capability[gpu]; ok {
		return limit
	}
	return otherwise
}

func randomTree(r *rand.Rand, total int64) ([]*v1alpha1.Queue, map[string]Amounts) {
	var queues []*v1alpha1.Queue
	demand := map[string]Amounts{}
	parents := []string{"root"}
	count := 1 + r.IntN(12)
	for i := range count {
		name := fmt.Sprintf("q%d", i)
		parent := parents[r.IntN(len(parents))]
		var guarantee, capability int64 = 0, -1
		if r.IntN(3) == 0 {
			guarantee = r.Int64N(total/2 + 1)
		}
		if r.IntN(3) == 0 {
			capability = guarantee + r.Int64N(total+1)
		}
		q := queue(name, parent, int32(1+r.IntN(10)), guarantee, capability)
		if r.IntN(5) == 0 {
			q.Spec.Reclaimable = ptr.To(false)
		}
		queues = append(queues, q)
		parents = append(parents, name)
		demand[name] = gpus(r.Int64N(total + 1))
	}
	return queues, demand
}

// A tree closes as a tree: a closed parent holds the workloads of every queue below it, a child
// that is open itself included, and says which queue closed it.
func TestClosedParentClosesItsSubtree(t *testing.T) {
	closed := func(q *v1alpha1.Queue) *v1alpha1.Queue {
		q.Spec.State = v1alpha1.QueueClosed
		return q
	}
	tree := NewTree([]*v1alpha1.Queue{
		closed(queue("org", "root", 1, 0, -1)), queue("team", "org", 1, 0, -1), queue("leaf", "team", 1, 0, -1),
		closed(queue("shut", "team", 1, 0, -1)), queue("other", "root", 1, 0, -1),
	})
	leaf, why := tree.WorkloadQueue("leaf")
	assert.Equal(t, `parent queue "org" is closed`, why)
	assert.Equal(t, "org", leaf.ClosedBy().Name)
	assert.False(t, tree.Admits("leaf"), "open itself, closed by its grandparent")

	shut, why := tree.WorkloadQueue("shut")
	assert.Equal(t, `queue "shut" is closed`, why, "its own state is the nearest reason")
	assert.Equal(t, "shut", shut.ClosedBy().Name)

	other, why := tree.WorkloadQueue("other")
	assert.Empty(t, why)
	assert.Nil(t, other.ClosedBy())
	assert.True(t, tree.Admits("other"))
}

// Shares of large amounts are exact: memory in bytes is about 1e12, where a float tolerance of a
// unit would round every exact share up, and the correction that keeps the sum within the parent
// then took a byte from each queue. A gang that needs its queue's whole share waited for good
// (make replay's synthetic day: "memory 1792Gi of 1924145348605 deserved").
func TestLargeSharesAreExact(t *testing.T) {
	tree := NewTree([]*v1alpha1.Queue{queue("team-a", "root", 1, 0, -1), queue("team-b", "root", 1, 0, -1), queue("team-c", "root", 1, 0, -1)})
	gi := int64(1) << 30
	demand := map[string]Amounts{
		"team-a": {corev1.ResourceMemory: 3712 * gi}, "team-b": {corev1.ResourceMemory: 2048 * gi}, "team-c": {corev1.ResourceMemory: 1792 * gi},
	}
	got := Deserved(tree, Amounts{corev1.ResourceMemory: 32768 * gi}, demand)
	for q, d := range demand {
		assert.Equal(t, d[corev1.ResourceMemory], got[q][corev1.ResourceMemory], "queue %s deserves all it asks, to the byte", q)
	}
	// And when the cluster is short, the shares still add up to it exactly.
	got = Deserved(tree, Amounts{corev1.ResourceMemory: 6000*gi + 1}, demand)
	var sum int64
	for q := range demand {
		sum += got[q][corev1.ResourceMemory]
	}
	assert.Equal(t, 6000*gi+1, sum)
	assert.Equal(t, 1792*gi, got["team-c"][corev1.ResourceMemory], "team-c asks less than a third: all of it")
}
