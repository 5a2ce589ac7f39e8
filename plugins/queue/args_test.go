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
	"github.com/tephra-dev/tephra/internal/quota"
)

func TestArgs(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, 168*time.Hour, args.UsageHalfLife.Duration, "history is on by default, with a week's half-life")

	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"usageHalfLife": "0s"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), args.UsageHalfLife.Duration, "0 turns history off")

	for _, raw := range []string{`{"usageHalfLife": "-1h"}`, `{"halfLife": "1h"}`} {
		_, err := ParseArgs(&runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON})
		assert.Error(t, err, raw)
	}
}

func TestProfilesMustAgreeOnTheHalfLife(t *testing.T) {
	s := newScheduler(t)
	s.profile(t, v1alpha1.SchedulerName)
	h := profileHandle{config: s.config, profile: "default-scheduler", informers: s.informers}
	_, err := accountsFor(h, s.tephra, time.Hour)
	assert.ErrorContains(t, err, "usageHalfLife")
}

// The scheduler's shares weigh the usage Queue status shows, decayed to when the tree is built;
// with a half-life of 0 they are by weight alone.
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
	v := view{total: quota.Amounts{gpu: 10}, allocated: map[string]quota.Amounts{}, pending: map[string]quota.Amounts{"a": {gpu: 10}, "b": {gpu: 10}}}
	lister := s.tephra.Scheduling().V1alpha1().Queues().Lister()

	with := &shareCache{queues: lister, halfLife: time.Hour, treeStale: true}
	tree := with.currentTree()
	assert.InEpsilon(t, 10*3600/math.Ln2, tree.Get("a").Usage[gpu], 1e-3, "usage measured a half-life ago counts half")
	shares := with.deserved(tree, v)
	assert.Equal(t, int64(2), shares["a"][gpu], "the queue that used the GPUs deserves a fifth")
	assert.Equal(t, int64(8), shares["b"][gpu])

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
