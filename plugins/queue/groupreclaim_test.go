package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// A pod on its way out is taken off the snapshot before the group is placed. Taking it off while
// reading the node's pods changed that list under the loop and crashed tephra-scheduler (seen in
// upstream's workload_preemption benchmark); here nothing else may be evicted, and the group is
// told so.
func TestGroupReclaimTakesLeavingPodsOffTheSnapshot(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	leaving := ledgerPod("leaving", nil, "n1", 1)
	leaving.DeletionTimestamp = &metav1.Time{}
	pods := []*corev1.Pod{leaving, ledgerPod("a", nil, "n1", 1), ledgerPod("b", nil, "n1", 1)}
	snapshot := schedcache.NewSnapshot(pods, []*corev1.Node{node})
	require.NoError(t, snapshot.StartMutations())
	defer func() { require.NoError(t, snapshot.EndMutations()) }()

	q := &Queue{ledger: newLedger(v1alpha1.SchedulerName)}
	preemptor := ledgerPod("preemptor", nil, "", 1)
	r := &reclaimer{q: q, pod: preemptor, work: workload{queue: "team"}, leaf: &quota.Node{Name: "team"}}
	scheduled := false
	victims, assignments, msg, err := r.chooseForGroup(context.Background(), snapshot, func(context.Context) (*fwk.PodGroupAssignments, *fwk.Status) {
		scheduled = true
		return nil, fwk.NewStatus(fwk.Unschedulable)
	})
	require.NoError(t, err)
	assert.Empty(t, victims)
	assert.Empty(t, assignments)
	assert.Contains(t, msg, "no pod may be evicted")
	assert.False(t, scheduled, "nothing to take away: the group is not placed again")
	info, err := snapshot.NodeInfos().Get("n1")
	require.NoError(t, err)
	assert.Len(t, info.GetPods(), 2, "the leaving pod is off the node")
}
