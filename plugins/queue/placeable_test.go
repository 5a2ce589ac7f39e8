package queue

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// A queue at its deserved share is held for another queue's waiting gang only when the gang's
// next step fits on the nodes as they are: team-b's gang of 4-GPU pods, minimum 2, fits in what its share
// has left (10 free GPUs of 32), but the free GPUs are scattered 2, 2, 2 and 4 over the nodes, so
// team-a's 1-GPU pod goes past its share. Once a node has 4 more free (a pod there terminating),
// team-a waits, and is told for whom.
func TestAHoldKeepsRoomOnlyForAWorkloadThatFitsOnTheNodes(t *testing.T) {
	l := ledger.New(v1alpha1.SchedulerName)
	var nodes []*framework.NodeInfo
	var infos []fwk.NodeInfo
	used := []int64{6, 6, 6, 4}
	for i, u := range used {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: resource.MustParse("8")}}}
		l.SetNode(node.Name, node.Status.Allocatable)
		info := framework.NewNodeInfo()
		info.SetNode(node)
		pod := ledgertest.Pod(fmt.Sprintf("a-%d", i), map[string]string{v1alpha1.QueueLabel: "team-a"}, node.Name, u)
		info.AddPod(pod)
		nodes = append(nodes, info)
		infos = append(infos, info)
	}
	l.MinMember = func(string) int { return 2 }
	groups := map[string]string{"ns/b": "team-b"}
	resolve := func(ns, name string) string { return groups[ns+"/"+name] }
	for _, info := range infos {
		for _, pi := range info.GetPods() {
			l.Observe(pi.GetPod(), resolve)
		}
	}
	l.GroupAdded("ns/b", resolve)
	for i := range 4 {
		l.Observe(ledgertest.Pod(fmt.Sprintf("b-%d", i), map[string]string{v1alpha1.PodGroupLabel: "b"}, "", 4), resolve)
	}
	l.Observe(ledgertest.Pod("a-small", map[string]string{v1alpha1.QueueLabel: "team-a"}, "", 1), resolve)
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}})
	stateNow := func() state {
		v := l.View()
		offered := offeredResources(infos)
		return state{tree: tree, view: v, deserved: quota.Deserved(tree, v.Total, demandOf(v)), pendingFits: l.PendingFits,
			placeable: func() func(*ledger.Entry, int) bool {
				return func(e *ledger.Entry, count int) bool {
					return fitsOnNodes(infos, offered, e.Requests, count, func(*corev1.Node) bool { return true })
				}
			}}
	}
	s := stateNow()
	require.Equal(t, int64(22), s.view.Allocated["team-a"][gpu])
	require.Equal(t, int64(16), s.deserved["team-a"][gpu], "team-a is past its share")

	assert.Empty(t, s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false), "the gang cannot use the scattered room: team-a's pod goes")
	s.placeable = nil
	assert.Contains(t, s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false), "QueueOverDeservedShare", "counted in total only, the room would be held")

	// a-0 terminates: n0's 6 GPUs come back, and the gang's two pods fit on n0 and n3.
	going := infos[0].GetPods()[0].GetPod().DeepCopy()
	going.DeletionTimestamp = &metav1.Time{}
	require.NoError(t, nodes[0].RemovePod(klog.Background(), nodes[0].GetPods()[0].GetPod()))
	nodes[0].AddPod(going)
	l.Observe(going, resolve)
	s = stateNow()
	msg := s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false)
	assert.Contains(t, msg, "QueueOverDeservedShare")
	assert.Contains(t, msg, `it yields to pod group ns/b of queue "team-b", which could use the room`)
}
