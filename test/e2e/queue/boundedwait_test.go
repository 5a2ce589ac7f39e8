package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	queueplugin "github.com/tephra-dev/tephra/plugins/queue"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const (
	// boundHogRan is how long the other queue's pods run before the waiting queue submits.
	boundHogRan = time.Minute
	// queuePatienceLimit is bound-b's own reclaim patience limit (spec.reclaimPatienceLimitSeconds),
	// below the shipped one (queue.DefaultReclaimPatienceLimit), which a test cannot wait out.
	queuePatienceLimit = time.Minute
)

// With the shipped args (the e2e cluster's TephraQueue args are the shipped ones: patience, and
// its limit) and a Queue that sets its own limit, queue bound-a's two 8-unit pods fill two nodes
// of 8 units and run boundHogRan; then queue bound-b, of equal weight and idle until then, whose
// spec bounds its wait at queuePatienceLimit, asks for its share, 8 one-unit pods. Patience alone
// would make each of them wait 8 times as long as an 8-unit pod had run (sizes 8 against 1): 8
// minutes. The queue's limit lets bound-b reclaim one of bound-a's pods once its pods have waited
// that long, and its 8 pods bind within the limit and a little slack; the eviction's event says the
// limit let it through.
//
// Plain pods, no gang: the run with the GenericWorkload gate on would wait the same minutes again
// for nothing the gate touches.
func TestAQueueBelowItsShareReachesItWithinThePatienceLimit(t *testing.T) {
	framework.GateOffOnly(t, "plain pods' reclaim, minutes of wall clock")
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-bound"
	pool := units(t, env, gpu, 2, 8)
	framework.CreateQueue(t, env, "bound-a", nil)
	framework.CreateQueue(t, env, "bound-b", func(s *schedulingv1alpha1.QueueSpec) {
		s.ReclaimPatienceLimitSeconds = ptr.To(int32(queuePatienceLimit.Seconds()))
	})
	require.Less(t, queuePatienceLimit, queueplugin.DefaultReclaimPatienceLimit, "the queue's own limit must be the one that lets bound-b through")

	submit(t, env, ns, 2, "hog", workPod{queue: "bound-a", res: gpu, amount: 8, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"bound-a": 2}, time.Minute)
	time.Sleep(boundHogRan)

	limit := queuePatienceLimit
	const slack = 30 * time.Second
	// Each waiting pod, of 1 unit of 16, would throw away what a pod of 8 had run before it came:
	// patience alone makes it wait 8 × boundHogRan.
	patienceAlone := 8 * boundHogRan
	require.Greater(t, patienceAlone, limit+slack, "patience alone must make bound-b wait past the limit, or the test shows nothing")
	t.Logf("patience alone would make bound-b's pods wait %v; the limit is %v", patienceAlone, limit)

	submitted := time.Now()
	submit(t, env, ns, 8, "owed", workPod{queue: "bound-b", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, 30*time.Second, "bound-b's pods to say patience keeps them", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "bound-b")
		return ok && strings.Contains(msg, "(reclaim patience)"), msg
	})
	// Nothing moves before the limit (5 s short of it: the pods were created a moment after
	// submitted).
	framework.HoldBound(t, env, ns, map[string]int{"bound-a": 2, "bound-b": 0}, time.Until(submitted.Add(limit-5*time.Second)))
	framework.WaitBound(t, env, ns, map[string]int{"bound-a": 1, "bound-b": 8}, time.Until(submitted.Add(limit+slack)))
	waited := time.Since(submitted)
	t.Logf("bound-b reached its share of 8 units %v after it asked (patience alone: %v)", waited.Round(time.Second), patienceAlone)
	assert.Less(t, waited, limit+slack)

	// One of bound-a's pods makes room for bound-b's share.
	reclaimed := reclaimedEvent(t, env, ns)
	assert.Contains(t, reclaimed.Note, "its queue's reclaim patience limit, so patience no longer spared the jobs it reclaims")
}
