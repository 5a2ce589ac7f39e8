package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// With kube-scheduler's pod-group cycles (GenericWorkload on), a pod naming an upstream PodGroup
// in spec.schedulingGroup is ganged by kube-scheduler: TephraGang neither holds it at PreEnqueue
// for its minimum nor at Permit. A member of the same group by Tephra's label only, and any pod
// with the gate off, is still TephraGang's.
func TestPodsInPodGroupCyclesAreNotGangedTwice(t *testing.T) {
	ctx := context.Background()
	for _, gateOn := range []bool{false, true} {
		f := newFixture(t)
		f.gang.podGroupCycles = gateOn
		f.group(t, "train", 3, nil, f.now)
		linked := f.member(t, "linked", "", "")
		linked.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		require.NoError(t, f.pods.Update(linked))
		labelled := f.member(t, "labelled", "train", "")

		preEnqueue := f.gang.PreEnqueue(ctx, linked)
		permit := f.permit(t, linked)
		if gateOn {
			assert.True(t, preEnqueue.IsSuccess(), "gate on: kube-scheduler's GangScheduling waits for minCount, not TephraGang: %v", preEnqueue)
			assert.True(t, permit.IsSuccess(), "gate on: the pod-group cycle placed the group whole: %v", permit)
		} else {
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, preEnqueue.Code(), "gate off: TephraGang waits for 3 members")
			assert.Equal(t, fwk.Wait, permit.Code(), "gate off: TephraGang holds the member for the rest")
		}
		assert.Equal(t, fwk.Wait, f.permit(t, labelled).Code(), "a member by label only is TephraGang's either way")
	}
}

// A group in pod-group cycles that waits past its SLA reserves nodes as a Tephra group does: its
// pods are sent there, other pods kept off, and the reservation ends when the group's pods reach
// Permit (the cycle places the minimum whole), not at Reserve, which the cycle undoes if it fails.
// Its first pod counts the members for the whole cycle.
func TestSLAReservationInPodGroupCycles(t *testing.T) {
	f := newFixture(t)
	f.gang.podGroupCycles = true
	f.handle.snapshot = noGroupStates{}
	ctx := context.Background()
	m0, nodes := f.slaGroup(t)
	for _, name := range []string{"m0", "m1"} {
		obj, _, err := f.pods.GetByKey("ns/" + name)
		require.NoError(t, err)
		p := obj.(*corev1.Pod).DeepCopy()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("big")}
		require.NoError(t, f.pods.Update(p))
		if name == "m0" {
			m0 = p
		}
	}

	_, status := f.gang.PreFilter(ctx, framework.NewCycleState(), m0, nodes)
	assert.Equal(t, fwk.Skip, status.Code(), "within its SLA, and no reservation anywhere: nothing to filter")

	f.now = f.now.Add(31 * time.Second)
	groupCycle := framework.NewCycleState()
	state := framework.NewCycleState()
	state.SetPodGroupSchedulingCycle(groupCycle)
	result, status := f.gang.PreFilter(ctx, state, m0, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, result)
	assert.Equal(t, 2, result.NodeNames.Len(), "two 1-CPU nodes hold the 2-CPU minimum")
	assert.Contains(t, <-f.handle.recorder.Events, "Reserved: the group has waited 31s, past its SLA waiting time of 30s")
	_, err := groupCycle.Read(cycleDecisionKey)
	assert.NoError(t, err, "the cycle's other pods read the reservation")

	other := f.member(t, "other", "", "")
	reserved := result.NodeNames.UnsortedList()[0]
	for _, n := range nodes {
		if n.Node().Name == reserved {
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.Filter(ctx, nil, other, n).Code(), "other pods are kept off the reserved nodes")
			require.True(t, f.gang.Reserve(ctx, state, m0, reserved).IsSuccess())
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.Filter(ctx, nil, other, n).Code(), "Reserve is tentative in a pod-group cycle: the reservation stays")
			s, _ := f.gang.Permit(ctx, state, m0, reserved)
			require.True(t, s.IsSuccess())
			assert.Nil(t, f.gang.Filter(ctx, nil, other, n), "the cycle placed the group: its nodes are free again")
		}
	}
}

// scheduledGroups is a snapshot in which groups have a number of pods scheduled.
type scheduledGroups struct {
	fwk.SharedLister
	counts map[string]int
}

type scheduledGroup struct {
	fwk.PodGroupState
	n int
}

func (s scheduledGroups) PodGroupStates() fwk.PodGroupStateLister { return s }
func (s scheduledGroups) Get(_, name string) (fwk.PodGroupState, error) {
	return scheduledGroup{n: s.counts[name]}, nil
}
func (s scheduledGroup) ScheduledPodsCount() int { return s.n }

// In pod-group cycles, pods above their group's scheduled minimum wait while another group's
// minimum is being placed, as elastic pods do with the gate off; once that group's cycle fails
// (TephraQueue evicted nothing for it), they go.
func TestElasticPodsWaitForMinimumsInPodGroupCycles(t *testing.T) {
	f := newFixture(t)
	f.gang.podGroupCycles = true
	f.handle.snapshot = scheduledGroups{counts: map[string]int{"running": 2}}
	ctx := context.Background()
	inCycle := func(name, group string) *corev1.Pod {
		p := f.member(t, name, "", "").DeepCopy() // the informer's copy is not changed in place
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		require.NoError(t, f.pods.Update(p))
		return p
	}
	cycle := func() fwk.CycleState {
		s := framework.NewCycleState()
		s.SetPodGroupSchedulingCycle(framework.NewCycleState())
		return s
	}
	f.group(t, "running", 2, nil, f.now)
	f.group(t, "waiting", 2, nil, f.now)
	extra := inCycle("running-2", "running")
	w0 := inCycle("waiting-0", "waiting")
	inCycle("waiting-1", "waiting")
	nodes := []fwk.NodeInfo{bigNode()}

	_, status := f.gang.PreFilter(ctx, cycle(), extra, nodes)
	assert.True(t, status.IsSuccess() || status.IsSkip(), "no minimum is pending: %v", status)

	_, status = f.gang.PreFilter(ctx, cycle(), w0, nodes)
	require.True(t, status.IsSuccess() || status.IsSkip(), "%v", status)
	_, status = f.gang.PreFilter(ctx, cycle(), extra, nodes)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "ElasticWaiting: pod running-2 is above the minimum of its group and waits while the minimum of pod group ns/waiting is being placed")

	_, status = f.gang.PodGroupPostFilter(ctx, framework.NewCycleState(), upstreamGroup{pg: &upstreamv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waiting"}}}, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	_, status = f.gang.PreFilter(ctx, cycle(), extra, nodes)
	assert.True(t, status.IsSuccess() || status.IsSkip(), "the minimum's cycle failed: the elastic pod goes: %v", status)
}

// A pod relabelled into a group (an upstream composite's pod, labelled by the adapter after the
// scheduler held it for its child's name) is queued: its own update reaches the hints as
// TargetPod. A label change that leaves its group, sub-group and task alone is not.
func TestAPodRelabelledIntoAGroupIsDecidedAgain(t *testing.T) {
	f := newFixture(t)
	events, err := f.gang.EventsToRegister(context.Background())
	require.NoError(t, err)
	var hint fwk.QueueingHintFn
	for _, e := range events {
		if e.Event.Resource == fwk.TargetPod && e.Event.ActionType&fwk.UpdatePodLabel != 0 {
			hint = e.QueueingHintFn
		}
	}
	require.NotNil(t, hint, "TephraGang registers the pod's own label updates")
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
		SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("serve-decode")},
	}}
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{v1alpha1.PodGroupLabel: "serve", v1alpha1.SubGroupLabel: "serve-decode"}
	h, err := hint(klog.Background(), relabelled, old, relabelled)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, h)

	other := relabelled.DeepCopy()
	other.Labels["app"] = "x"
	h, err = hint(klog.Background(), other, relabelled, other)
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, h)
}
