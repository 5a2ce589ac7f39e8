package gang

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// A member that completes its gang's minimum at Permit while a sibling's Unreserve (a timeout)
// ends the attempt: whichever comes first under the group's lock, the gang never binds a member
// alone. Run many times with -race.
func TestAMemberOfAFailedAttemptNeverBinds(t *testing.T) {
	for range 200 {
		f := newFixture(t)
		ctx := context.Background()
		f.group(t, "pair", 2, nil, f.now)
		a := f.member(t, "a", "pair", "")
		b := f.member(t, "b", "pair", "")
		require.Equal(t, fwk.Wait, f.permit(t, a).Code())
		require.True(t, f.gang.Reserve(ctx, nil, b, "node").IsSuccess())

		var wg sync.WaitGroup
		var permitB *fwk.Status
		wg.Add(2)
		go func() { defer wg.Done(); f.gang.Unreserve(ctx, nil, a, "node") }() // a timed out
		go func() { defer wg.Done(); permitB, _ = f.gang.Permit(ctx, nil, b, "node") }()
		wg.Wait()

		bound := permitB.IsSuccess() && f.gang.PreBind(ctx, nil, b, "node").IsSuccess()
		require.False(t, bound, "b must not bind without a: Permit %v", permitB)
	}
}

// A member of an attempt that has ended must not end the next one: its late Unreserve leaves the
// new attempt's waiting members alone.
func TestALateUnreserveDoesNotFailTheNextAttempt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "trio", 3, nil, f.now)
	a := f.member(t, "a", "trio", "")
	b := f.member(t, "b", "trio", "")
	f.member(t, "c", "trio", "")
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	require.True(t, f.gang.Reserve(ctx, nil, b, "node").IsSuccess()) // reserved in attempt 1
	// The attempt fails (PostFilter of another member), releasing a.
	f.gang.fail(klog.Background(), groupKey{"ns", "trio"}, f.podGroup(t, "trio"), "NotEnoughResources: test", "post-filter", 0)
	require.NotEmpty(t, f.handle.waiting[a.UID].rejected)
	f.gang.Unreserve(ctx, nil, a, "node")

	// b's Permit comes after its attempt failed: refused, not counted into the next one.
	status, _ := f.gang.Permit(ctx, nil, b, "node")
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "has failed")

	// The next attempt: a placed again and waiting; b's late Unreserve does not release it.
	f.now = f.now.Add(time.Minute) // past the backoff
	delete(f.handle.waiting, a.UID)
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	f.gang.Unreserve(ctx, nil, b, "node")
	assert.Empty(t, f.handle.waiting[a.UID].rejected, "a late Unreserve of a failed attempt's member released the next attempt")
}

// Permit let the whole minimum through and one member's bind failed: the members not bound yet
// are refused at PreBind, and one already bound is rolled back (marked and deleted).
func TestABindFailureRollsTheAttemptBack(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "trio", 3, nil, f.now)
	a, b, c := f.trioInAPI(t)
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	require.Equal(t, fwk.Wait, f.permit(t, b).Code())
	require.True(t, f.permit(t, c).IsSuccess())
	require.True(t, f.handle.waiting[a.UID].allowed && f.handle.waiting[b.UID].allowed)

	// a binds; then b's bind fails.
	require.True(t, f.gang.PreBind(ctx, nil, a, "node").IsSuccess())
	f.bind(t, a, "node")
	f.gang.PostBind(ctx, nil, a, "node")
	f.gang.Unreserve(ctx, nil, b, "node")

	status := f.gang.PreBind(ctx, nil, c, "node")
	assert.Equal(t, fwk.Unschedulable, status.Code(), "c must not bind once the attempt failed")
	f.gang.Unreserve(ctx, nil, c, "node")

	require.Eventually(t, func() bool {
		_, err := f.handle.clientset.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 10*time.Millisecond, "a, bound in the failed attempt, is deleted")
	_, err := f.handle.clientset.CoreV1().Pods("ns").Get(ctx, "c", metav1.GetOptions{})
	assert.NoError(t, err, "c was never bound: it stays")
	assert.Contains(t, drainEvents(f), "GangAttemptRolledBack")
}

// Deleting a PodGroup rejects its members waiting at Permit at once, brings back those held at
// PreEnqueue, and drops its state and timers.
func TestPodGroupDeletionRejectsWaitingMembersAndForgetsTheGroup(t *testing.T) {
	f := newFixture(t)
	f.group(t, "trio", 3, nil, f.now)
	a := f.member(t, "a", "trio", "")
	b := f.member(t, "b", "trio", "")
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	require.Equal(t, fwk.Wait, f.permit(t, b).Code())
	f.gang.groups.after(groupKey{"ns", "trio"}, time.Hour, func() { t.Error("a timer of a deleted group fired") })

	c := f.member(t, "c", "trio", "")
	f.gang.queueRunning.Store(true)
	f.handle.activated = nil

	f.gang.forgetGroup(klog.Background(), groupKey{"ns", "trio"})
	assert.Contains(t, f.handle.waiting[a.UID].rejected, "was deleted")
	assert.Contains(t, f.handle.waiting[b.UID].rejected, "was deleted")
	assert.Equal(t, 0, f.gang.groups.groupCount())
	assert.Equal(t, 0, f.gang.groups.waitingCount())
	// A member held at PreEnqueue (for the group's pilot, say) has no other event to bring it
	// back and learn that its group is gone.
	assert.Contains(t, f.handle.activated, "ns/"+c.Name, "the pending members are tried again")
}

func (f *fixture) podGroup(t *testing.T, name string) *v1alpha1.PodGroup {
	t.Helper()
	obj, ok, err := f.groups.GetByKey("ns/" + name)
	require.NoError(t, err)
	require.True(t, ok)
	return obj.(*v1alpha1.PodGroup)
}

// drainEvents returns the events recorded so far, one per line.
func drainEvents(f *fixture) string {
	var out []string
	for {
		select {
		case e := <-f.handle.recorder.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// Many goroutines on one group, as the framework runs them: the scheduling cycle reserves and
// permits the eight members of a gang one after another, while binding cycles of members already
// let through or timed out call Unreserve concurrently and the PodGroup is updated. Whatever the
// interleaving, the members that get through PreBind are none or the whole minimum, and never
// one that was unreserved. Run with -race.
func TestConcurrentMembersBindAllOrNothing(t *testing.T) {
	const size = 8
	for round := range 100 {
		f := newFixture(t)
		ctx := context.Background()
		f.group(t, "eight", size, nil, f.now)
		var pods []*corev1.Pod
		for i := range size {
			pods = append(pods, f.member(t, string(rune('a'+i)), "eight", ""))
		}
		permitted := make(chan int, size)
		passed := make([]bool, size) // Permit said Success
		unreserved := make([]bool, size)
		var wg sync.WaitGroup
		wg.Go(func() { // the scheduling cycle
			defer close(permitted)
			for i, pod := range pods {
				if !f.gang.Reserve(ctx, nil, pod, "node").IsSuccess() {
					continue
				}
				status, _ := f.gang.Permit(ctx, nil, pod, "node")
				switch status.Code() {
				case fwk.Wait:
					f.handle.wait(pod)
				case fwk.Success:
					passed[i] = true
				}
				permitted <- i
			}
		})
		wg.Go(func() { // binding cycles: one member in three of some rounds fails or times out
			for i := range permitted {
				if (i+round)%3 == 0 && round%2 == 0 {
					unreserved[i] = true
					f.gang.Unreserve(ctx, nil, pods[i], "node")
				}
			}
		})
		wg.Go(func() { // the PodGroup's status written meanwhile
			pg := f.podGroup(t, "eight").DeepCopy()
			pg.Status.Phase = v1alpha1.PodGroupPending
			_ = f.groups.Update(pg)
		})
		wg.Wait()

		bound := 0
		for i, pod := range pods {
			through := passed[i]
			if w := f.handle.GetWaitingPod(pod.UID); w != nil {
				fw := w.(*fakeWaitingPod)
				fw.mu.Lock()
				through = through || fw.allowed
				fw.mu.Unlock()
			}
			if through && !unreserved[i] && f.gang.PreBind(ctx, nil, pod, "node").IsSuccess() {
				bound++
			}
		}
		require.True(t, bound == 0 || bound == size, "round %d: %d of %d members bound (unreserved %v)", round, bound, size, unreserved)
		if round%2 == 1 {
			require.Equal(t, size, bound, "round %d: nothing failed, the whole gang binds", round)
		}
	}
}

// A member placed after its group's minimum was bound, before the pod informer shows those binds,
// is let through at once: the members this scheduler bound count as placed, so it does not wait
// at Permit for a Permit that never comes (seen in e2e: an elastic worker timed out after 60 s).
func TestAMemberAfterTheMinimumIsBoundDoesNotWait(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "pair", 2, nil, f.now)
	a := f.member(t, "a", "pair", "")
	b := f.member(t, "b", "pair", "")
	c := f.member(t, "c", "pair", "")
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	require.True(t, f.permit(t, b).IsSuccess())
	for _, pod := range []*corev1.Pod{a, b} {
		require.True(t, f.gang.PreBind(ctx, nil, pod, "node").IsSuccess())
		f.gang.PostBind(ctx, nil, pod, "node") // the informer has not shown the binds yet
	}
	assert.True(t, f.permit(t, c).IsSuccess(), "c is above a minimum that is bound")
}

// A member refused because this plugin's informer did not show its PodGroup yet is brought back
// when it does: the scheduler's own informer may have delivered the group's event first.
func TestMembersComeBackWhenTheirPodGroupArrives(t *testing.T) {
	f := newFixture(t)
	a := f.member(t, "a", "late", "")
	f.member(t, "b", "late", "")
	status := f.gang.PreEnqueue(context.Background(), a)
	require.Contains(t, status.Message(), v1alpha1.ReasonPodGroupNotFound)
	pg := f.group(t, "late", 2, nil, f.now)
	f.gang.podGroupAdded(pg)
	assert.ElementsMatch(t, []string{"ns/a", "ns/b"}, f.handle.activated)
}

// A member bound by someone this scheduler does not know of (its predecessor, which lost its
// lease in the middle of an attempt; or a bind whose answer was lost although it was committed)
// is rolled back once the group's next attempt fails, while the group's minimum has never run:
// otherwise it holds its capacity for good. Once the minimum has run, such members are what is
// left of a gang that ran, and stay.
func TestMembersBoundUnbeknownAreRolledBackWithAFailedAttempt(t *testing.T) {
	for _, ran := range []bool{false, true} {
		t.Run(fmt.Sprintf("minimum ran %v", ran), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			pg := f.group(t, "trio", 3, nil, f.now)
			if ran {
				pg.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue}}
				require.NoError(t, f.groups.Update(pg))
			}
			a, b, c := f.trioInAPI(t)
			f.bind(t, a, "node") // by the scheduler before this one
			require.Equal(t, fwk.Wait, f.permit(t, b).Code())

			_, status := f.gang.PostFilter(ctx, nil, c, nil)
			assert.Equal(t, "NotEnoughResources: 2 of 3 pods of pod group ns/trio could be placed; releasing them", status.Message())
			assert.Equal(t, status.Message(), f.handle.waiting[b.UID].rejected)
			if !ran {
				require.Eventually(t, func() bool {
					_, err := f.handle.clientset.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}, 10*time.Second, 10*time.Millisecond, "a, bound by a predecessor, is deleted")
				assert.Contains(t, drainEvents(f), "before this scheduler started, or by binds whose answer was lost, do not make up the minimum")
				return
			}
			// rollBack records its event before it deletes anything: none came.
			assert.NotContains(t, drainEvents(f), "GangAttemptRolledBack")
			_, err := f.handle.clientset.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
			assert.NoError(t, err, "a member of a gang whose minimum ran stays")
		})
	}
}

// A rollback whose deletions fail (the apiserver is away) is not given up: the members it left
// bound are rolled back with the group's next failed attempt, while its minimum has never run.
func TestAFailedRollbackIsDoneAgainWithTheNextFailedAttempt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.group(t, "trio", 3, nil, f.now)
	a, b, c := f.trioInAPI(t)
	var refuse atomic.Bool
	refuse.Store(true)
	f.handle.clientset.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is away"))
		}
		return false, nil, nil
	})
	require.Equal(t, fwk.Wait, f.permit(t, a).Code())
	require.Equal(t, fwk.Wait, f.permit(t, b).Code())
	require.True(t, f.permit(t, c).IsSuccess())
	require.True(t, f.gang.PreBind(ctx, nil, a, "node").IsSuccess())
	f.bind(t, a, "node")
	f.gang.PostBind(ctx, nil, a, "node")
	f.gang.Unreserve(ctx, nil, b, "node") // b's bind failed: a's rollback is refused
	f.gang.Unreserve(ctx, nil, c, "node")
	require.Contains(t, drainEvents(f), "GangAttemptRolledBack")

	// The next attempt, past the backoff, fails too: a, still bound, is rolled back again.
	refuse.Store(false)
	f.now = f.now.Add(time.Minute)
	delete(f.handle.waiting, b.UID)
	require.Equal(t, fwk.Wait, f.permit(t, b).Code())
	_, status := f.gang.PostFilter(ctx, nil, c, nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	require.Eventually(t, func() bool {
		_, err := f.handle.clientset.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 10*time.Millisecond, "a, left bound by the failed rollback, is deleted")
	assert.Contains(t, drainEvents(f), "bound by an earlier attempt that could not roll them back")
}

// trioInAPI makes members a, b and c of group trio, in the informer and in the API, where a
// rollback deletes them.
func (f *fixture) trioInAPI(t *testing.T) (a, b, c *corev1.Pod) {
	t.Helper()
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pod := f.member(t, name, "trio", "")
		_, err := f.handle.clientset.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
		pods = append(pods, pod)
	}
	return pods[0], pods[1], pods[2]
}

// Members a rollback deleted count as placed no more, though the informer still shows them bound
// (the apiserver was away): the next attempt must not complete its minimum with them, and bind
// members beside pods on their way out (seen in the chaos e2e test: etcd killed during a gang's
// binds left 15 of 48 bound for good).
func TestRolledBackMembersAreNotPlaced(t *testing.T) {
	f := newFixture(t)
	pg := f.group(t, "g", 2, nil, f.now)
	m0 := f.member(t, "m0", "g", "")
	f.member(t, "m1", "g", "")
	f.bind(t, m0, "n")
	key := groupKey{"ns", "g"}
	require.Equal(t, 1, f.gang.countMembers(key, pg, nil).placed)

	f.gang.rollBack(klog.Background(), key, pg, []*corev1.Pod{m0}, "test")
	c := f.gang.countMembers(key, pg, nil)
	assert.Equal(t, 0, c.placed, "on its way out")
	assert.Equal(t, 2, c.existing, "it exists until it is gone: the group is not short of members")
}
