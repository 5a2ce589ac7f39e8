package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	framework.CreateQueue(t, env, "backlog-closed", func(s *schedulingv1alpha1.QueueSpec) { s.State = schedulingv1alpha1.QueueClosed })
	framework.CreateQueue(t, env, "backlog-open", nil)

	submit(t, env, ns, 4, "closed", workPod{queue: "backlog-closed", res: res, amount: 1, pool: pool})
	framework.WaitQueueStatus(t, env, "backlog-closed", time.Minute, "its backlog counted as pending", func(q *schedulingv1alpha1.Queue) bool {
		return q.Status.Pending == 4
	})
	submit(t, env, ns, 4, "open", workPod{queue: "backlog-open", res: res, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"backlog-open": 4, "backlog-closed": 0}, time.Minute)
	framework.HoldBound(t, env, ns, map[string]int{"backlog-open": 4, "backlog-closed": 0}, 5*time.Second)
	framework.WaitQueueStatus(t, env, "backlog-open", time.Minute, "deserving the whole cluster", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Deserved, res) == 4
	})
	framework.WaitQueueStatus(t, env, "backlog-closed", time.Minute, "deserving nothing", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Deserved, res) == 0
	})

	// kubectl get queues shows both, in words.
	open := queueColumns(t, env, "backlog-open")
	assert.Equal(t, string(res)+": 4", open["Allocated"])
	assert.Equal(t, string(res)+": 4", open["Deserved"])
	closed := queueColumns(t, env, "backlog-closed")
	assert.Equal(t, "0", closed["Allocated"])
	assert.Equal(t, "0", closed["Deserved"])
	assert.Equal(t, "Closed", closed["State"])
}

// queueColumns are the columns of a queue as `kubectl get queue` prints them (the server's
// table of the CRD's printer columns).
func queueColumns(t *testing.T, env *framework.Env, name string) map[string]string {
	t.Helper()
	raw, err := env.Tephra.SchedulingV1alpha1().RESTClient().Get().Resource("queues").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Len(t, table.Rows, 1)
	out := map[string]string{}
	for i, column := range table.ColumnDefinitions {
		out[column.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}
