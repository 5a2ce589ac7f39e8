package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
)

const testGPU corev1.ResourceName = "example.com/gpu"

// fragmented is a fixture of four nodes of 8 GPUs, each running four one-GPU pods of a
// ReplicaSet; mutate may mark the pods of a node movable. Group "wide" waits with two members of
// 8 GPUs: 16 GPUs are free, none of them as a whole node.
type fragmentedFixture struct {
	*fixture
	state   *framework.CycleState
	members []*corev1.Pod
	pods    []*corev1.Pod
	infos   []fwk.NodeInfo
}

func newFragmented(t *testing.T, mutate func(node int, pod *corev1.Pod)) *fragmentedFixture {
	t.Helper()
	f := &fragmentedFixture{fixture: newFixture(t), state: framework.NewCycleState()}
	var nodes []*corev1.Node
	for i := range 4 {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourcePods: "110", testGPU: "8"}).Obj())
		for k := range 4 {
			pod := st.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-pod-%d", name, k)).UID(fmt.Sprintf("%s-pod-%d", name, k)).Node(name).
				Req(map[corev1.ResourceName]string{testGPU: "1"}).OwnerReference("rs-"+name, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
			if mutate != nil {
				mutate(i, pod)
			}
			require.NoError(t, f.fixture.pods.Add(pod))
			_, err := f.handle.clientset.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
			require.NoError(t, err)
			f.pods = append(f.pods, pod)
		}
	}
	snapshot := internalcache.NewSnapshot(f.pods, nodes)
	f.handle.snapshot = snapshot
	var err error
	f.infos, err = snapshot.NodeInfos().List()
	require.NoError(t, err)
	f.group(t, "wide", 2, nil, f.now)
	for i := range 2 {
		m := st.MakePod().Namespace("ns").Name(fmt.Sprintf("wide-%d", i)).UID(fmt.Sprintf("wide-%d", i)).
			Label(v1alpha1.PodGroupLabel, "wide").Req(map[corev1.ResourceName]string{testGPU: "8"}).Obj()
		require.NoError(t, f.fixture.pods.Add(m))
		f.members = append(f.members, m)
	}
	return f
}

// movable marks the pods of the given nodes movable.
func movable(nodes ...int) func(int, *corev1.Pod) {
	return func(node int, pod *corev1.Pod) {
		for _, n := range nodes {
			if n == node {
				pod.Annotations = map[string]string{v1alpha1.MovableAnnotation: "true"}
			}
		}
	}
}

// tryMember runs the first member's PreFilter and, as the framework does when it refuses,
// PostFilter, and returns PostFilter's message.
func (f *fragmentedFixture) tryMember(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	_, status := f.gang.PreFilter(ctx, f.state, f.members[0], f.infos)
	require.Equal(t, fwk.Unschedulable, status.Code())
	require.Contains(t, status.Message(), "the nodes' free capacity holds at most 0 of them", "16 GPUs free, as 4 per node")
	_, status = f.gang.PostFilter(ctx, f.state, f.members[0], nil)
	require.Equal(t, fwk.Unschedulable, status.Code())
	return status.Message()
}

// remaining lists the pods the API still has.
func (f *fragmentedFixture) remaining(t *testing.T) map[string]bool {
	t.Helper()
	list, err := f.handle.clientset.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]bool{}
	for _, p := range list.Items {
		out[p.Name] = true
	}
	return out
}

func movesCounted(t *testing.T, movable string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() != "tephra_consolidation_moves_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "movable" && l.GetValue() == movable {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The gang fits the free capacity but no node: the movable pods of n2 and n3 are evicted, with a
// DisruptionTarget condition and an event each, n2 and n3 are reserved for the gang (the pods'
// replacements are kept off them), the group's event says why, and the metric counts the moves.
// The pods that did not declare themselves movable stay.
func TestMovablePodsAreMovedForAGangThatFitsOnNoNodes(t *testing.T) {
	f := newFragmented(t, movable(2, 3))
	before := movesCounted(t, "declared")

	msg := f.tryMember(t)
	assert.Contains(t, msg, "Consolidating: the minimum of pod group ns/wide fits in the cluster's free capacity but on no set of nodes; moving 8 pods")
	assert.Contains(t, msg, "to make nodes n2, n3 whole for it")
	for _, node := range []string{"n2", "n3"} {
		owner, r, held := f.gang.groups.reservedFor(node)
		require.True(t, held, "node %s is reserved", node)
		assert.Equal(t, groupKey{"ns", "wide"}, owner)
		assert.True(t, r.consolidation)
	}
	for _, node := range []string{"n0", "n1"} {
		_, _, held := f.gang.groups.reservedFor(node)
		assert.False(t, held, "node %s is not reserved", node)
	}

	require.Eventually(t, func() bool { return len(f.remaining(t)) == 8 }, 10*time.Second, 10*time.Millisecond, "the 8 movable pods are evicted")
	for name := range f.remaining(t) {
		assert.True(t, strings.HasPrefix(name, "n0-") || strings.HasPrefix(name, "n1-"), "pod %s did not declare itself movable and stays", name)
	}
	// The mover counts a move once its deletion is made, after the pod is gone from the lister.
	assert.Eventually(t, func() bool { return movesCounted(t, "declared") == before+8 }, 10*time.Second, 10*time.Millisecond,
		"moves counted: %v, want %v", movesCounted(t, "declared"), before+8)

	var events []string
	for len(events) < 9 {
		select {
		case e := <-f.handle.recorder.Events:
			events = append(events, e)
		case <-time.After(5 * time.Second):
			t.Fatalf("events: %v", events)
		}
	}
	assert.Contains(t, events[0], "Normal Consolidating Consolidating: the minimum of pod group ns/wide fits in the cluster's free capacity but on no set of nodes")
	assert.Contains(t, events[1], "Warning MovedForGang MovedForGang: evicted to make room for pod group ns/wide, which fits in the cluster's free capacity but on no set of nodes; the pod declared itself movable (scheduling.tephra.dev/movable)")

	// A replacement of the group's priority is kept off the reserved nodes; it fits the others.
	replacement := st.MakePod().Namespace("ns").Name("n2-pod-new").UID("n2-pod-new").Req(map[corev1.ResourceName]string{testGPU: "1"}).Obj()
	byName := map[string]fwk.NodeInfo{}
	for _, info := range f.infos {
		byName[info.Node().Name] = info
	}
	s := f.gang.Filter(context.Background(), nil, replacement, byName["n2"])
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code())
	assert.Contains(t, s.Message(), "reserved for pod group ns/wide, which fits the free capacity but no set of nodes")
	assert.Nil(t, f.gang.Filter(context.Background(), nil, replacement, byName["n0"]))

	// No second plan while the first one works: the group is tried again, and nothing more moves.
	f.state = framework.NewCycleState()
	_, status := f.gang.PreFilter(context.Background(), f.state, f.members[0], f.infos)
	require.Equal(t, fwk.Unschedulable, status.Code(), "the snapshot still shows the moved pods")
	_, status = f.gang.PostFilter(context.Background(), f.state, f.members[0], nil)
	assert.NotContains(t, status.Message(), "Consolidating")

	// Once the moved pods are gone the member finds room on the reserved nodes, whichever event
	// brought it back: the verdict is not kept while the moves are under way.
	var left []*corev1.Pod
	for _, pod := range f.pods {
		if f.remaining(t)[pod.Name] {
			left = append(left, pod)
		}
	}
	var nodes []*corev1.Node
	for _, info := range f.infos {
		nodes = append(nodes, info.Node())
	}
	after, err := internalcache.NewSnapshot(left, nodes).NodeInfos().List()
	require.NoError(t, err)
	result, status := f.gang.PreFilter(context.Background(), framework.NewCycleState(), f.members[0], after)
	require.True(t, status.IsSuccess(), "%v", status)
	assert.ElementsMatch(t, []string{"n2", "n3"}, result.NodeNames.UnsortedList(), "the members go to the nodes made whole")

	// The plan's nodes are given back if the minimum does not run on them in time.
	f.gang.endConsolidation(klog.Background(), groupKey{"ns", "wide"}, f.now.Add(-time.Second))
	_, _, held := f.gang.groups.reservedFor("n2")
	assert.True(t, held, "the timer of another plan gives nothing back")
	f.gang.endConsolidation(klog.Background(), groupKey{"ns", "wide"}, f.now)
	_, _, held = f.gang.groups.reservedFor("n2")
	assert.False(t, held)
}

// Pods that did not declare themselves movable are never moved, however the gang waits: with no
// movable pod, nothing is evicted and nothing reserved.
func TestNothingMovesWithoutMovablePods(t *testing.T) {
	f := newFragmented(t, nil)
	assert.NotContains(t, f.tryMember(t), "Consolidating")
	for _, info := range f.infos {
		_, _, held := f.gang.groups.reservedFor(info.Node().Name)
		assert.False(t, held)
	}
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, f.remaining(t), 16)
}

// A bare pod (no controller would create it again) is never moved, even if it says it may be; nor
// is a pod of higher priority than the gang, whose replacement the reservation would not keep off.
func TestOnlyPodsAControllerRecreatesAtTheGangsPriorityMove(t *testing.T) {
	f := newFragmented(t, func(node int, pod *corev1.Pod) {
		movable(2, 3)(node, pod)
		switch node {
		case 2:
			pod.OwnerReferences = nil
		case 3:
			pod.Spec.Priority = new(int32(100))
		}
	})
	assert.NotContains(t, f.tryMember(t), "Consolidating")
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, f.remaining(t), 16)
}

// Nothing moves when consolidation is off, when the bound is below what the gang needs, or when
// the group's queue turned it away in the cycle.
func TestNothingMovesWhenOffOverTheBoundOrRefusedByItsQueue(t *testing.T) {
	f := newFragmented(t, movable(2, 3))
	*f.gang.args.Consolidation.Enabled = false
	assert.NotContains(t, f.tryMember(t), "Consolidating")

	f = newFragmented(t, movable(2, 3))
	*f.gang.args.Consolidation.MaxMovesPerGang = 7
	assert.NotContains(t, f.tryMember(t), "Consolidating", "two nodes take 8 moves")

	f = newFragmented(t, movable(2, 3))
	admission.MarkRefused(f.state, "QueueOverShare: …")
	assert.NotContains(t, f.tryMember(t), "Consolidating")
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, f.remaining(t), 16)
}

// Pods above their group's minimum move without declaring it, as many as the group runs above its
// minimum: a group of 8 pods with a minimum of 4 on n2 and n3 gives 4, one node's worth.
func TestElasticPodsMoveWithinTheirGroupsSpare(t *testing.T) {
	f := newFragmented(t, func(node int, pod *corev1.Pod) {
		if node >= 2 {
			pod.Labels = map[string]string{v1alpha1.PodGroupLabel: "elastic"}
		}
	})
	f.group(t, "elastic", 4, nil, f.now.Add(-time.Hour))
	assert.NotContains(t, f.tryMember(t), "Consolidating", "two nodes need 8 moves; the group may lose 4")

	f = newFragmented(t, func(node int, pod *corev1.Pod) {
		if node >= 2 {
			pod.Labels = map[string]string{v1alpha1.PodGroupLabel: "elastic"}
		}
	})
	f.group(t, "elastic", 4, nil, f.now.Add(-time.Hour))
	pg, _, _ := f.groups.GetByKey("ns/wide")
	wide := pg.(*v1alpha1.PodGroup).DeepCopy()
	wide.Spec.MinMember = 1
	require.NoError(t, f.groups.Update(wide))
	before := movesCounted(t, "elastic")
	assert.Contains(t, f.tryMember(t), "Consolidating", "one member of 8 needs 4 moves")
	require.Eventually(t, func() bool { return len(f.remaining(t)) == 12 }, 10*time.Second, 10*time.Millisecond)
	// The mover counts a move once its deletion is made, after the pod is gone from the lister.
	assert.Eventually(t, func() bool { return movesCounted(t, "elastic") == before+4 }, 10*time.Second, 10*time.Millisecond,
		"moves counted: %v, want %v", movesCounted(t, "elastic"), before+4)
}

// A group the planner found no plan for is not planned again at once: its pilot is tried on every
// pod that ends, and a plan reads every pod. Once replanAfter has passed, pods that became movable
// meanwhile are moved.
func TestNoPlanIsNotAskedAgainAtOnce(t *testing.T) {
	f := newFragmented(t, nil)
	assert.NotContains(t, f.tryMember(t), "Consolidating")
	for _, pod := range f.pods {
		if pod.Spec.NodeName == "n2" || pod.Spec.NodeName == "n3" {
			pod.Annotations = map[string]string{v1alpha1.MovableAnnotation: "true"}
		}
	}
	f.gang.groups.clearUnfit(groupKey{"ns", "wide"})
	f.state = framework.NewCycleState()
	assert.NotContains(t, f.tryMember(t), "Consolidating", "tried again at once")

	f.now = f.now.Add(replanAfter)
	f.gang.groups.clearUnfit(groupKey{"ns", "wide"})
	f.state = framework.NewCycleState()
	assert.Contains(t, f.tryMember(t), "Consolidating")
	require.Eventually(t, func() bool { return len(f.remaining(t)) == 8 }, 10*time.Second, 10*time.Millisecond)
}
