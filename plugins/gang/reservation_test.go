package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// slaGroup makes group "big" (2 members of 1 CPU, SLA waiting time 30s) and three nodes of 1
// CPU, and returns its first member and the nodes.
func (f *fixture) slaGroup(t *testing.T) (*corev1.Pod, []fwk.NodeInfo) {
	t.Helper()
	pg := f.group(t, "big", 2, nil, f.now)
	pg.Annotations = map[string]string{v1alpha1.SLAWaitingTimeAnnotation: "30s"}
	require.NoError(t, f.groups.Update(pg))
	m0 := f.member(t, "m0", "big", "")
	f.member(t, "m1", "big", "")
	return m0, []fwk.NodeInfo{cpuNode("n1", 1), cpuNode("n2", 1), cpuNode("n3", 1)}
}

// A group that waits past its SLA gets nodes reserved: later pods of its priority are kept off
// them, pods of higher priority and other nodes are not, and the reservation ends with the
// minimum placed.
func TestSLAReservation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m0, nodes := f.slaGroup(t)

	_, status := f.gang.PreFilter(ctx, nil, m0, nodes)
	assert.True(t, status.IsSuccess(), "within its SLA the group is not held")
	other := f.member(t, "other", "", "")
	assert.Nil(t, f.gang.Filter(ctx, nil, other, nodes[0]), "no reservation yet")

	f.now = f.now.Add(31 * time.Second)
	result, status := f.gang.PreFilter(ctx, nil, m0, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, result)
	assert.Equal(t, 2, result.NodeNames.Len(), "two 1-CPU nodes hold the 2-CPU minimum")
	reserved := result.NodeNames.UnsortedList()[0]
	var info fwk.NodeInfo
	for _, n := range nodes {
		if n.Node().Name == reserved {
			info = n
		}
	}
	s := f.gang.Filter(ctx, nil, other, info)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code())
	assert.Contains(t, s.Message(), "reserved for pod group ns/big")
	assert.Contains(t, <-f.handle.recorder.Events, "Reserved: the group has waited 31s, past its SLA waiting time of 30s")

	f.gang.releaseReservation(klog.Background(), groupKey{"ns", "big"})
	assert.Nil(t, f.gang.Filter(ctx, nil, other, info))
}

// Two groups past their SLA never reserve the same node; a group whose pending pods are gone
// (its Job suspended) gives its nodes back.
func TestSLAReservationsAreDisjointAndReleased(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var first []*corev1.Pod
	for _, name := range []string{"g1", "g2"} {
		pg := f.group(t, name, 2, nil, f.now)
		pg.Annotations = map[string]string{v1alpha1.SLAWaitingTimeAnnotation: "30s"}
		require.NoError(t, f.groups.Update(pg))
		first = append(first, f.member(t, name+"-0", name, ""))
		f.member(t, name+"-1", name, "")
	}
	nodes := []fwk.NodeInfo{cpuNode("n1", 1), cpuNode("n2", 1), cpuNode("n3", 1), cpuNode("n4", 1)}
	f.now = f.now.Add(31 * time.Second)
	r1, status := f.gang.PreFilter(ctx, nil, first[0], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	r2, status := f.gang.PreFilter(ctx, nil, first[1], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, r1)
	require.NotNil(t, r2)
	assert.Equal(t, 2, r1.NodeNames.Len())
	assert.Equal(t, 2, r2.NodeNames.Len())
	assert.Empty(t, r1.NodeNames.Intersection(r2.NodeNames).UnsortedList(), "reservations overlap")

	// g1's pods are deleted (its Job suspended): a pod of another workload may use its nodes.
	for _, name := range []string{"g1-0", "g1-1"} {
		obj, _, _ := f.pods.GetByKey("ns/" + name)
		require.NoError(t, f.pods.Delete(obj))
	}
	other := f.member(t, "other", "", "")
	for _, n := range nodes {
		if r1.NodeNames.Has(n.Node().Name) {
			assert.Nil(t, f.gang.Filter(ctx, nil, other, n), "g1's node %s is given back", n.Node().Name)
		}
		if r2.NodeNames.Has(n.Node().Name) {
			assert.NotNil(t, f.gang.Filter(ctx, nil, other, n), "g2's node %s stays reserved", n.Node().Name)
		}
	}
}
