package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Fair share with whole pods (Volcano's e2e "Reclaim Case 10"): 4 GPUs, queues A and B hold 2
// each (deserved 1.5 each, both asking for more) and C asks for 1 (deserved 1). No victim can
// stay at or above a share of 1.5, yet C gets its GPU: taking one of A's or B's pods lowers the
// queues' total distance from their shares, and nothing moves afterwards (the move back would
// raise it).
func TestReclaimWithWholePodsConverges(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-wholepod"
	// Each node has 1000 units and each pod asks for 1000, so that a share of 1.5 pods (1500
	// units) is exact: with 1 unit per pod, shares would be rounded to whole units, and pods.
	pool := units(t, env, gpu, 4, 1000)
	framework.CreateQueue(t, env, "whole-a", nil)
	framework.CreateQueue(t, env, "whole-b", nil)
	framework.CreateQueue(t, env, "whole-c", nil)

	submit(t, env, ns, 2, "a", workPod{queue: "whole-a", res: gpu, amount: 1000, pool: pool})
	submit(t, env, ns, 2, "b", workPod{queue: "whole-b", res: gpu, amount: 1000, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"whole-a": 2, "whole-b": 2}, time.Minute)
	// A and B keep asking for more, so their shares stay at 1.5 whatever is evicted.
	submit(t, env, ns, 1, "a-more", workPod{queue: "whole-a", res: gpu, amount: 1000, pool: pool})
	submit(t, env, ns, 1, "b-more", workPod{queue: "whole-b", res: gpu, amount: 1000, pool: pool})
	submit(t, env, ns, 1, "c", workPod{queue: "whole-c", res: gpu, amount: 1000, pool: pool})

	framework.Eventually(t, time.Minute, "C to run its pod", func() (bool, string) {
		got, err := framework.BoundByQueue(t.Context(), env, ns)
		if err != nil {
			return false, err.Error()
		}
		return got["whole-c"] == 1 && got["whole-a"]+got["whole-b"] == 3, framework.QueueStatuses(env)
	})
	got, err := framework.BoundByQueue(t.Context(), env, ns)
	assert.NoError(t, err)
	framework.HoldBound(t, env, ns, got, 60*time.Second)
	assert.Equal(t, 1, waitEvents(t, env, ns, "Reclaimed", 1), "one pod reclaimed, and none since")
}
