package cli

import (
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Usage history as people read it: decayed resource-seconds are shown as the average allocation
// they amount to (quota.AverageOf), "nvidia.com/gpu: 3.2 avg".

// usageAverages is a queue's status.usage as average allocations, per resource, in the
// resource's display unit (cores, GiB of memory, units): nil without usage.
func usageAverages(u *schedulingv1alpha1.QueueUsage) map[corev1.ResourceName]float64 {
	if u == nil || u.HalfLife.Duration <= 0 {
		return nil
	}
	out := map[corev1.ResourceName]float64{}
	for name, v := range quota.UsageFromStatus(u) {
		avg := v * math.Ln2 / u.HalfLife.Seconds()
		if name == corev1.ResourceMemory {
			avg /= 1 << 30
		}
		out[name] = avg
	}
	return out
}

// dominantUsage is the resource in which the queue's usage is the largest part of the whole
// cluster's (root's usage; its own values when root has none), "" when it has none.
func dominantUsage(own, root map[corev1.ResourceName]float64) corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(own))
	for name, v := range own {
		if v > 0 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	var best corev1.ResourceName
	var bestShare float64
	for _, name := range names {
		share := own[name]
		if root[name] > 0 {
			share /= root[name]
		}
		if best == "" || share > bestShare {
			best, bestShare = name, share
		}
	}
	return best
}

// formatAverage formats an average allocation: "nvidia.com/gpu: 3.2 avg", "memory: 12.5Gi avg".
func formatAverage(name corev1.ResourceName, v float64) string {
	unit := ""
	if name == corev1.ResourceMemory {
		unit = "Gi"
	}
	return fmt.Sprintf("%s: %.1f%s avg", resourceLabel(name), v, unit)
}

// usageCell is the USAGE column: the queue's usage in its dominant resource, "-" without history.
func usageCell(u, root *schedulingv1alpha1.QueueUsage) string {
	own := usageAverages(u)
	name := dominantUsage(own, usageAverages(root))
	switch {
	case u == nil:
		return "-"
	case name == "" || math.Round(own[name]*10) == 0:
		// Nothing used, or too little to show at a tenth (a week's half-life needs hours of use).
		return "0"
	}
	return formatAverage(name, own[name])
}

// historyNote says how usage history weighs a queue's weight against its siblings' in the
// resource where its usage is largest, as quota.Deserved does: its average allocation against
// its parent's deserved share (from the parent's status). "" when history plays no part.
func historyNote(tree *quota.Tree, queues []*schedulingv1alpha1.Queue, q *schedulingv1alpha1.Queue, now time.Time) string {
	if q == nil || q.Status.Usage == nil || q.Status.Usage.HalfLife.Duration <= 0 {
		return ""
	}
	halfLife := q.Status.Usage.HalfLife.Duration
	tree.UseHistory(halfLife, now)
	n := tree.Get(q.Name)
	if n == nil || n.Parent == nil {
		return ""
	}
	name := dominantUsage(n.Usage, n.Parent.Usage)
	if name == "" {
		return fmt.Sprintf("usage history (half-life %s): none yet, so its weight counts in full", halfLife)
	}
	var parentShare int64
	for _, p := range queues {
		if p.Name == n.Parent.Name {
			parentShare = quota.FromList(p.Status.Deserved)[name]
		}
	}
	var weights float64
	for _, c := range n.Parent.Children {
		weights += float64(c.Weight)
	}
	u, s := quota.UsageShare(n.Usage, name, parentShare, halfLife), float64(n.Weight)/weights
	f := quota.UsageFactor(u, s)
	return fmt.Sprintf("usage history (half-life %s): %s, %.0f%% of its parent's share (%s) against a weight share of %.0f%%: its weight counts ×%.2f",
		halfLife, formatAverage(name, usageAverages(q.Status.Usage)[name]), 100*u, quota.Format(name, parentShare), 100*s, f)
}
