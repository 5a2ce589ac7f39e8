package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/queueorder"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func ledgerPod(uid string, labels map[string]string, node string, gpus int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: v1alpha1.SchedulerName,
			NodeName:      node,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
			}}},
		},
	}
}

func TestLedgerFollowsPodsThroughTheirLives(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	groups := map[string]string{}
	resolve := func(ns, name string) string { return groups[ns+"/"+name] }
	inTeam := map[string]string{v1alpha1.QueueLabel: "team"}

	pending := ledgerPod("a", inTeam, "", 2)
	l.observe(pending, resolve)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.view().pending["team"])

	l.assume(pending, "team", "")
	v := l.view()
	assert.Equal(t, quota.Amounts{gpu: 2}, v.allocated["team"], "a reserved pod counts at once")
	assert.Empty(t, v.pending["team"])

	// A status update that does not show the bind yet must not undo the reservation.
	l.observe(pending, resolve)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.view().allocated["team"])

	l.unassume(pending.UID)
	assert.Empty(t, l.view().allocated["team"])
	assert.Equal(t, quota.Amounts{gpu: 2}, l.view().pending["team"])

	bound := ledgerPod("a", inTeam, "node", 2)
	l.observe(bound, resolve)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.view().allocated["team"])

	done := bound.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	l.observe(done, resolve)
	assert.Empty(t, l.view().allocated["team"], "an ended pod gives its share back")

	// Pods of other schedulers that name no queue or group are not Tephra's.
	foreign := ledgerPod("f", nil, "node", 1)
	foreign.Spec.SchedulerName = "default-scheduler"
	l.observe(foreign, resolve)
	assert.Empty(t, l.view().allocated)

	// A member seen before its PodGroup counts once the group arrives.
	member := ledgerPod("m", map[string]string{v1alpha1.PodGroupLabel: "job"}, "node", 4)
	l.observe(member, resolve)
	assert.Empty(t, l.view().allocated)
	groups["ns/job"] = "team"
	l.groupAdded("ns/job", resolve)
	assert.Equal(t, quota.Amounts{gpu: 4}, l.view().allocated["team"])
	placed, count := l.groupPlacement("ns/job")
	assert.Equal(t, quota.Amounts{gpu: 4}, placed)
	assert.Equal(t, 1, count)

	l.forget(member.UID, member)
	assert.Empty(t, l.view().allocated)
	_, count = l.groupPlacement("ns/job")
	assert.Zero(t, count)
}

func TestLedgerKeepsFreshNominations(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "" }
	pod := ledgerPod("p", map[string]string{v1alpha1.QueueLabel: "team"}, "", 1)
	l.observe(pod, resolve)
	l.nominate(pod.UID, "node-1", time.Now())
	// The informer shows the pod before the nomination was written: it still counts.
	l.observe(pod, resolve)
	assert.Equal(t, quota.Amounts{gpu: 1}, l.view().nominated["team"])
	e, _ := l.entry(pod.UID)
	assert.Equal(t, "node-1", e.nominatedNode)

	l.nominate(pod.UID, "node-1", time.Now().Add(-time.Hour))
	l.observe(pod, resolve)
	assert.Empty(t, l.view().nominated["team"], "an old nomination the pod does not show is dropped")
}

func TestTotalLeavesOutPods(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	l.setNode("n1", corev1.ResourceList{gpu: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")})
	l.setNode("n2", corev1.ResourceList{gpu: resource.MustParse("4")})
	l.setNode("n1", corev1.ResourceList{gpu: resource.MustParse("2")})
	assert.Equal(t, quota.Amounts{gpu: 6}, l.view().total)
	l.setNode("n2", nil)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.view().total)
}

// Only pods that can run now are demand: not gated pods, not the pods of a group with fewer
// members than its minimum (until the rest arrive).
func TestPendingIsWhatCanRunNow(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	minimum := map[string]int{"ns/job": 3}
	l.minMember = func(group string) int { return minimum[group] }
	resolve := func(string, string) string { return "team" }
	inJob := map[string]string{v1alpha1.PodGroupLabel: "job"}

	gated := ledgerPod("gated", map[string]string{v1alpha1.QueueLabel: "team"}, "", 1)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	l.observe(gated, resolve)
	assert.Empty(t, l.view().pending["team"], "a gated pod cannot be scheduled")
	ungated := gated.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	l.observe(ungated, resolve)
	assert.Equal(t, quota.Amounts{gpu: 1}, l.view().pending["team"], "ungated, it is demand")

	l.observe(ledgerPod("m0", inJob, "", 2), resolve)
	l.observe(ledgerPod("m1", inJob, "", 2), resolve)
	assert.Equal(t, quota.Amounts{gpu: 1}, l.view().pending["team"], "2 of the group's 3 members exist: it cannot run yet")
	third := ledgerPod("m2", inJob, "", 2)
	l.observe(third, resolve)
	assert.Equal(t, quota.Amounts{gpu: 7}, l.view().pending["team"], "with its third member the group is demand")
	l.assume(third, "team", "ns/job")
	assert.Equal(t, quota.Amounts{gpu: 5}, l.view().pending["team"], "a reserved member still counts as a member")

	minimum["ns/job"] = 4
	l.minimumChanged("ns/job") // the PodGroup informer's update
	assert.Equal(t, quota.Amounts{gpu: 1}, l.view().pending["team"], "a raised minimum leaves the group short again")
}

// deviceLookup is a quota.DeviceLookup of fixed claims, all of one class without devices known.
type deviceLookup map[string]*resourceapi.ResourceClaim

func (d deviceLookup) DeviceClass(name string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
func (d deviceLookup) Device(string, string, string) *resourceapi.Device { return nil }
func (d deviceLookup) SharesDevices(string) bool                         { return false }
func (d deviceLookup) DefaultShare(string) quota.Amounts                 { return nil }
func (d deviceLookup) ResourceClaim(_, name string) *resourceapi.ResourceClaim {
	return d[name]
}
func (d deviceLookup) ResourceClaimTemplate(string, string) *resourceapi.ResourceClaimTemplate {
	return nil
}

// A claim that several pods of a queue name, not reserved yet, is charged to each of them (any
// may be first), and the queue counts it once, placed or pending, until the last is gone.
func TestLedgerCountsAClaimNamedByManyPodsOnce(t *testing.T) {
	channel := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "channel", Namespace: "ns"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	l := newLedger(v1alpha1.SchedulerName)
	l.devices = deviceLookup{"channel": channel}
	resolve := func(string, string) string { return "" }
	inTeam := map[string]string{v1alpha1.QueueLabel: "team"}
	channels := quota.DevicesName("channel")
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pod := ledgerPod(name, inTeam, "", 1)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("channel")}}
		pods = append(pods, pod)
		l.observe(pod, resolve)
	}
	assert.Equal(t, quota.Amounts{gpu: 3, channels: 1}, l.view().pending["team"])
	l.assume(pods[0], "team", "")
	l.assume(pods[1], "team", "")
	v := l.view()
	assert.Equal(t, quota.Amounts{gpu: 2, channels: 1}, v.allocated["team"], "two pods placed with one claim")
	assert.Equal(t, quota.Amounts{gpu: 1, channels: 1}, v.pending["team"])
	assert.Equal(t, quota.Amounts{channels: 1}, l.placedClaimsIn("team", "ns", map[string]quota.Amounts{"channel": {channels: 1}}))
	l.unassume(pods[0].UID)
	assert.Equal(t, quota.Amounts{gpu: 1, channels: 1}, l.view().allocated["team"])
	l.forget(pods[1].UID, pods[1])
	l.forget(pods[0].UID, pods[0])
	l.forget(pods[2].UID, pods[2])
	v = l.view()
	assert.Empty(t, v.allocated["team"])
	assert.Empty(t, v.pending["team"], "nothing is left when the last pod is gone")
}

// A claim's charge that changes (its class known at last, its allocation made) counts as soon as
// one of the pods that name it is recorded again, not when the last of them is gone.
func TestLedgerFollowsAChangedClaimCharge(t *testing.T) {
	request := resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
	channel := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "channel", Namespace: "ns"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{request}}}}
	lookup := deviceLookup{"channel": channel}
	l := newLedger(v1alpha1.SchedulerName)
	l.devices = lookup
	resolve := func(string, string) string { return "" }
	inTeam := map[string]string{v1alpha1.QueueLabel: "team"}
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b"} {
		pod := ledgerPod(name, inTeam, "", 1)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("channel")}}
		pods = append(pods, pod)
		l.observe(pod, resolve)
	}
	channels := quota.DevicesName("channel")
	assert.Equal(t, quota.Amounts{gpu: 2, channels: 1}, l.view().pending["team"])
	changed := channel.DeepCopy()
	changed.Spec.Devices.Requests[0].Exactly.Count = 2
	lookup["channel"] = changed
	l.refresh(pods[0], resolve)
	assert.Equal(t, quota.Amounts{gpu: 2, channels: 2}, l.view().pending["team"], "the newest charge counts")
	l.forget(pods[0].UID, pods[0])
	l.forget(pods[1].UID, pods[1])
	assert.Empty(t, l.view().pending["team"], "and goes with the last pod")
	l.refresh(pods[0], resolve)
	assert.Empty(t, l.view().pending["team"], "a refresh does not bring back a pod the ledger forgot")
}

// A queue held to its deserved share waits only for queues that could use the room: when each
// waiting queue's next workload is larger than what its share has left, the workload goes beyond
// its share rather than leave the cluster idle; with a waiting workload that fits another queue's
// room, or when reclaiming, the share holds.
func TestIdleCapacityIsNotHeldForQueuesThatCannotUseIt(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	l.setNode("n", corev1.ResourceList{gpu: resource.MustParse("128")})
	l.minMember = func(string) int { return 8 }
	groups := map[string]string{"ns/a": "team-a", "ns/b": "team-b", "ns/c": "team-c"}
	resolve := func(ns, name string) string { return groups[ns+"/"+name] }
	for _, team := range []string{"a", "b", "c"} {
		l.groupAdded("ns/"+team, resolve)
		for i := range 8 {
			l.observe(ledgerPod(fmt.Sprintf("%s-%d", team, i), map[string]string{v1alpha1.PodGroupLabel: team}, "", 8), resolve)
		}
	}
	tree := quota.NewTree([]*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-c"}},
	})
	v := l.view()
	s := state{tree: tree, view: v, deserved: quota.Deserved(tree, v.total, demandOf(v)), pendingFits: l.pendingFits}
	require.Equal(t, int64(42), s.deserved["team-a"][gpu], "a third of 128 GPUs each")
	need := quota.Amounts{gpu: 64}

	assert.Empty(t, s.admit(tree.Get("team-a"), need, nil, false), "every queue waits with a gang of 64 GPUs, more than the 42 its share leaves: team-a's goes")
	assert.Contains(t, s.admit(tree.Get("team-a"), need, map[string]quota.Amounts{}, false), "QueueOverDeservedShare", "not by reclaim")
	assert.Contains(t, s.admit(tree.Get("team-a"), need, nil, true), "QueueOverDeservedShare", "not with nominated pods, as reclaim counts")

	l.observe(ledgerPod("small", map[string]string{v1alpha1.QueueLabel: "team-b"}, "", 8), resolve)
	v = l.view()
	s = state{tree: tree, view: v, deserved: quota.Deserved(tree, v.total, demandOf(v)), pendingFits: l.pendingFits}
	assert.Contains(t, s.admit(tree.Get("team-a"), need, nil, false), "QueueOverDeservedShare", "team-b has a pod of 8 GPUs that fits its share: team-a keeps to its own")
}

// A held pod is told of the same workload attempt after attempt (the highest priority, then
// the first by name, of those that could use the room): a message that named whichever the
// ledger's map gave first changed on most attempts, and each change is a status write.
func TestAHoldNamesTheSameWorkloadEveryTime(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	l.setNode("n", corev1.ResourceList{gpu: resource.MustParse("16")})
	resolve := func(string, string) string { return "" }
	inA := map[string]string{v1alpha1.QueueLabel: "team-a"}
	inB := map[string]string{v1alpha1.QueueLabel: "team-b"}
	l.observe(ledgerPod("a-running", inA, "n", 8), resolve)
	for _, name := range []string{"b-3", "b-1", "b-2", "b-4"} {
		l.observe(ledgerPod(name, inB, "", 1), resolve)
	}
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}})
	said := func() string {
		v := l.view()
		s := state{tree: tree, view: v, deserved: quota.Deserved(tree, v.total, demandOf(v)), pendingFits: l.pendingFits}
		return s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false)
	}
	for range 20 {
		require.Contains(t, said(), `it yields to pod ns/b-1 of queue "team-b"`)
	}
	urgent := ledgerPod("b-9", inB, "", 1)
	urgent.Spec.Priority = new(int32(100))
	l.observe(urgent, resolve)
	assert.Contains(t, said(), `it yields to pod ns/b-9 of queue "team-b"`, "a higher priority first")
}

// A hold names the workload the other queue's order runs next among those that fit, not the first
// by name: under least attained service or shortest estimate first the two differ, and a hold for
// a workload its own queue leaves waiting kept the held queue waiting for nothing.
func TestAHoldNamesTheWorkloadItsQueueRunsNext(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	l.setNode("n", corev1.ResourceList{gpu: resource.MustParse("16")})
	resolve := func(string, string) string { return "" }
	inA := map[string]string{v1alpha1.QueueLabel: "team-a"}
	inB := map[string]string{v1alpha1.QueueLabel: "team-b"}
	l.observe(ledgerPod("a-running", inA, "n", 8), resolve)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	places := map[string]queueorder.Rank{
		"b-1": {Place: base.Add(4 * time.Hour)}, // served long: its queue runs it last
		"b-2": {Place: base.Add(time.Minute)},
		"b-3": {Place: base.Add(time.Minute), FirstTry: true}, // never refused: before b-2
		"b-4": {Place: base, Share: 0.5},                      // its job holds half the cluster
	}
	for name := range places {
		l.observe(ledgerPod(name, inB, "", 1), resolve)
	}
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}})
	rank := func(e *podEntry) queueorder.Rank { return places[e.name] }
	said := func() string {
		v := l.view()
		s := state{tree: tree, view: v, deserved: quota.Deserved(tree, v.total, demandOf(v)),
			pendingFits: func(queue string, room quota.Amounts, placeable func(*podEntry, int) bool) waitingWorkload {
				return l.pendingFitsInOrder(queue, room, placeable, rank)
			}}
		return s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false)
	}
	assert.Contains(t, said(), `it yields to pod ns/b-3 of queue "team-b"`)
	places["b-3"] = queueorder.Rank{Place: base.Add(2 * time.Minute)}
	assert.Contains(t, said(), `it yields to pod ns/b-2 of queue "team-b"`, "refused, b-3 sorts after b-2")
	assert.Equal(t, "pod ns/b-1", l.pendingFits("team-b", quota.Amounts{gpu: 8}, nil).name, "without a rank, by name")
}

// The room a gang's preemption frees is its queue's, not idle capacity another queue may borrow
// beyond its share. Volcano's "preemption only works in the same queue" with another queue
// waiting (test/e2e/preemption), as the ledger sees it while j3's victims go: q1's j3 (a gang of
// 2) has one member nominated to a victim's node, the victims of q1's j1 are going or gone, q2
// holds its deserved 2 with j2 and waits with j4. j4 must not take the room: counted as a gang
// of 2 with nothing placed, j3 seemed not to fit in what q1's share had left, j4 went beyond
// q2's share into the room, and j3 then reclaimed j2 whole (issue #38's CI failure).
func TestARoomOnItsWayToAGangIsNotLentToAnotherQueue(t *testing.T) {
	for _, victims := range []string{"gone", "terminating"} {
		t.Run("victims "+victims, func(t *testing.T) {
			l := newLedger(v1alpha1.SchedulerName)
			for i := range 4 {
				l.setNode(fmt.Sprintf("n%d", i), corev1.ResourceList{gpu: resource.MustParse("1")})
			}
			minimum := map[string]int{"ns/j1": 2, "ns/j2": 2, "ns/j3": 2, "ns/j4": 1}
			l.minMember = func(group string) int { return minimum[group] }
			queues := map[string]string{"ns/j1": "q1", "ns/j2": "q2", "ns/j3": "q1", "ns/j4": "q2"}
			resolve := func(ns, name string) string { return queues[ns+"/"+name] }
			member := func(job string, i int, node string) *corev1.Pod {
				return ledgerPod(fmt.Sprintf("%s-%d", job, i), map[string]string{v1alpha1.PodGroupLabel: job}, node, 1)
			}
			for _, job := range []string{"j1", "j2", "j3", "j4"} {
				l.groupAdded("ns/"+job, resolve)
			}
			l.observe(member("j2", 0, "n2"), resolve)
			l.observe(member("j2", 1, "n3"), resolve)
			l.observe(member("j4", 0, ""), resolve)
			for i := range 4 {
				l.observe(member("j3", i, ""), resolve)
			}
			// j1's replacements wait; of its evicted pods, the one on n0 is gone and the one on
			// n1 is gone too, or still terminating.
			l.observe(member("j1", 2, ""), resolve)
			l.observe(member("j1", 3, ""), resolve)
			if victims == "terminating" {
				going := member("j1", 1, "n1")
				going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				l.observe(going, resolve)
			}
			l.nominate("j3-1", "n0", time.Now())

			tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "q1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "q2"}}})
			v := l.view()
			s := state{tree: tree, view: v, deserved: quota.Deserved(tree, v.total, demandOf(v)), pendingFits: l.pendingFits}
			require.Equal(t, int64(2), s.deserved["q2"][gpu], "half of 4 each")
			assert.Contains(t, s.admit(tree.Get("q2"), quota.Amounts{gpu: 1}, nil, false), "QueueOverDeservedShare",
				"j3 needs one more member, which q1's share has room for: j4 keeps to q2's share")
		})
	}
}

// A queue at its share is not held for another queue's pods above their group's placed minimum:
// those take only what is free once other groups' minimums are placed (TephraGang's
// ElasticWaiting), the held pod's among them, so each would wait for the other beside the idle
// room. The synthetic day's replay saw queues yield, thousands of times, to an elastic job whose
// minimum had run for hours.
func TestAQueueIsNotHeldForPodsAboveAPlacedMinimum(t *testing.T) {
	l := newLedger(v1alpha1.SchedulerName)
	l.setNode("n", corev1.ResourceList{gpu: resource.MustParse("16")})
	l.minMember = func(string) int { return 1 }
	groups := map[string]string{"ns/b": "team-b"}
	resolve := func(ns, name string) string { return groups[ns+"/"+name] }
	inA := map[string]string{v1alpha1.QueueLabel: "team-a"}
	l.observe(ledgerPod("a-running", inA, "n", 8), resolve)
	l.observe(ledgerPod("a-small", inA, "", 1), resolve)
	l.groupAdded("ns/b", resolve)
	l.observe(ledgerPod("b-0", map[string]string{v1alpha1.PodGroupLabel: "b"}, "n", 2), resolve)
	l.observe(ledgerPod("b-1", map[string]string{v1alpha1.PodGroupLabel: "b"}, "", 2), resolve)
	l.observe(ledgerPod("b-big", map[string]string{v1alpha1.QueueLabel: "team-b"}, "", 12), resolve)
	tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}})
	v := l.view()
	s := state{tree: tree, view: v, deserved: quota.Deserved(tree, v.total, demandOf(v)), pendingFits: l.pendingFits}
	require.Equal(t, int64(8), s.deserved["team-a"][gpu], "half of 16 each")

	assert.Empty(t, s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false),
		"b-1 is above its group's placed minimum and b-big does not fit team-b's room: team-a's pod goes")

	l.minMember = func(string) int { return 2 }
	assert.Contains(t, s.admit(tree.Get("team-a"), quota.Amounts{gpu: 1}, nil, false), `it yields to pod group ns/b of queue "team-b"`,
		"with a minimum of 2, b-1 completes it: team-a keeps to its share")
}
