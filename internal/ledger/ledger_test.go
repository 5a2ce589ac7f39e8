package ledger

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

const gpu = ledgertest.GPU

var ledgerPod = ledgertest.Pod

func TestLedgerFollowsPodsThroughTheirLives(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	groups := map[string]string{}
	resolve := func(ns, name string) string { return groups[ns+"/"+name] }
	inTeam := map[string]string{v1alpha1.QueueLabel: "team"}

	pending := ledgerPod("a", inTeam, "", 2)
	l.Observe(pending, resolve)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.View().Pending["team"])

	l.Assume(pending, "team", "")
	v := l.View()
	assert.Equal(t, quota.Amounts{gpu: 2}, v.Allocated["team"], "a reserved pod counts at once")
	assert.Empty(t, v.Pending["team"])

	// A status update that does not show the bind yet must not undo the reservation.
	l.Observe(pending, resolve)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.View().Allocated["team"])

	l.Unassume(pending.UID)
	assert.Empty(t, l.View().Allocated["team"])
	assert.Equal(t, quota.Amounts{gpu: 2}, l.View().Pending["team"])

	bound := ledgerPod("a", inTeam, "node", 2)
	l.Observe(bound, resolve)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.View().Allocated["team"])

	done := bound.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	l.Observe(done, resolve)
	assert.Empty(t, l.View().Allocated["team"], "an ended pod gives its share back")

	// Pods of other schedulers that name no queue or group are not Tephra's.
	foreign := ledgerPod("f", nil, "node", 1)
	foreign.Spec.SchedulerName = "default-scheduler"
	l.Observe(foreign, resolve)
	assert.Empty(t, l.View().Allocated)

	// A member seen before its PodGroup counts once the group arrives.
	member := ledgerPod("m", map[string]string{v1alpha1.PodGroupLabel: "job"}, "node", 4)
	l.Observe(member, resolve)
	assert.Empty(t, l.View().Allocated)
	groups["ns/job"] = "team"
	l.GroupAdded("ns/job", resolve)
	assert.Equal(t, quota.Amounts{gpu: 4}, l.View().Allocated["team"])
	placed, count := l.GroupPlacement("ns/job")
	assert.Equal(t, quota.Amounts{gpu: 4}, placed)
	assert.Equal(t, 1, count)

	l.Forget(member.UID, member)
	assert.Empty(t, l.View().Allocated)
	_, count = l.GroupPlacement("ns/job")
	assert.Zero(t, count)
}

func TestLedgerKeepsFreshNominations(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "" }
	pod := ledgerPod("p", map[string]string{v1alpha1.QueueLabel: "team"}, "", 1)
	l.Observe(pod, resolve)
	l.Nominate(pod.UID, "node-1", time.Now())
	// The informer shows the pod before the nomination was written: it still counts.
	l.Observe(pod, resolve)
	assert.Equal(t, quota.Amounts{gpu: 1}, l.View().Nominated["team"])
	e, _ := l.Entry(pod.UID)
	assert.Equal(t, "node-1", e.NominatedNode)

	l.Nominate(pod.UID, "node-1", time.Now().Add(-time.Hour))
	l.Observe(pod, resolve)
	assert.Empty(t, l.View().Nominated["team"], "an old nomination the pod does not show is dropped")
}

func TestTotalLeavesOutPods(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	l.SetNode("n1", corev1.ResourceList{gpu: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")})
	l.SetNode("n2", corev1.ResourceList{gpu: resource.MustParse("4")})
	l.SetNode("n1", corev1.ResourceList{gpu: resource.MustParse("2")})
	assert.Equal(t, quota.Amounts{gpu: 6}, l.View().Total)
	l.SetNode("n2", nil)
	assert.Equal(t, quota.Amounts{gpu: 2}, l.View().Total)
}

// Only pods that can run now are demand: not gated pods, not the pods of a group with fewer
// members than its minimum (until the rest arrive).
func TestPendingIsWhatCanRunNow(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	minimum := map[string]int{"ns/job": 3}
	l.MinMember = func(group string) int { return minimum[group] }
	resolve := func(string, string) string { return "team" }
	inJob := map[string]string{v1alpha1.PodGroupLabel: "job"}

	gated := ledgerPod("gated", map[string]string{v1alpha1.QueueLabel: "team"}, "", 1)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	l.Observe(gated, resolve)
	assert.Empty(t, l.View().Pending["team"], "a gated pod cannot be scheduled")
	ungated := gated.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	l.Observe(ungated, resolve)
	assert.Equal(t, quota.Amounts{gpu: 1}, l.View().Pending["team"], "ungated, it is demand")

	l.Observe(ledgerPod("m0", inJob, "", 2), resolve)
	l.Observe(ledgerPod("m1", inJob, "", 2), resolve)
	assert.Equal(t, quota.Amounts{gpu: 1}, l.View().Pending["team"], "2 of the group's 3 members exist: it cannot run yet")
	third := ledgerPod("m2", inJob, "", 2)
	l.Observe(third, resolve)
	assert.Equal(t, quota.Amounts{gpu: 7}, l.View().Pending["team"], "with its third member the group is demand")
	l.Assume(third, "team", "ns/job")
	assert.Equal(t, quota.Amounts{gpu: 5}, l.View().Pending["team"], "a reserved member still counts as a member")

	minimum["ns/job"] = 4
	l.MinimumChanged("ns/job") // the PodGroup informer's update
	assert.Equal(t, quota.Amounts{gpu: 1}, l.View().Pending["team"], "a raised minimum leaves the group short again")
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
	l := New(v1alpha1.SchedulerName)
	l.Devices = deviceLookup{"channel": channel}
	resolve := func(string, string) string { return "" }
	inTeam := map[string]string{v1alpha1.QueueLabel: "team"}
	channels := quota.DevicesName("channel")
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pod := ledgerPod(name, inTeam, "", 1)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("channel")}}
		pods = append(pods, pod)
		l.Observe(pod, resolve)
	}
	assert.Equal(t, quota.Amounts{gpu: 3, channels: 1}, l.View().Pending["team"])
	l.Assume(pods[0], "team", "")
	l.Assume(pods[1], "team", "")
	v := l.View()
	assert.Equal(t, quota.Amounts{gpu: 2, channels: 1}, v.Allocated["team"], "two pods placed with one claim")
	assert.Equal(t, quota.Amounts{gpu: 1, channels: 1}, v.Pending["team"])
	assert.Equal(t, quota.Amounts{channels: 1}, l.PlacedClaimsIn("team", "ns", map[string]quota.Amounts{"channel": {channels: 1}}))
	l.Unassume(pods[0].UID)
	assert.Equal(t, quota.Amounts{gpu: 1, channels: 1}, l.View().Allocated["team"])
	l.Forget(pods[1].UID, pods[1])
	l.Forget(pods[0].UID, pods[0])
	l.Forget(pods[2].UID, pods[2])
	v = l.View()
	assert.Empty(t, v.Allocated["team"])
	assert.Empty(t, v.Pending["team"], "nothing is left when the last pod is gone")
}

// A claim's charge that changes (its class known at last, its allocation made) counts as soon as
// one of the pods that name it is recorded again, not when the last of them is gone.
func TestLedgerFollowsAChangedClaimCharge(t *testing.T) {
	request := resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
	channel := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "channel", Namespace: "ns"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{request}}}}
	lookup := deviceLookup{"channel": channel}
	l := New(v1alpha1.SchedulerName)
	l.Devices = lookup
	resolve := func(string, string) string { return "" }
	inTeam := map[string]string{v1alpha1.QueueLabel: "team"}
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b"} {
		pod := ledgerPod(name, inTeam, "", 1)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("channel")}}
		pods = append(pods, pod)
		l.Observe(pod, resolve)
	}
	channels := quota.DevicesName("channel")
	assert.Equal(t, quota.Amounts{gpu: 2, channels: 1}, l.View().Pending["team"])
	changed := channel.DeepCopy()
	changed.Spec.Devices.Requests[0].Exactly.Count = 2
	lookup["channel"] = changed
	l.Refresh(pods[0], resolve)
	assert.Equal(t, quota.Amounts{gpu: 2, channels: 2}, l.View().Pending["team"], "the newest charge counts")
	l.Forget(pods[0].UID, pods[0])
	l.Forget(pods[1].UID, pods[1])
	assert.Empty(t, l.View().Pending["team"], "and goes with the last pod")
	l.Refresh(pods[0], resolve)
	assert.Empty(t, l.View().Pending["team"], "a refresh does not bring back a pod the ledger forgot")
}

// Pods without a group are workloads of their own: the ledger counts them by queue, placed and
// waiting (gated too), and not once they are going without a node, or gone.
func TestSinglesAreCountedByQueue(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	inB := map[string]string{v1alpha1.QueueLabel: "b"}
	gated := ledgertest.Pod("gated", inB, "", 1)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
	leaving := ledgertest.Pod("leaving", inB, "", 1)
	leaving.DeletionTimestamp = &metav1.Time{}
	member := ledgertest.Pod("member", map[string]string{v1alpha1.PodGroupLabel: "g"}, "n", 1)
	// A pod that carries its group of one is a workload of its own too, in its group's queue.
	carrier := ledgertest.Pod("carrier", map[string]string{v1alpha1.PodGroupLabel: "c", v1alpha1.QueueLabel: "a"}, "", 1)
	carrier.Annotations = map[string]string{v1alpha1.GroupOnPodAnnotation: "true"}
	objects := func(_, name string) string {
		if name == "c" {
			return "" // no object: the pod carries its group
		}
		return "a"
	}
	for _, pod := range []*corev1.Pod{ledgertest.Pod("a0", nil, "n", 1), ledgertest.Pod("b0", inB, "n", 1), ledgertest.Pod("b1", inB, "", 1), gated, leaving, member, carrier} {
		l.Observe(pod, objects)
	}
	assert.Equal(t, map[string]Singles{v1alpha1.DefaultQueue: {Placed: 1}, "a": {Waiting: 1}, "b": {Placed: 1, Waiting: 2}}, l.View().Singles)
	l.Forget("carrier", nil)

	l.Forget("b1", nil)
	l.Forget("a0", nil)
	assert.Equal(t, map[string]Singles{"b": {Placed: 1, Waiting: 1}}, l.View().Singles)
}

// A group that appears while a pod of it is being recorded (its store updated and GroupAdded
// called by one goroutine, the pod recorded by another, as two informers do) never leaves the pod
// counted nowhere, whichever comes first.
func TestAPodRecordedAsItsGroupArrivesIsCounted(t *testing.T) {
	for i := range 300 {
		l := New(v1alpha1.SchedulerName)
		var mu sync.Mutex
		known := false
		resolve := func(namespace, name string) string {
			mu.Lock()
			defer mu.Unlock()
			if known {
				return "team-a"
			}
			return ""
		}
		pod := ledgertest.Pod("w0", map[string]string{v1alpha1.PodGroupLabel: "train"}, "n", 2)
		var wg sync.WaitGroup
		wg.Go(func() { l.Observe(pod, resolve) })
		wg.Go(func() {
			mu.Lock()
			known = true
			mu.Unlock()
			l.GroupAdded("ns/train", resolve)
		})
		wg.Wait()
		require.Equal(t, quota.Amounts{ledgertest.GPU: 2}, l.View().Allocated["team-a"], "round %d", i)
	}
}

// Refresh records only the version of a pod the ledger holds: a pod deleted since its group's
// handler copied it is not counted again, and a newer version is not overwritten by an older one.
func TestRefreshRecordsOnlyTheVersionHeld(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	resolve := func(string, string) string { return "team-a" }
	pod := ledgertest.Pod("w0", map[string]string{v1alpha1.PodGroupLabel: "train"}, "", 2)
	pod.ResourceVersion = "1"
	l.Observe(pod, resolve)
	bound := pod.DeepCopy()
	bound.ResourceVersion, bound.Spec.NodeName = "2", "n"
	l.Observe(bound, resolve)

	l.Refresh(pod, resolve)
	v := l.View()
	assert.Equal(t, quota.Amounts{ledgertest.GPU: 2}, v.Allocated["team-a"], "the newer version stands")
	assert.Empty(t, v.Pending["team-a"])

	l.Forget(pod.UID, bound)
	l.Refresh(bound, resolve)
	assert.Empty(t, l.View().Allocated["team-a"], "a deleted pod is not counted again")
}

// A pod that names another group than before is not brought back by its old group's arrival.
func TestAPodThatChangedGroupsLeavesTheOldOnesWaiters(t *testing.T) {
	l := New(v1alpha1.SchedulerName)
	groups := map[string]string{}
	resolve := func(_, name string) string { return groups[name] }
	pod := ledgertest.Pod("w0", map[string]string{v1alpha1.PodGroupLabel: "old"}, "n", 2)
	l.Observe(pod, resolve)
	moved := pod.DeepCopy()
	moved.ResourceVersion = "2"
	moved.Labels[v1alpha1.PodGroupLabel] = "new"
	groups["new"] = "team-b"
	l.Observe(moved, resolve)
	l.Forget(pod.UID, moved)

	groups["old"] = "team-a"
	l.GroupAdded("ns/old", resolve)
	v := l.View()
	assert.Empty(t, v.Allocated["team-a"])
	assert.Empty(t, v.Allocated["team-b"])
}
