package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
)

// backfillFixture: two 2-CPU nodes; a 2-CPU pod of group "train" (estimate 10 minutes, running
// for one) on n1; group "big" (two 2-CPU members) past its SLA, so both nodes are reserved for
// it and it may start when train's pod ends, in 9 minutes.
func backfillFixture(t *testing.T) (*fixture, map[string]fwk.NodeInfo) {
	t.Helper()
	f := newFixture(t)
	train := f.group(t, "train", 1, nil, f.now.Add(-2*time.Minute))
	train.Spec.RuntimeEstimateSeconds = ptr.To[int32](600)
	train.Status.Phase = v1alpha1.PodGroupRunning
	train.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(f.now.Add(-time.Minute))}}
	require.NoError(t, f.groups.Update(train))
	running := f.podOf(t, "train-0", "train", "2", nil)
	f.bind(t, running, "n1")

	big := f.group(t, "big", 2, nil, f.now.Add(-31*time.Second))
	big.Annotations = map[string]string{v1alpha1.SLAWaitingTimeAnnotation: "30s"}
	require.NoError(t, f.groups.Update(big))
	m0 := f.podOf(t, "big-0", "big", "2", nil)
	f.podOf(t, "big-1", "big", "2", nil)

	nodes := []*corev1.Node{
		st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourcePods: "110"}).Obj(),
		st.MakeNode().Name("n2").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourcePods: "110"}).Obj(),
	}
	snapshot := internalcache.NewSnapshot([]*corev1.Pod{running}, nodes)
	f.handle.snapshot = snapshot
	infos, err := snapshot.NodeInfos().List()
	require.NoError(t, err)
	_, status := f.gang.PreFilter(context.Background(), nil, m0, infos)
	require.Equal(t, fwk.Unschedulable, status.Code(), "the minimum does not fit while train runs: %v", status)
	byName := map[string]fwk.NodeInfo{}
	for _, n := range infos {
		byName[n.Node().Name] = n
		owner, _, held := f.gang.groups.reservedFor(n.Node().Name)
		require.True(t, held, "node %s is reserved", n.Node().Name)
		require.Equal(t, groupKey{"ns", "big"}, owner)
	}
	assert.Contains(t, <-f.handle.recorder.Events, "nodes n2, n1 are reserved for it until its minimum runs; it may start by 2026-11-21T12:09:00Z, from the runtime estimates of the pods on them")
	return f, byName
}

// podOf makes a pod of a group ("" for none) requesting cpu, with an activeDeadlineSeconds when
// deadline is set.
func (f *fixture) podOf(t *testing.T, name, group, cpu string, deadline *int64) *corev1.Pod {
	t.Helper()
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu})
	if group != "" {
		w = w.Label(v1alpha1.PodGroupLabel, group)
	}
	pod := w.Obj()
	pod.Spec.ActiveDeadlineSeconds = deadline
	pod.CreationTimestamp = metav1.NewTime(f.now)
	require.NoError(t, f.pods.Add(pod))
	return pod
}

// A pod whose estimate ends before the reserved group could start runs on its reserved nodes;
// one whose estimate ends later, or that has none, does not.
func TestBackfillRunsWhatEndsBeforeTheReservedGroupCouldStart(t *testing.T) {
	f, nodes := backfillFixture(t)
	ctx := context.Background()

	short := f.podOf(t, "short", "", "1", ptr.To[int64](300))
	assert.Nil(t, f.gang.Filter(ctx, nil, short, nodes["n2"]), "5 minutes end before big may start, in 9")

	estimated := f.group(t, "eval", 1, nil, f.now)
	estimated.Spec.RuntimeEstimateSeconds = ptr.To[int32](120)
	require.NoError(t, f.groups.Update(estimated))
	assert.Nil(t, f.gang.Filter(ctx, nil, f.podOf(t, "eval-0", "eval", "1", nil), nodes["n2"]), "a group's runtime estimate counts as a pod's deadline does")

	long := f.podOf(t, "long", "", "1", ptr.To[int64](900))
	s := f.gang.Filter(ctx, nil, long, nodes["n2"])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code())
	assert.Equal(t, "node is reserved for pod group ns/big, which waits past its SLA and may start at 2026-11-21T12:09:00Z; the pod's runtime estimate ends at 2026-11-21T12:15:00Z, too late to backfill", s.Message())

	s = f.gang.Filter(ctx, nil, f.podOf(t, "unknown", "", "1", nil), nodes["n2"])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code())
	assert.Equal(t, "node is reserved for pod group ns/big, which waits past its SLA; the pod has no runtime estimate, so it does not backfill the reservation", s.Message())

	// Bound there, the backfilled pod is reported on itself and on the group it runs beside.
	before, err := testutil.GetCounterMetricValue(backfilledPods)
	require.NoError(t, err)
	f.bind(t, short, "n2")
	f.gang.reportBackfill(klog.Background(), short, "n2")
	assert.Equal(t, "Normal Backfilled Backfilled: runs on node n2, reserved for pod group ns/big, until about 2026-11-21T12:05:00Z (its runtime estimate); the group is expected to start by 2026-11-21T12:09:00Z", <-f.handle.recorder.Events)
	assert.Equal(t, "Normal Backfilled Backfilled: pod ns/short runs on reserved node n2 until about 2026-11-21T12:05:00Z (its runtime estimate); the group is expected to start by 2026-11-21T12:09:00Z", <-f.handle.recorder.Events)
	after, err := testutil.GetCounterMetricValue(backfilledPods)
	require.NoError(t, err)
	assert.Equal(t, before+1, after)
}

// Once the pod the group waits for has run past its estimate, the group's start cannot be told,
// and nothing backfills it any more; a pod that outranks the group is never held.
func TestNothingBackfillsWhenABlockerOverran(t *testing.T) {
	f, nodes := backfillFixture(t)
	ctx := context.Background()
	train, err := f.gang.podGroups.PodGroups("ns").Get("train")
	require.NoError(t, err)
	overran := train.DeepCopy()
	overran.Status.Conditions = append(overran.Status.Conditions, metav1.Condition{Type: v1alpha1.PodGroupRuntimeEstimateExceeded, Status: metav1.ConditionTrue})
	require.NoError(t, f.groups.Update(overran))

	s := f.gang.Filter(ctx, nil, f.podOf(t, "short", "", "1", ptr.To[int64](60)), nodes["n2"])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, s.Code())
	assert.Equal(t, "node is reserved for pod group ns/big, which waits past its SLA; its start cannot be told (pod ns/train-0 on its reserved nodes has no trusted runtime estimate), so nothing backfills it", s.Message())

	urgent := f.podOf(t, "urgent", "", "1", nil)
	urgent.Spec.Priority = ptr.To[int32](1000)
	assert.Nil(t, f.gang.Filter(ctx, nil, urgent, nodes["n2"]))
}

// The expected start counts the pods on the reserved nodes ending one by one, earliest first, until
// the group's minimum fits; a pod that requests nothing the group needs does not hold it back.
func TestExpectedStartIsWhenEnoughOfTheBlockersHaveEnded(t *testing.T) {
	f := newFixture(t)
	now := f.now
	a := f.podOf(t, "a", "", "2", ptr.To[int64](60))
	b := f.podOf(t, "b", "", "2", ptr.To[int64](120))
	c := f.podOf(t, "c", "", "2", nil) // never ends, as far as anyone knows
	idle := st.MakePod().Namespace("ns").Name("idle").UID("idle").Obj()
	for pod, node := range map[*corev1.Pod]string{a: "n1", b: "n2", c: "n3", idle: "n1"} {
		pod.Spec.NodeName = node
		pod.Status.StartTime = &metav1.Time{Time: now}
	}
	var nodes []*corev1.Node
	for _, name := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourcePods: "110"}).Obj())
	}
	f.handle.snapshot = internalcache.NewSnapshot([]*corev1.Pod{a, b, c, idle}, nodes)
	r := reservation{nodes: []string{"n1", "n2", "n3"}, need: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}
	start := f.gang.expectedStartOf(groupKey{"ns", "big"}, r, now, f.gang.inSnapshot)
	assert.Equal(t, expectedStart{at: now.Add(2 * time.Minute)}, start, "4 CPUs are free once a and b have ended")

	r.need = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
	assert.Equal(t, "pod ns/c on its reserved nodes has no trusted runtime estimate", f.gang.expectedStartOf(groupKey{"ns", "big"}, r, now, f.gang.inSnapshot).unknown)
}

// When its SLA ends, a group found unable to fit is tried afresh, to reserve nodes: a verdict kept
// from before would refuse its members without reserving any.
func TestTheEndOfTheSLAForgetsTheUnfitVerdict(t *testing.T) {
	f := newFixture(t)
	m0, nodes := f.slaGroup(t)
	key := groupKey{"ns", "big"}
	f.gang.groups.with(key, func(s *groupState) { s.unfit, s.unfitAt = "NotEnoughResources: kept", f.now })
	_, status := f.gang.PreFilter(context.Background(), nil, m0, nodes)
	require.Equal(t, "NotEnoughResources: kept", status.Message(), "within its SLA the kept verdict stands")

	f.now = f.now.Add(30 * time.Second)
	f.gang.armSLA(klog.Background(), key, f.gang.mustGroup(t, key))
	require.Eventually(t, func() bool {
		var unfit string
		f.gang.groups.with(key, func(s *groupState) { unfit = s.unfit })
		f.handle.mu.Lock()
		defer f.handle.mu.Unlock()
		return unfit == "" && len(f.handle.activated) == 2
	}, 5*time.Second, 10*time.Millisecond, "the SLA's timer clears the verdict and brings the members back")
	result, status := f.gang.PreFilter(context.Background(), nil, m0, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, 2, result.NodeNames.Len(), "the members go to the nodes now reserved for them")
}

func (g *groupManager) mustGroup(t *testing.T, key groupKey) *v1alpha1.PodGroup {
	t.Helper()
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	require.NoError(t, err)
	return pg
}

// A member its queue turned away in this cycle holds no nodes for its group: the reservation is
// given back, and made again once the queue admits the group.
func TestAGroupItsQueueTurnsAwayHoldsNoReservation(t *testing.T) {
	f, nodes := backfillFixture(t)
	m0, err := f.pods.ByIndex(podGroupIndex, "ns/big")
	require.NoError(t, err)
	member := m0[0].(*corev1.Pod)
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		infos = append(infos, n)
	}
	state := framework.NewCycleState()
	admission.MarkRefused(state, "QueueOverDeservedShare: queue \"team-a\" would use more than its deserved share")
	_, _ = f.gang.PreFilter(context.Background(), state, member, infos)
	_, _, held := f.gang.groups.reservedFor("n1")
	assert.False(t, held, "the nodes are free for the pods its queue waits to admit")

	f.gang.groups.with(groupKey{"ns", "big"}, func(s *groupState) { s.unfit = "" }) // as an event that may let it fit does
	_, _ = f.gang.PreFilter(context.Background(), framework.NewCycleState(), member, infos)
	_, _, held = f.gang.groups.reservedFor("n1")
	assert.True(t, held, "admitted again, the group past its SLA reserves again")
}
