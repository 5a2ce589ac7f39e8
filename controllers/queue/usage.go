package queue

import (
	"time"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// History is how the controller accrues each queue's usage into status.usage (fair share over
// time, docs/queues.md): the half-life (0: history off, status.usage removed) and the time now.
type History struct {
	HalfLife time.Duration
	Now      time.Time
}

// UsageRefresh is how often usage is written although nothing else changed, so that it stays
// current without pod events: a minute, or a twentieth of the half-life when that is shorter
// (at least a second). Readers decay what they read to their own time, so between writes usage
// is only missing what accrued since, a twentieth of a half-life at most.
func UsageRefresh(halfLife time.Duration) time.Duration {
	return max(min(time.Minute, halfLife/20), time.Second)
}

// accrue returns the queue's status.usage at h.Now, allocated being what the queue has now.
//
// Over the interval since status.usage.time, the queue held the status's own allocated: the
// controller writes the two together, and writes status whenever the allocation changes. So the
// interval accrues at status.allocated, and the usage is written again (from now on at the new
// allocation) when the allocation changed or a refresh is due; otherwise the status keeps the
// usage it has, and no write is needed for it.
//
// Times are whole seconds, as metav1.Time serializes them: accruing up to a time the status then
// rounds down would count the lost fraction of a second twice.
func accrue(q *schedulingv1alpha1.Queue, allocated quota.Amounts, h History) *schedulingv1alpha1.QueueUsage {
	now := h.Now.Truncate(time.Second)
	prev := q.Status.Usage
	if prev == nil || prev.HalfLife.Duration <= 0 {
		// History starts now: nothing to continue from.
		return quota.UsageStatus(nil, h.HalfLife, now)
	}
	held := quota.FromList(q.Status.Allocated)
	usage := quota.UsageFromStatus(prev)
	if prev.HalfLife.Duration != h.HalfLife {
		// The half-life changed: usage is rescaled to stand for the same average allocation
		// (quota.AverageOf) under the new one.
		for name := range usage {
			usage[name] *= h.HalfLife.Seconds() / prev.HalfLife.Seconds()
		}
	} else {
		elapsed := now.Sub(prev.Time.Time)
		idle := len(prev.ResourceSeconds) == 0 && held.IsZero() && allocated.IsZero()
		if idle || sameAmounts(held, allocated) && elapsed+time.Second < UsageRefresh(h.HalfLife) {
			return prev
		}
	}
	return quota.UsageStatus(usage.Accrue(held, now.Sub(prev.Time.Time), h.HalfLife), h.HalfLife, now)
}

// sameAmounts compares amounts, zero amounts being absent ones (as in a ResourceList).
func sameAmounts(a, b quota.Amounts) bool {
	for name, v := range a {
		if b[name] != v {
			return false
		}
	}
	for name, v := range b {
		if a[name] != v {
			return false
		}
	}
	return true
}

// useHistory sets each queue's status.usage in a.Usage and its usage in the tree, decayed to now
// as the scheduler decays what it reads, so that the controller's deserved shares are the
// scheduler's.
func (a *Accounting) useHistory(queues []*schedulingv1alpha1.Queue, h History) {
	if h.HalfLife <= 0 {
		return
	}
	a.Usage = map[string]*schedulingv1alpha1.QueueUsage{}
	a.Tree.HistoryHalfLife = h.HalfLife
	for _, q := range queues {
		n := a.Tree.Get(q.Name)
		if n == nil {
			continue
		}
		u := accrue(q, a.Allocated[q.Name], h)
		a.Usage[q.Name] = u
		n.Usage = quota.UsageFromStatus(u).Decay(h.Now.Sub(u.Time.Time), h.HalfLife)
	}
}
