package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// paybackRan is how long pay-a's pods run before pay-b comes: pay-b's patience.
const paybackRan = 10 * time.Second

// A job started by reclaim is not reclaimed before it has run long enough to pay back the work
// its start threw away. On one node of 4 units, queue pay-a (guaranteed 2) runs two 2-unit pods;
// pay-b's 2-unit pod comes paybackRan later and, once patient, reclaims one of them: it owes the
// victim's run (their sizes are equal). pay-c's 1-unit pod then comes: pay-b's queue is above its
// share, and pay-b had run a moment when pay-c came, so patience would let pay-c take it at once;
// pay-a keeps its guarantee. pay-b stays until it has paid back, pay-c says why it waits, and then
// reclaims it.
func TestAJobStartedByReclaimIsNotReclaimedBeforeItPaysBack(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-payback"
	pool := units(t, env, gpu, 1, 4)
	framework.CreateQueue(t, env, "pay-a", func(s *schedulingv1alpha1.QueueSpec) {
		s.Guarantee = corev1.ResourceList{gpu: resource.MustParse("2")}
	})
	framework.CreateQueue(t, env, "pay-b", nil)
	framework.CreateQueue(t, env, "pay-c", nil)

	submit(t, env, ns, 2, "pay-a", workPod{queue: "pay-a", res: gpu, amount: 2, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"pay-a": 2}, time.Minute)
	aStarted := map[string]time.Time{"pay-a-0": startedAt(t, env, ns, "pay-a-0"), "pay-a-1": startedAt(t, env, ns, "pay-a-1")}
	time.Sleep(paybackRan)

	submit(t, env, ns, 1, "pay-b", workPod{queue: "pay-b", res: gpu, amount: 2, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"pay-a": 1, "pay-b": 1}, paybackRan+30*time.Second)
	bStarted := startedAt(t, env, ns, "pay-b-0")
	reclaimed := reclaimedEvent(t, env, ns)
	victimStarted, ok := aStarted[reclaimed.Regarding.Name]
	require.True(t, ok, "pay-b reclaimed one of pay-a's pods, not %s", reclaimed.Regarding.Name)
	// pay-b owes the victim's run up to the reclaim, which came a moment before the event.
	owed := eventTime(reclaimed).Sub(victimStarted)
	paidBack := bStarted.Add(owed)

	submit(t, env, ns, 1, "pay-c", workPod{queue: "pay-c", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, owed/2, "pay-c to say pay-b has not paid back yet", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "pay-c")
		return ok && strings.Contains(msg, "1 job(s) it could reclaim were started by reclaim and have not yet run long enough to pay back the work their start threw away"), msg
	})
	// 3 s short of the debt: the reclaim came a moment before its event, and start times are
	// whole seconds.
	if hold := time.Until(paidBack.Add(-3 * time.Second)); hold > 0 {
		framework.HoldBound(t, env, ns, map[string]int{"pay-a": 1, "pay-b": 1, "pay-c": 0}, hold)
	}
	// Then pay-c reclaims pay-b, woken by no event: no pod changes meanwhile.
	framework.WaitBound(t, env, ns, map[string]int{"pay-a": 1, "pay-b": 0, "pay-c": 1}, 30*time.Second)
	assert.Equal(t, 2, waitEvents(t, env, ns, "Reclaimed", 2), "one of pay-a's pods, then pay-b")
}

// startedAt waits for a pod's start time.
func startedAt(t *testing.T, env *framework.Env, ns, name string) time.Time {
	t.Helper()
	var started time.Time
	framework.Eventually(t, 30*time.Second, name+" to start", func() (bool, string) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if pod.Status.StartTime == nil {
			return false, "no start time"
		}
		started = pod.Status.StartTime.Time
		return true, ""
	})
	return started
}

// reclaimedEvent waits for the one Reclaimed event of the namespace.
func reclaimedEvent(t *testing.T, env *framework.Env, ns string) eventsv1.Event {
	t.Helper()
	var found []eventsv1.Event
	framework.Eventually(t, 30*time.Second, "a Reclaimed event", func() (bool, string) {
		events, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		found = nil
		for _, e := range events.Items {
			if e.Reason == "Reclaimed" {
				found = append(found, e)
			}
		}
		return len(found) > 0, "none"
	})
	require.Len(t, found, 1)
	return found[0]
}

// eventTime is when an event was first recorded.
func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
