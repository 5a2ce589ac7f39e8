package quota

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Fair share over time (docs/queues.md): a queue's history of use lowers its weight against its
// siblings', as Slurm's fair-share factor and Kueue's admission fair sharing do.
//
// Usage. Each queue accrues its allocation as decayed resource-seconds, per resource: over an
// interval dt at allocation a, with half-life h,
//
//	U <- U*2^(-dt/h) + a*(h/ln 2)*(1 - 2^(-dt/h))
//
// which is the integral of a*2^(-age/h) over the interval: what was used one half-life ago counts
// half. A queue allocated a for good tends to a*h/ln 2, so U*ln 2/h reads as its average
// allocation (AverageOf).
//
// Factor. When a parent's share P of resource r is divided among its children, each child's
// weight w becomes w*2^(-u/s), where s is its share of the siblings' weights (w over the sum of
// their weights) and u its usage of r measured against the parent's share: its average
// allocation over recent half-lives (U*ln 2/h) over P. A queue that has held a fraction x of its
// parent's share for many half-lives has u = x; one that has used nothing lately has u = 0 and
// its weight in full.
//
// Property: when every queue's usage is in proportion to its weight share (u = k*s for one k,
// as when each has held its weight's share of a full cluster), every factor is the same, 2^-k,
// and the shares are by weight: so in the long run each queue's share of what is contended
// converges to its weight. A queue that used less than that meanwhile gets more, one that used
// more gets less. Guarantees and capabilities still bound the water-filling (claimOf): history
// moves only what weights divide.
//
// Usage is measured against what the parent could have given, not against the siblings' usage:
// then a few minutes of use weigh as a few minutes in a week's half-life, next to nothing, and a
// cluster that has just started, or a queue created today, is shared by weight as without
// history, where a share of the siblings' usage would have made the first queue to run hold
// all of it and lose most of its weight at once.

// minUsageFactor bounds the factor from below: a queue that used everything while its weight
// share is tiny would get a factor that rounds to zero, and water-filling divides by weights.
// 2^-20 leaves such a queue a millionth of its weight, which is nothing at any real cluster size.
const minUsageFactor = 1.0 / (1 << 20)

// UsageFactor is the factor by which history multiplies a queue's weight: 2^(-u/s), where
// usageShare is u and weightShare is s (see the comment above). 1 when usageShare is 0.
func UsageFactor(usageShare, weightShare float64) float64 {
	if usageShare <= 0 || weightShare <= 0 {
		return 1
	}
	return math.Max(math.Exp2(-usageShare/weightShare), minUsageFactor)
}

// Usage is a queue's decayed usage per resource, in resource-seconds (CPU in core-seconds,
// memory in byte-seconds, devices in device-seconds): the units of Queue status.usage.
type Usage map[corev1.ResourceName]float64

// Decay returns what u is worth elapsed later under half-life halfLife.
func (u Usage) Decay(elapsed, halfLife time.Duration) Usage {
	if u == nil {
		return nil
	}
	f := decay(elapsed, halfLife)
	out := make(Usage, len(u))
	for name, v := range u {
		out[name] = v * f
	}
	return out
}

// Accrue returns u decayed over elapsed plus allocation accrued over the same interval.
func (u Usage) Accrue(allocated Amounts, elapsed, halfLife time.Duration) Usage {
	out := u.Decay(elapsed, halfLife)
	if out == nil {
		out = Usage{}
	}
	// The integral of a*2^(-age/h) over the interval: a*(h/ln 2)*(1 - 2^(-dt/h)).
	accrued := halfLife.Seconds() / math.Ln2 * (1 - decay(elapsed, halfLife))
	for name, v := range allocated {
		if v > 0 {
			out[name] += perSecondUnit(name, v) * accrued
		}
	}
	return out
}

// AverageOf reads decayed usage as the average allocation it amounts to, in Amounts' units
// (millicores for CPU): U*ln 2/h, what a queue allocated that much for good would have accrued.
func AverageOf(u Usage, halfLife time.Duration) Amounts {
	out := Amounts{}
	if halfLife <= 0 {
		return out
	}
	for name, v := range u {
		per := v * math.Ln2 / halfLife.Seconds()
		if name == corev1.ResourceCPU {
			per *= 1000
		}
		out[name] = int64(math.Round(per))
	}
	return out
}

// decay is 2^(-elapsed/halfLife); 1 for no time (or time that ran backwards between two
// machines' clocks: usage is never grown by decay).
func decay(elapsed, halfLife time.Duration) float64 {
	if elapsed <= 0 || halfLife <= 0 {
		return 1
	}
	return math.Exp2(-elapsed.Seconds() / halfLife.Seconds())
}

// perSecondUnit is an amount in the unit its usage accrues in: cores for CPU (Amounts count
// millicores), the amount itself otherwise.
func perSecondUnit(name corev1.ResourceName, v int64) float64 {
	if name == corev1.ResourceCPU {
		return float64(v) / 1000
	}
	return float64(v)
}

// UsageFromStatus reads a Queue's status.usage (nil when it has none).
func UsageFromStatus(s *v1alpha1.QueueUsage) Usage {
	if s == nil {
		return nil
	}
	out := make(Usage, len(s.ResourceSeconds))
	for name, q := range s.ResourceSeconds {
		out[name] = q.AsApproximateFloat64()
	}
	return out
}

// UsageStatus writes usage as a Queue's status.usage, measured at now with halfLife. Memory in
// byte-seconds exceeds int64 in a week on a large cluster (1 PiB for 10^4 s), so quantities are
// parsed from decimals, which resource.Quantity holds at any size, rather than built from
// integers. Three decimals are kept, and none above a million: the significant digits of a
// float64 are used up by then.
func UsageStatus(usage Usage, halfLife time.Duration, now time.Time) *v1alpha1.QueueUsage {
	out := &v1alpha1.QueueUsage{HalfLife: metav1.Duration{Duration: halfLife}, Time: metav1.NewTime(now)}
	for name, v := range usage {
		if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		decimals := 3
		if v >= 1e6 {
			decimals = 0
		}
		q, err := resource.ParseQuantity(strconv.FormatFloat(v, 'f', decimals, 64))
		if err != nil || q.IsZero() {
			continue
		}
		if out.ResourceSeconds == nil {
			out.ResourceSeconds = corev1.ResourceList{}
		}
		out.ResourceSeconds[name] = q
	}
	return out
}

// DefaultUsageHalfLife is the default half-life of usage history (tephra-controllers'
// --usage-half-life): a week, as Slurm's PriorityDecayHalfLife.
const DefaultUsageHalfLife = 168 * time.Hour

// StatusHalfLife is the half-life the Queue controller accrues usage with, as its newest write of
// a queue's status.usage says: the one setting of it (tephra-controllers' --usage-half-life),
// which the scheduler reads rather than repeats. 0 when no queue has usage: history is off, or
// nothing was used yet, and shares are by weight alone either way.
func (t *Tree) StatusHalfLife() time.Duration {
	var newest *v1alpha1.QueueUsage
	for _, n := range t.Nodes() {
		if u := n.statusUsage; u != nil && u.HalfLife.Duration > 0 && (newest == nil || newest.Time.Before(&u.Time)) {
			newest = u
		}
	}
	if newest == nil {
		return 0
	}
	return newest.HalfLife.Duration
}

// UseHistory sets every queue's Usage from its Queue status.usage, decayed from when it was
// measured to now, so that queues are compared at one time. With a half-life of 0 it clears
// them: history is off and shares are by weight alone.
func (t *Tree) UseHistory(halfLife time.Duration, now time.Time) {
	t.HistoryHalfLife = max(halfLife, 0)
	for _, n := range t.Nodes() {
		n.Usage = nil
		if halfLife <= 0 || n.statusUsage == nil {
			continue
		}
		n.Usage = UsageFromStatus(n.statusUsage).Decay(now.Sub(n.statusUsage.Time.Time), halfLife)
		if was := n.statusUsage.HalfLife.Duration; was > 0 && was != halfLife {
			// Accrued under another half-life: rescaled to the same average allocation, as the
			// Queue controller rescales it when it next writes it.
			for name := range n.Usage {
				n.Usage[name] *= halfLife.Seconds() / was.Seconds()
			}
		}
	}
}

// historyFactors returns the factor of each child's weight in resource name when their parent's
// share of it is parentShare (Amounts' units), with usage accrued under halfLife: nil when no child
// has usage of it, every factor then being 1 and the shares by weight alone.
func historyFactors(children []*Node, name corev1.ResourceName, parentShare int64, halfLife time.Duration) []float64 {
	var weights float64
	used := false
	for _, c := range children {
		weights += float64(c.Weight)
		used = used || UsageShare(c.Usage, name, parentShare, halfLife) > 0
	}
	if !used || weights <= 0 || parentShare <= 0 || halfLife <= 0 {
		return nil
	}
	out := make([]float64, len(children))
	for i, c := range children {
		out[i] = UsageFactor(UsageShare(c.Usage, name, parentShare, halfLife), float64(c.Weight)/weights)
	}
	return out
}

// UsageShare is u of the factor: the average allocation of name that usage amounts to under
// halfLife, over parentShare (Amounts' units: millicores for CPU); 0 when either is 0. It is
// counted in whole percent: history shorter than about a two-hundredth of a half-life leaves the
// shares exactly by weight (whole units, rounded down, would otherwise lose a unit to a factor of
// 0.9999), and shares do not move with every status write.
func UsageShare(usage Usage, name corev1.ResourceName, parentShare int64, halfLife time.Duration) float64 {
	if parentShare <= 0 || halfLife <= 0 {
		return 0
	}
	u := usage[name] * math.Ln2 / halfLife.Seconds() / perSecondUnit(name, parentShare)
	return math.Round(u*100) / 100
}
