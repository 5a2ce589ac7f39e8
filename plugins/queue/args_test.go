package queue

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
)

func TestArgs(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Nil(t, args.UsageHalfLife, "the half-life is tephra-controllers' to set")

	for _, raw := range []string{`{"usageHalfLife": "168h"}`, `{"usageHalfLife": "0s"}`} {
		_, err := ParseArgs(&runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON})
		assert.NoError(t, err, "%s: a configuration that set the half-life still loads", raw)
	}
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"halfLife": "1h"}`), ContentType: runtime.ContentTypeJSON})
	assert.Error(t, err, "an unknown field is refused")
}

// The scheduler's shares weigh the usage Queue status shows, decayed to when the tree is built
// under the half-life the Queue controller accrued it with; once the controller removes the usage
// (history off) they are by weight alone.
func TestSharesWeighUsageFromQueueStatus(t *testing.T) {
	s := newScheduler(t)
	measured := time.Now().Add(-time.Hour)
	for _, q := range []struct {
		name       string
		gpuSeconds float64
	}{{"a", 20 * 3600 / math.Ln2}, {"b", 0}} { // a: twice the whole cluster's 10 GPUs an hour ago
		obj := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.name}, Spec: v1alpha1.QueueSpec{Parent: v1alpha1.RootQueue, Weight: 1}}
		obj.Status.Usage = quota.UsageStatus(quota.Usage{gpu: q.gpuSeconds}, time.Hour, measured)
		require.NoError(t, s.tephra.Scheduling().V1alpha1().Queues().Informer().GetIndexer().Add(obj))
	}
	v := ledger.View{Total: quota.Amounts{gpu: 10}, Allocated: map[string]quota.Amounts{}, Pending: map[string]quota.Amounts{"a": {gpu: 10}, "b": {gpu: 10}}}
	lister := s.tephra.Scheduling().V1alpha1().Queues().Lister()

	with := &shareCache{queues: lister, treeStale: true}
	tree := with.currentTree()
	assert.Equal(t, time.Hour, tree.HistoryHalfLife, "the half-life status.usage was accrued with")
	assert.InEpsilon(t, 10*3600/math.Ln2, tree.Get("a").Usage[gpu], 1e-3, "usage measured a half-life ago counts half")
	shares := with.deserved(tree, v)
	assert.Equal(t, int64(2), shares["a"][gpu], "the queue that used the GPUs deserves a fifth")
	assert.Equal(t, int64(8), shares["b"][gpu])

	for _, name := range []string{"a", "b"} {
		q, err := lister.Get(name)
		require.NoError(t, err)
		q = q.DeepCopy()
		q.Status.Usage = nil
		require.NoError(t, s.tephra.Scheduling().V1alpha1().Queues().Informer().GetIndexer().Update(q))
	}
	without := &shareCache{queues: lister, treeStale: true}
	shares = without.deserved(without.currentTree(), v)
	assert.Equal(t, map[corev1.ResourceName]int64{gpu: 5}, map[corev1.ResourceName]int64(shares["a"]), "history off: by weight")
	assert.Equal(t, int64(5), shares["b"][gpu])
}

func TestDeservedRose(t *testing.T) {
	list := func(gpus string) corev1.ResourceList { return corev1.ResourceList{gpu: resource.MustParse(gpus)} }
	assert.True(t, deservedRose(list("7"), list("12")))
	assert.True(t, deservedRose(nil, list("1")), "a share where there was none")
	assert.False(t, deservedRose(list("12"), list("7")))
	assert.False(t, deservedRose(list("7"), list("7")))
	assert.False(t, deservedRose(list("7"), nil), "no share left")
}
