package backpressure

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// atPermit stands for the framework's pods waiting at Permit.
type atPermit struct {
	mu   sync.Mutex
	pods []*corev1.Pod
}

func (a *atPermit) IterateOverWaitingPods(callback func(fwk.WaitingPod)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods {
		callback(waitingPod{p})
	}
}

type waitingPod struct{ pod *corev1.Pod }

func (w waitingPod) GetPod() *corev1.Pod         { return w.pod }
func (w waitingPod) GetPendingPlugins() []string { return nil }
func (w waitingPod) Allow(string)                {}
func (w waitingPod) Reject(string, string) bool  { return false }
func (w waitingPod) Preempt(string, string) bool { return false }

func pod(i int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("uid-", i))}}
}

func plugin(t *testing.T, max int, wait time.Duration, waiting waitingPods) *Backpressure {
	t.Helper()
	args := &Args{MaxBindsInFlight: max, MaxWait: &metav1.Duration{Duration: wait}}
	require.NoError(t, args.Validate())
	return newBackpressure(args, waiting)
}

// prefilter runs PreFilter in the background and says when it returned.
func prefilter(b *Backpressure, p *corev1.Pod) <-chan *fwk.Status {
	done := make(chan *fwk.Status, 1)
	go func() {
		_, status := b.PreFilter(context.Background(), nil, p, nil)
		done <- status
	}()
	return done
}

func TestACycleWaitsWhileTheLimitOfBindsIsInFlightAndGoesOnWhenOneLands(t *testing.T) {
	b := plugin(t, 2, time.Minute, &atPermit{})
	ctx := context.Background()

	status := <-prefilter(b, pod(0))
	assert.Equal(t, fwk.Skip, status.Code(), "below the limit a cycle goes on at once, and the plugin has no filter to run")
	require.Nil(t, b.Reserve(ctx, nil, pod(0), "n"))
	require.Nil(t, b.Reserve(ctx, nil, pod(1), "n"))

	done := prefilter(b, pod(2))
	select {
	case <-done:
		t.Fatal("two binds in flight with a limit of 2: the third pod's cycle must wait")
	case <-time.After(100 * time.Millisecond):
	}
	bound := pod(0)
	bound.Spec.NodeName = "n"
	b.podSeen(pod(0))
	select {
	case <-done:
		t.Fatal("the informer shows pod 0 not bound yet: still two in flight")
	case <-time.After(100 * time.Millisecond):
	}
	b.podSeen(bound)
	select {
	case status := <-done:
		assert.Equal(t, fwk.Skip, status.Code(), "the plugin never refuses a pod")
	case <-time.After(10 * time.Second):
		t.Fatal("the informer shows a bind: the waiting cycle must go on")
	}

	require.Nil(t, b.Reserve(ctx, nil, pod(2), "n"))
	done = prefilter(b, pod(3))
	b.Unreserve(ctx, nil, pod(1), "n")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an unreserved pod is no longer in flight: the waiting cycle must go on")
	}
}

func TestGangMembersWaitingAtPermitDoNotHoldCyclesBack(t *testing.T) {
	waiting := &atPermit{}
	b := plugin(t, 2, time.Minute, waiting)
	ctx := context.Background()
	for i := range 4 {
		require.Nil(t, b.Reserve(ctx, nil, pod(i), "n"))
	}
	waiting.pods = []*corev1.Pod{pod(0), pod(1), pod(2)}
	select {
	case <-prefilter(b, pod(9)):
	case <-time.After(10 * time.Second):
		t.Fatal("three of four reserved pods wait at Permit for their gang, one is in flight: the gang's next member must be tried")
	}
}

func TestACycleGoesOnAfterMaxWaitWhenNothingLands(t *testing.T) {
	b := plugin(t, 1, 50*time.Millisecond, &atPermit{})
	require.Nil(t, b.Reserve(context.Background(), nil, pod(0), "n"))
	select {
	case <-prefilter(b, pod(1)):
	case <-time.After(10 * time.Second):
		t.Fatal("an apiserver that binds nothing must not stall the scheduler past maxWait")
	}
}

func TestUnreserveOfAPodNeverReservedChangesNothing(t *testing.T) {
	b := plugin(t, 1, time.Minute, &atPermit{})
	ctx := context.Background()
	require.Nil(t, b.Reserve(ctx, nil, pod(0), "n"))
	// kube-scheduler unreserves every Reserve plugin when one of them fails, also those it
	// never called.
	b.Unreserve(ctx, nil, pod(7), "n")
	b.podDeleted(cache.DeletedFinalStateUnknown{Obj: pod(7)})
	_, full := b.full()
	assert.True(t, full, "pod 0 is still in flight")
}

func TestPodsReservedLongAgoAreForgotten(t *testing.T) {
	b := plugin(t, 1, time.Minute, &atPermit{})
	require.Nil(t, b.Reserve(context.Background(), nil, pod(0), "n"))
	b.reserved[pod(0).UID] = time.Now().Add(-staleAfter - time.Second)
	_, full := b.full()
	assert.False(t, full, "a pod kube-scheduler never ended must not hold the scheduler back for good")
}

func TestArgs(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxBindsInFlight, args.MaxBindsInFlight)
	assert.Equal(t, DefaultMaxWait, args.MaxWait.Duration)

	for raw, want := range map[string]string{
		`{"maxBindsInFlight": -1}`: "TephraBackpressure args: maxBindsInFlight: -1 is not a positive number",
		`{"maxWait": "-1s"}`:       "TephraBackpressure args: maxWait: -1s is not a positive duration",
		`{"maxBindsInFlite": 3}`:   `unknown field "maxBindsInFlite"`,
	} {
		_, err := ParseArgs(&runtime.Unknown{Raw: []byte(raw)})
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), want)
	}
}

func TestADeletedPodIsNoLongerInFlight(t *testing.T) {
	b := plugin(t, 1, time.Minute, &atPermit{})
	require.Nil(t, b.Reserve(context.Background(), nil, pod(0), "n"))
	b.podDeleted(cache.DeletedFinalStateUnknown{Key: "ns/p0", Obj: pod(0)})
	_, full := b.full()
	assert.False(t, full)
}

// A pod-group cycle reserves every member of an upstream PodGroup before it sends any to bind: a
// member waiting there for binds would wait for its own group's, which cannot land until the
// cycle ends. Its members go on; the pods after it wait for the group's binds.
func TestMembersOfAPodGroupCycleNeverWaitForTheirOwnGroupsBinds(t *testing.T) {
	ctx := context.Background()
	member := func(i int) *corev1.Pod {
		p := pod(i)
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("big")}
		return p
	}
	for _, gateOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("GenericWorkload=%v", gateOn), func(t *testing.T) {
			b := plugin(t, 2, time.Minute, &atPermit{})
			b.podGroupCycles = gateOn
			require.Nil(t, b.Reserve(ctx, nil, member(0), "n"))
			require.Nil(t, b.Reserve(ctx, nil, member(1), "n"))

			done := prefilter(b, member(2))
			select {
			case <-done:
				assert.True(t, gateOn, "with the gate off TephraGang gangs the group's pods one cycle each: they wait like any pod")
			case <-time.After(200 * time.Millisecond):
				assert.False(t, gateOn, "with the gate on the third member is in the cycle that holds the other two: it must go on")
			}
			plain := prefilter(b, pod(3))
			select {
			case <-plain:
				t.Fatal("a pod outside the group waits while the group's two members are in flight")
			case <-time.After(100 * time.Millisecond):
			}
			b.Unreserve(ctx, nil, member(0), "n")
			<-plain
			if !gateOn {
				<-done
			}
		})
	}
}
