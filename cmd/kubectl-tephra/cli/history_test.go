package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func TestUsageReadsAsAnAverageAllocation(t *testing.T) {
	now := time.Now()
	// 4 GPUs for good under a 1h half-life accrue 4*3600/ln 2 GPU-seconds.
	own := quota.UsageStatus(quota.Usage{gpu: 4 * 3600 / 0.6931471805599453, corev1.ResourceCPU: 100}, time.Hour, now)
	root := quota.UsageStatus(quota.Usage{gpu: 8 * 3600 / 0.6931471805599453, corev1.ResourceCPU: 1e6}, time.Hour, now)
	assert.Equal(t, "nvidia.com/gpu: 4.0 avg", usageCell(own, root), "the resource where the queue is the largest part of the cluster's usage")
	assert.Equal(t, "-", usageCell(nil, root), "history off")
	assert.Equal(t, "0", usageCell(quota.UsageStatus(nil, time.Hour, now), root), "nothing used yet")
}

func TestWhySaysHowHistoryWeighsTheQueue(t *testing.T) {
	now := time.Now()
	queue := func(name string, gpuSeconds float64) *schedulingv1alpha1.Queue {
		q := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1}}
		q.Status.Usage = quota.UsageStatus(quota.Usage{gpu: gpuSeconds}, time.Hour, now)
		return q
	}
	busy, idle := queue("busy", 6*3600/0.6931471805599453), queue("idle", 2*3600/0.6931471805599453)
	root := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "root"}}
	root.Status.Deserved = corev1.ResourceList{gpu: *resource.NewQuantity(8, resource.DecimalSI)}
	queues := []*schedulingv1alpha1.Queue{root, busy, idle}
	tree := quota.NewTree(queues)
	assert.Equal(t, "usage history (half-life 1h0m0s): nvidia.com/gpu: 6.0 avg, 75% of its parent's share (8) against a weight share of 50%: its weight counts ×0.35",
		historyNote(tree, queues, busy, now), "6 GPUs on average of 8")
	assert.Contains(t, historyNote(tree, queues, idle, now), "25% of its parent's share (8) against a weight share of 50%: its weight counts ×0.71")
	idle.Status.Usage = nil
	assert.Empty(t, historyNote(tree, queues, idle, now), "history off")
}
