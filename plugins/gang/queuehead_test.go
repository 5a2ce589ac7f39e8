package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/utils/ptr"
)

// queueHeadFixture: two 2-CPU nodes, n1 full with a running pod; queue "team" waits with group
// "first" (two 2-CPU members), then "second" (the same, a minute younger). Neither minimum fits.
func queueHeadFixture(t *testing.T, reserveAtHead bool) (*fixture, []fwk.NodeInfo) {
	t.Helper()
	f := newFixture(t)
	f.gang.args.QueueHeadReservations = ptr.To(reserveAtHead)
	running := f.podOf(t, "running", "", "2", nil)
	f.bind(t, running, "n1")
	for i, name := range []string{"first", "second"} {
		pg := f.group(t, name, 2, nil, f.now.Add(time.Duration(i)*time.Minute))
		pg.Spec.Queue = "team"
		require.NoError(t, f.groups.Update(pg))
		m0 := f.podOf(t, name+"-0", name, "2", nil)
		f.podOf(t, name+"-1", name, "2", nil)
		require.True(t, f.gang.PreEnqueue(context.Background(), m0).IsSuccess(), "the group's minimum exists and heads for the queue")
	}
	nodes := []*corev1.Node{cpuNodeObj("n1", 2), cpuNodeObj("n2", 2)}
	snapshot := internalcache.NewSnapshot([]*corev1.Pod{running}, nodes)
	f.handle.snapshot = snapshot
	infos, err := snapshot.NodeInfos().List()
	require.NoError(t, err)
	return f, infos
}

func cpuNodeObj(name string, cpus int) *corev1.Node {
	return cpuNode(name, cpus).Node()
}

func (f *fixture) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	obj, exists, err := f.pods.GetByKey("ns/" + name)
	require.NoError(t, err)
	require.True(t, exists, name)
	return obj.(*corev1.Pod)
}

// The group at the head of its queue whose minimum cannot fit gets nodes reserved at once,
// without an SLA; the group behind it in the same queue does not, and no group does when
// queueHeadReservations is off.
func TestTheHeadOfAQueueReservesWhileItCannotFit(t *testing.T) {
	ctx := context.Background()
	f, nodes := queueHeadFixture(t, true)

	_, status := f.gang.PreFilter(ctx, nil, f.pod(t, "second-0"), nodes)
	require.Equal(t, fwk.Unschedulable, status.Code())
	assert.NotContains(t, status.Message(), "reserved", "group first heads the queue, not second")
	assert.Zero(t, f.gang.groups.reservationCount())

	_, status = f.gang.PreFilter(ctx, nil, f.pod(t, "first-0"), nodes)
	require.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, "NotEnoughResources: the minimum of pod group ns/first needs cpu 4 (2 free); it heads its queue, and nodes n2, n1 are reserved for it", status.Message())
	assert.Contains(t, <-f.handle.recorder.Events, `Reserved: the group heads queue "team" and its minimum cannot fit now: nodes n2, n1 are reserved for it until its minimum runs`)
	plain := f.podOf(t, "plain", "", "1", nil)
	s := f.gang.Filter(ctx, nil, plain, nodes[1])
	require.NotNil(t, s)
	assert.Equal(t, `node is reserved for pod group ns/first, which heads queue "team" and cannot fit; the pod has no runtime estimate, so it does not backfill the reservation`, s.Message())

	f, nodes = queueHeadFixture(t, false)
	_, status = f.gang.PreFilter(ctx, nil, f.pod(t, "first-0"), nodes)
	require.Equal(t, fwk.Unschedulable, status.Code())
	assert.Zero(t, f.gang.groups.reservationCount(), "queueHeadReservations is off by default")
}

// A queue has one head reservation: a group of higher priority that comes to head the queue
// takes it over, and the group it displaced gives its nodes back.
func TestANewHeadTakesOverItsQueuesReservation(t *testing.T) {
	ctx := context.Background()
	f, nodes := queueHeadFixture(t, true)
	_, _ = f.gang.PreFilter(ctx, nil, f.pod(t, "first-0"), nodes)
	owner, _, held := f.gang.groups.reservedFor("n2")
	require.True(t, held)
	require.Equal(t, groupKey{"ns", "first"}, owner)

	for _, name := range []string{"second-0", "second-1"} {
		p := f.pod(t, name).DeepCopy()
		p.Spec.Priority = ptr.To[int32](100)
		require.NoError(t, f.pods.Update(p))
	}
	require.True(t, f.gang.PreEnqueue(ctx, f.pod(t, "second-0")).IsSuccess())
	_, status := f.gang.PreFilter(ctx, nil, f.pod(t, "second-0"), nodes)
	require.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "it heads its queue, and nodes n2, n1 are reserved for it")
	owner, _, held = f.gang.groups.reservedFor("n2")
	require.True(t, held)
	assert.Equal(t, groupKey{"ns", "second"}, owner, "the reservation went to the new head")
	assert.Equal(t, 1, f.gang.groups.reservationCount(), "the queue holds one head reservation")
}
