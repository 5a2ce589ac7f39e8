package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// fragmentedRacks is three racks (a, b, c) of two nodes of 4 GPUs in block x, each node running
// one movable one-GPU pod of a ReplicaSet, and group "train" of two replicas (sub-groups r0 and
// r1) of 4 members of 2 GPUs, each required in one rack: a rack holds 2 of a replica's members,
// and the 18 GPUs free hold both replicas' 16.
func fragmentedRacks(t *testing.T) (*fixture, [][]*corev1.Pod, []*corev1.Pod, []fwk.NodeInfo) {
	t.Helper()
	f := newFixture(t)
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for _, rack := range []string{"a", "b", "c"} {
		for i := range 2 {
			name := fmt.Sprintf("%s%d", rack, i)
			nodes = append(nodes, st.MakeNode().Name(name).Label("rack", rack).Label("block", "x").
				Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourcePods: "110", testGPU: "4"}).Obj())
			pod := st.MakePod().Namespace("ns").Name(name+"-pod").UID(name+"-pod").Node(name).Annotation(v1alpha1.MovableAnnotation, "true").
				Req(map[corev1.ResourceName]string{testGPU: "1"}).OwnerReference("rs-"+name, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
			require.NoError(t, f.pods.Add(pod))
			_, err := f.handle.clientset.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
			require.NoError(t, err)
			pods = append(pods, pod)
		}
	}
	snapshot := internalcache.NewSnapshot(pods, nodes)
	f.handle.snapshot = snapshot
	infos, err := snapshot.NodeInfos().List()
	require.NoError(t, err)
	members := replicaGroup(t, f, 2, 4)
	for _, sub := range members {
		for _, pod := range sub {
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{testGPU: resource.MustParse("2")}
			require.NoError(t, f.pods.Update(pod))
		}
	}
	return f, members, pods, infos
}

// The replicas fit the free capacity but no rack: PreFilter marks the cycle, and PostFilter moves
// the pods of racks a and c to rack b (a chosen first, by name, its pods sent to b; then c, as b
// received pods), reserves the four nodes of a and c, and says so. Once the pods are gone, each
// replica is assigned a rack of the reserved nodes.
func TestMovablePodsAreMovedToMakeARackForEachSubGroup(t *testing.T) {
	f, members, pods, infos := fragmentedRacks(t)
	ctx := context.Background()
	state := framework.NewCycleState()
	_, status := f.gang.PreFilter(ctx, state, members[0][0], infos)
	require.Equal(t, fwk.Unschedulable, status.Code())
	require.Contains(t, status.Message(), "the sub-groups of pod group ns/train do not fit")
	_, status = f.gang.PostFilter(ctx, state, members[0][0], nil)
	require.Equal(t, fwk.Unschedulable, status.Code())
	msg := status.Message()
	assert.Contains(t, msg, "Consolidating: the sub-groups of pod group ns/train fit in the cluster's free capacity but on no set of domains; moving 4 pods")
	assert.Contains(t, msg, "to make nodes a0, a1, c0, c1 whole for it (sub-group r0 in rack=a, r1 in rack=c)")
	for _, node := range []string{"a0", "a1", "c0", "c1"} {
		owner, r, held := f.gang.groups.reservedFor(node)
		require.True(t, held, "node %s is reserved", node)
		assert.Equal(t, groupKey{"ns", "train"}, owner)
		assert.True(t, r.consolidation)
	}
	for _, node := range []string{"b0", "b1"} {
		_, _, held := f.gang.groups.reservedFor(node)
		assert.False(t, held, "node %s, which receives the moved pods, is not reserved", node)
	}
	remaining := func() map[string]bool {
		list, err := f.handle.clientset.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string]bool{}
		for _, p := range list.Items {
			out[p.Name] = true
		}
		return out
	}
	require.Eventually(t, func() bool { return len(remaining()) == 2 }, 10*time.Second, 10*time.Millisecond, "the 4 pods of racks a and c are evicted")
	assert.Equal(t, map[string]bool{"b0-pod": true, "b1-pod": true}, remaining())

	// The moved pods gone, the replicas are assigned the racks made whole.
	var left []*corev1.Pod
	var nodes []*corev1.Node
	for _, pod := range pods {
		if remaining()[pod.Name] {
			left = append(left, pod)
		}
	}
	for _, info := range infos {
		nodes = append(nodes, info.Node())
	}
	after, err := internalcache.NewSnapshot(left, nodes).NodeInfos().List()
	require.NoError(t, err)
	f.gang.groups.with(groupKey{"ns", "train"}, func(s *groupState) { s.unfit = "" })
	result, status := f.gang.PreFilter(ctx, framework.NewCycleState(), members[0][0], after)
	require.True(t, status.IsSuccess(), "%v", status)
	rack := result.NodeNames.UnsortedList()
	assert.Len(t, rack, 2)
	assert.Subset(t, []string{"a0", "a1", "c0", "c1"}, rack, "its replica goes to a rack made whole")
}

// Nothing moves when the pods that may move could not make a rack whole: here none declared
// itself movable.
func TestNothingMovesForSubGroupsWithoutMovablePods(t *testing.T) {
	f, members, pods, infos := fragmentedRacks(t)
	for _, pod := range pods {
		pod.Annotations = nil
		require.NoError(t, f.pods.Update(pod))
	}
	ctx := context.Background()
	state := framework.NewCycleState()
	_, status := f.gang.PreFilter(ctx, state, members[0][0], infos)
	require.Equal(t, fwk.Unschedulable, status.Code())
	_, status = f.gang.PostFilter(ctx, state, members[0][0], nil)
	assert.NotContains(t, status.Message(), "Consolidating")
	for _, info := range infos {
		_, _, held := f.gang.groups.reservedFor(info.Node().Name)
		assert.False(t, held)
	}
}

// A pod of a group with sub-groups moves as elastic only when its own sub-group runs above its
// minimum, as reclaim takes it: a group of two whole sub-groups of 4 that needs one of them runs
// 4 pods above its minMember, but none of them moves alone; a group of one sub-group of 8 pods
// with a minimum of 4 gives 4.
func TestElasticPodsOfSubGroupsMoveWithinTheirSubGroupsSpare(t *testing.T) {
	inSubGroups := func(subOf func(node int) string) func(int, *corev1.Pod) {
		return func(node int, pod *corev1.Pod) {
			if node >= 2 {
				pod.Labels = map[string]string{v1alpha1.PodGroupLabel: "elastic", v1alpha1.SubGroupLabel: subOf(node)}
			}
		}
	}
	elastic := func(t *testing.T, f *fragmentedFixture, subs ...string) {
		pg := f.group(t, "elastic", 4, nil, f.now.Add(-time.Hour))
		pg.Spec.MinSubGroups = ptr.To[int32](1)
		for _, sub := range subs {
			pg.Spec.SubGroups = append(pg.Spec.SubGroups, v1alpha1.SubGroup{Name: sub, MinMember: 4})
		}
		require.NoError(t, f.groups.Update(pg))
		obj, _, _ := f.groups.GetByKey("ns/wide")
		wide := obj.(*v1alpha1.PodGroup).DeepCopy()
		wide.Spec.MinMember = 1
		require.NoError(t, f.groups.Update(wide))
	}

	f := newFragmented(t, inSubGroups(func(node int) string { return fmt.Sprintf("s%d", node) }))
	elastic(t, f, "s2", "s3")
	assert.NotContains(t, f.tryMember(t), "Consolidating", "both sub-groups run their minimum only")

	f = newFragmented(t, inSubGroups(func(int) string { return "s" }))
	elastic(t, f, "s")
	assert.Contains(t, f.tryMember(t), "Consolidating", "one member of 8 needs 4 moves, and the sub-group runs 4 above its minimum")
	require.Eventually(t, func() bool { return len(f.remaining(t)) == 12 }, 10*time.Second, 10*time.Millisecond)
}
