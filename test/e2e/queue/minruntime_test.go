package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// youngFor is the reclaim minimum runtime of the queue whose jobs the test protects: long enough
// to see that nothing reclaims them before it, short enough for a test.
const youngFor = 20 * time.Second

// Two queues fill 4 GPUs, 2 pods each; a third of twice their weight then asks for 2. Each of
// the two holds one GPU above its share of one. Queue "minrun-young" protects its jobs for
// youngFor (reclaimMinRuntimeSeconds): the waiting queue reclaims the other's pod at once, and
// young's only once its pods have run that long. The waiting pod says why it waits, and is tried
// again when young's pods come of age, with no event to bring it back.
func TestAJobYoungerThanItsQueuesMinimumRuntimeIsNotReclaimed(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-minrun"
	pool := units(t, env, gpu, 2, 2)
	framework.CreateQueue(t, env, "minrun-young", func(s *schedulingv1alpha1.QueueSpec) {
		s.ReclaimMinRuntimeSeconds = ptr.To(int32(youngFor / time.Second))
	})
	framework.CreateQueue(t, env, "minrun-old", nil)
	framework.CreateQueue(t, env, "minrun-waiting", func(s *schedulingv1alpha1.QueueSpec) { s.Weight = 2 })

	submit(t, env, ns, 2, "old", workPod{queue: "minrun-old", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 2, "young", workPod{queue: "minrun-young", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"minrun-old": 2, "minrun-young": 2}, time.Minute)
	youngBound := time.Now()

	submit(t, env, ns, 2, "waiting", workPod{queue: "minrun-waiting", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"minrun-waiting": 1, "minrun-old": 1, "minrun-young": 2}, 30*time.Second)
	// The pending pod says what it waits for, while young's pods are still young.
	framework.Eventually(t, youngFor/2, "the pending waiting pod to name the young jobs", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "minrun-waiting")
		return ok && strings.Contains(msg, "have run less than their queue's reclaim minimum runtime"), msg
	})
	// Until young's pods have run youngFor, nothing more moves (3 s short of it: the pods started
	// a moment before WaitBound saw them bound).
	if hold := time.Until(youngBound.Add(youngFor - 3*time.Second)); hold > 0 {
		framework.HoldBound(t, env, ns, map[string]int{"minrun-waiting": 1, "minrun-old": 1, "minrun-young": 2}, hold)
	}

	// Then young's pod goes, and the waiting pod binds without waiting for the periodic flush of
	// unschedulable pods (5 minutes).
	framework.WaitBound(t, env, ns, map[string]int{"minrun-waiting": 2, "minrun-old": 1, "minrun-young": 1}, youngFor+30*time.Second)
	waitEvents(t, env, ns, "Reclaimed", 2)
	events, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		if e.Reason != "Reclaimed" || !strings.HasPrefix(e.Regarding.Name, "young-") {
			continue
		}
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		assert.GreaterOrEqual(t, at.Sub(youngBound), youngFor-3*time.Second, "young's pod %s was reclaimed only after running %v", e.Regarding.Name, youngFor)
	}
	assert.Equal(t, 2, countEvents(t, env, ns, "Reclaimed"), "one pod of each over-share queue was reclaimed")
}
