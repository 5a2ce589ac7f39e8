package queue

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A closed queue's backlog is no demand: it holds no share, so the open queue beside it uses the
// whole cluster, and the Queue status says so.
func TestClosedQueueBacklogLeavesTheClusterToOthers(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/gpu-backlog"
	pool := units(t, env, res, 4, 1)
	createQueue(t, env, "backlog-closed", func(s *schedulingv1alpha1.QueueSpec) { s.State = schedulingv1alpha1.QueueClosed })
	createQueue(t, env, "backlog-open", nil)

	submit(t, env, ns, 4, "closed", workPod{queue: "backlog-closed", res: res, amount: 1, pool: pool})
	waitQueueStatus(t, env, "backlog-closed", time.Minute, "its backlog counted as pending", func(q *schedulingv1alpha1.Queue) bool {
		return q.Status.Pending == 4
	})
	submit(t, env, ns, 4, "open", workPod{queue: "backlog-open", res: res, amount: 1, pool: pool})
	waitBound(t, env, ns, map[string]int{"backlog-open": 4, "backlog-closed": 0}, time.Minute)
	holdBound(t, env, ns, map[string]int{"backlog-open": 4, "backlog-closed": 0}, 5*time.Second)
	waitQueueStatus(t, env, "backlog-open", time.Minute, "deserving the whole cluster", func(q *schedulingv1alpha1.Queue) bool {
		return amountOf(q.Status.Deserved, res) == 4
	})
	waitQueueStatus(t, env, "backlog-closed", time.Minute, "deserving nothing", func(q *schedulingv1alpha1.Queue) bool {
		return amountOf(q.Status.Deserved, res) == 0
	})
}
