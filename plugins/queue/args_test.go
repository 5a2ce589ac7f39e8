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

func TestArgsTakeAReclaimMinimumRuntime(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Zero(t, args.ReclaimMinRuntime.Duration, "off by default")
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimMinRuntime": "10m"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, args.ReclaimMinRuntime.Duration)
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimMinRuntime": "-1m"}`), ContentType: runtime.ContentTypeJSON})
	assert.ErrorContains(t, err, "reclaimMinRuntime")
}

func TestArgsTakeAReclaimPatienceLimit(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultReclaimPatienceLimit, args.ReclaimPatienceLimit.Duration, "an hour by default")
	assert.Equal(t, time.Hour, DefaultReclaimPatienceLimit)
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatienceLimit": "0s"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Zero(t, args.ReclaimPatienceLimit.Duration, "0: no limit")
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatienceLimit": "1h"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, time.Hour, args.ReclaimPatienceLimit.Duration)
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatienceLimit": "-1m"}`), ContentType: runtime.ContentTypeJSON})
	assert.ErrorContains(t, err, "reclaimPatienceLimit: -1m0s must not be negative")
}

func TestArgsTakeReclaimPatienceAndALimitPerJob(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.True(t, *args.ReclaimPatience, "on by default")
	assert.Equal(t, PatienceCountsRunBeforeWait, args.ReclaimPatienceCounts, "the run before the wait by default")
	assert.Equal(t, int32(2), *args.ReclaimLimitPerJob, "twice by default")
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatience": false, "reclaimLimitPerJob": 0}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.False(t, *args.ReclaimPatience, "an admin turns it off")
	assert.Zero(t, *args.ReclaimLimitPerJob, "0: no limit")
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimLimitPerJob": -1}`), ContentType: runtime.ContentTypeJSON})
	assert.ErrorContains(t, err, "reclaimLimitPerJob: -1 must not be negative")
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatienceCounts": "WholeRun"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, PatienceCountsWholeRun, args.ReclaimPatienceCounts)
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatienceCounts": "Everything"}`), ContentType: runtime.ContentTypeJSON})
	assert.ErrorContains(t, err, `reclaimPatienceCounts: "Everything" is not RunBeforeWait or WholeRun`)
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"reclaimPatience": "yes"}`), ContentType: runtime.ContentTypeJSON})
	assert.Error(t, err, "a string is no bool")
}
