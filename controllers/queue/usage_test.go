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

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// usageCluster is a 12-GPU node and two queues of weight 1 that each run 4 GPUs and want 12.
func usageCluster() ([]*schedulingv1alpha1.Queue, []corev1.Pod, []corev1.Node) {
	queues := []*schedulingv1alpha1.Queue{testQueue("root", "", 1), testQueue("a", "root", 1), testQueue("b", "root", 1)}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: resource.MustParse("12")}}}
	var pods []corev1.Pod
	for _, q := range []string{"a", "b"} {
		in := map[string]string{schedulingv1alpha1.QueueLabel: q}
		pods = append(pods, testPod(q+"-run", in, "n", corev1.PodRunning, 4), testPod(q+"-wait", in, "", corev1.PodPending, 8))
	}
	return queues, pods, []corev1.Node{node}
}

func TestUsageStartsWhenHistoryIsOnAndIsRemovedWhenOff(t *testing.T) {
	queues, pods, nodes := usageCluster()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := AccountWithHistory(queues, pods, nodes, nil, tephraOnly, nil, History{HalfLife: time.Hour, Now: now})
	status := a.Status(queues[1])
	require.NotNil(t, status.Usage)
	assert.Equal(t, now, status.Usage.Time.Time, "history starts now")
	assert.Equal(t, time.Hour, status.Usage.HalfLife.Duration)
	assert.Empty(t, status.Usage.ResourceSeconds, "nothing used yet")
	assert.Equal(t, int64(6), a.Deserved["a"][gpu], "no usage: shares by weight")

	queues[1].Status = status
	off := Account(queues, pods, nodes, nil, tephraOnly, nil)
	assert.Nil(t, off.Status(queues[1]).Usage, "a half-life of 0 removes status.usage")
}

func TestUsageAccruesWhatTheStatusShowedAllocated(t *testing.T) {
	queues, pods, nodes := usageCluster()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// a ran 4 GPUs for the last half-life; b's history starts now.
	queues[1].Status.Allocated = corev1.ResourceList{gpu: resource.MustParse("4")}
	queues[1].Status.Usage = quota.UsageStatus(nil, time.Hour, start)
	queues[2].Status.Usage = quota.UsageStatus(nil, time.Hour, start.Add(time.Hour))
	a := AccountWithHistory(queues, pods, nodes, nil, tephraOnly, nil, History{HalfLife: time.Hour, Now: start.Add(time.Hour)})

	usage := a.Status(queues[1]).Usage
	require.NotNil(t, usage)
	want := 4 * 3600 / math.Ln2 * 0.5 // a*(h/ln 2)*(1 - 2^-1)
	got := usage.ResourceSeconds[gpu]
	assert.InEpsilon(t, want, got.AsApproximateFloat64(), 1e-6, "GPU-seconds accrued over a half-life")
	assert.Equal(t, start.Add(time.Hour), usage.Time.Time)
	// a held 2 GPUs on average, a sixth of the 12: its factor is 2^-(1/6/0.5) = 0.79 against b's 1.
	assert.Equal(t, int64(5), a.Deserved["a"][gpu], "the queue that used GPUs deserves less (12*0.79/1.79, rounded down)")
	assert.Equal(t, int64(6), a.Deserved["b"][gpu], "the queue that did not deserves more than a's (6.69, rounded down)")
}

func TestUsageIsRewrittenOnlyWhenAllocationChangesOrARefreshIsDue(t *testing.T) {
	queues, pods, nodes := usageCluster()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a0 := AccountWithHistory(queues, pods, nodes, nil, tephraOnly, nil, History{HalfLife: time.Hour, Now: start})
	queues[1].Status = a0.Status(queues[1])

	soon := AccountWithHistory(queues, pods, nodes, nil, tephraOnly, nil, History{HalfLife: time.Hour, Now: start.Add(10 * time.Second)})
	assert.Equal(t, queues[1].Status, soon.Status(queues[1]), "same allocation, no refresh due (a minute at a 1h half-life): no write")

	later := AccountWithHistory(queues, pods, nodes, nil, tephraOnly, nil, History{HalfLife: time.Hour, Now: start.Add(UsageRefresh(time.Hour))})
	refreshed := later.Status(queues[1]).Usage
	assert.Equal(t, start.Add(time.Minute), refreshed.Time.Time, "the refresh writes usage")
	q := refreshed.ResourceSeconds[gpu]
	assert.InDelta(t, 4*60, q.AsApproximateFloat64(), 2, "4 GPUs for a minute")

	pods = pods[1:] // a's running pod ends
	changed := AccountWithHistory(queues, pods, nodes, nil, tephraOnly, nil, History{HalfLife: time.Hour, Now: start.Add(10 * time.Second)})
	u := changed.Status(queues[1]).Usage
	assert.Equal(t, start.Add(10*time.Second), u.Time.Time, "a changed allocation writes usage")
	q = u.ResourceSeconds[gpu]
	assert.InDelta(t, 40, q.AsApproximateFloat64(), 0.1, "accrued at the allocation the status showed")
}

func TestUsageRefresh(t *testing.T) {
	assert.Equal(t, time.Minute, UsageRefresh(168*time.Hour))
	assert.Equal(t, 3*time.Second, UsageRefresh(time.Minute))
	assert.Equal(t, time.Second, UsageRefresh(2*time.Second))
}
