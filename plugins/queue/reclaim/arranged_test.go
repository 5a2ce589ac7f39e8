package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// A gang of 4 with a minimum of 2: the first two members may evict for the minimum; once two
// are placed or nominated by a recent preemption, the others are above the minimum and evict
// nobody. A nomination older than the grace no longer counts: the room it was for may be gone.
func TestMembersAboveAnArrangedMinimumEvictNobody(t *testing.T) {
	l := ledger.New(v1alpha1.SchedulerName)
	members := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{setup.PodGroupIndex: ledger.IndexByGroup})
	q := &Reclaimer{ledger: l, members: members}
	resolve := func(string, string) string { return "team" }
	inGang := map[string]string{v1alpha1.PodGroupLabel: "job"}
	w := Workload{Queue: "team", Group: "ns/job", PodGroup: &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: 2}}}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"m0", "m1", "m2", "m3"} {
		p := ledgertest.Pod(name, inGang, "", 1)
		require.NoError(t, members.Add(p))
		l.Observe(p, resolve)
		pods[name] = p
	}
	assert.False(t, q.minimumArranged(pods["m0"], w), "nothing is arranged yet")

	l.Nominate(pods["m0"].UID, "node-a", time.Now())
	assert.False(t, q.minimumArranged(pods["m1"], w), "one of two is arranged: m1 completes the minimum")
	l.Nominate(pods["m1"].UID, "node-b", time.Now())
	assert.True(t, q.minimumArranged(pods["m2"], w), "two nominated: m2 is above the minimum")
	assert.False(t, q.minimumArranged(pods["m1"], w), "a member does not count itself")

	l.Nominate(pods["m1"].UID, "node-b", time.Now().Add(-ledger.NominationGrace))
	assert.False(t, q.minimumArranged(pods["m2"], w), "an old nomination no longer counts")

	placed := pods["m1"].DeepCopy()
	placed.Spec.NodeName = "node-b"
	l.Observe(placed, resolve)
	assert.True(t, q.minimumArranged(pods["m3"], w), "one placed and one nominated make the minimum")
}
