package quota

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const week = 168 * time.Hour

// simulation runs leaf queues under root whose demand always exceeds the cluster: every step, each
// queue runs what it deserves, accrues it for the step, and the shares are computed again.
type simulation struct {
	tree     *Tree
	total    Amounts
	demand   map[string]Amounts
	halfLife time.Duration
	shares   map[string]Amounts
}

func newSimulation(total int64, weights map[string]int32, halfLife time.Duration) *simulation {
	var queues []*v1alpha1.Queue
	demand := map[string]Amounts{}
	for name, w := range weights {
		queues = append(queues, queue(name, "root", w, 0, -1))
		demand[name] = gpus(10 * total)
	}
	s := &simulation{tree: NewTree(queues), total: gpus(total), demand: demand, halfLife: halfLife}
	s.tree.HistoryHalfLife = halfLife
	s.shares = Deserved(s.tree, s.total, s.demand)
	return s
}

// run advances the simulation by steps of dt.
func (s *simulation) run(steps int, dt time.Duration) {
	for range steps {
		for _, n := range s.tree.Root.Children {
			if s.demand[n.Name].IsZero() {
				n.Usage = n.Usage.Decay(dt, s.halfLife)
				continue
			}
			n.Usage = n.Usage.Accrue(s.shares[n.Name], dt, s.halfLife)
		}
		s.shares = Deserved(s.tree, s.total, s.demand)
	}
}

func (s *simulation) fraction(name string) float64 {
	return float64(s.shares[name][gpu]) / float64(s.total[gpu])
}

func TestLongRunSharesConvergeToWeights(t *testing.T) {
	for _, weights := range []map[string]int32{{"a": 1, "b": 1}, {"a": 3, "b": 1}, {"a": 1, "b": 2, "c": 5}} {
		s := newSimulation(1000, weights, time.Hour)
		// One queue starts alone for two half-lives, so that history is lopsided to begin with.
		for name := range weights {
			if name != "a" {
				s.demand[name] = Amounts{}
			}
		}
		s.shares = Deserved(s.tree, s.total, s.demand)
		s.run(40, 3*time.Minute)
		require.Equal(t, int64(1000), s.shares["a"][gpu], "a queue alone has the cluster, history or not")
		for name := range weights {
			s.demand[name] = gpus(10000)
		}
		s.shares = Deserved(s.tree, s.total, s.demand)
		s.run(400, 3*time.Minute) // 20 half-lives
		var sum int32
		for _, w := range weights {
			sum += w
		}
		for name, w := range weights {
			assert.InDelta(t, float64(w)/float64(sum), s.fraction(name), 0.01, "queue %s of %v", name, weights)
		}
	}
}

func TestAnIdleQueueEnteringGetsMoreThanItsWeightThenConverges(t *testing.T) {
	s := newSimulation(1000, map[string]int32{"busy": 1, "idle": 1}, time.Hour)
	s.demand["idle"] = Amounts{}
	s.shares = Deserved(s.tree, s.total, s.demand)
	s.run(200, 3*time.Minute) // ten half-lives of the cluster to itself

	s.demand["idle"] = gpus(1000)
	s.shares = Deserved(s.tree, s.total, s.demand)
	// busy held the whole cluster for ten half-lives: its usage is the parent's share (u = 1), its
	// factor 2^-(1/0.5) = 1/4, idle's 1, so idle deserves 4/5.
	assert.InDelta(t, 800, s.shares["idle"][gpu], 2, "the queue that was idle gets more than its weight's half at first")
	assert.InDelta(t, 200, s.shares["busy"][gpu], 2)

	s.run(400, 3*time.Minute)
	assert.InDelta(t, 0.5, s.fraction("idle"), 0.01, "then the shares converge to the weights")
	assert.InDelta(t, 0.5, s.fraction("busy"), 0.01)
}

func TestUsageEqualToWeightsKeepsSharesByWeight(t *testing.T) {
	tree := NewTree([]*v1alpha1.Queue{queue("a", "root", 3, 0, -1), queue("b", "root", 1, 0, -1)})
	tree.HistoryHalfLife = time.Hour
	// a held 9 of the 12 GPUs on average, b 3: usage in proportion to the weights.
	tree.Get("a").Usage = Usage{gpu: 9 * 3600 / math.Ln2}
	tree.Get("b").Usage = Usage{gpu: 3 * 3600 / math.Ln2}
	assert.InDelta(t, 0.5, UsageFactor(0.75, 0.75), 1e-12)
	assert.InDelta(t, 0.5, UsageFactor(0.25, 0.25), 1e-12)
	got := Deserved(tree, gpus(12), map[string]Amounts{"a": gpus(100), "b": gpus(100)})
	assert.Equal(t, int64(9), got["a"][gpu])
	assert.Equal(t, int64(3), got["b"][gpu])
}

func TestHistoryKeepsGuaranteesAndCapabilities(t *testing.T) {
	t.Run("a guarantee stays a floor however much the queue used", func(t *testing.T) {
		tree := NewTree([]*v1alpha1.Queue{queue("a", "root", 1, 6, -1), queue("b", "root", 1, 0, -1)})
		tree.HistoryHalfLife = time.Hour
		tree.Get("a").Usage = Usage{gpu: 1e9}
		got := Deserved(tree, gpus(12), map[string]Amounts{"a": gpus(100), "b": gpus(100)})
		assert.Equal(t, int64(6), got["a"][gpu])
		assert.Equal(t, int64(6), got["b"][gpu])
	})
	t.Run("a capability stays a ceiling however little the queue used", func(t *testing.T) {
		tree := NewTree([]*v1alpha1.Queue{queue("a", "root", 1, 0, -1), queue("b", "root", 1, 0, 2)})
		tree.HistoryHalfLife = time.Hour
		tree.Get("a").Usage = Usage{gpu: 1e9}
		got := Deserved(tree, gpus(12), map[string]Amounts{"a": gpus(100), "b": gpus(100)})
		assert.Equal(t, int64(10), got["a"][gpu])
		assert.Equal(t, int64(2), got["b"][gpu])
	})
}

func TestHistoryOffGivesSharesByWeight(t *testing.T) {
	usage := func(name string, gpuSeconds float64) *v1alpha1.Queue {
		q := queue(name, "root", 1, 0, -1)
		q.Status.Usage = UsageStatus(Usage{gpu: gpuSeconds}, week, time.Now())
		return q
	}
	// a held all 10 GPUs for many half-lives; b nothing.
	queues := []*v1alpha1.Queue{usage("a", 10*week.Seconds()/math.Ln2), usage("b", 0)}
	demand := map[string]Amounts{"a": gpus(100), "b": gpus(100)}

	tree := NewTree(queues)
	assert.Equal(t, int64(5), Deserved(tree, gpus(10), demand)["a"][gpu], "NewTree alone reads no history")
	tree.UseHistory(0, time.Now())
	assert.Equal(t, int64(5), Deserved(tree, gpus(10), demand)["a"][gpu], "a half-life of 0 turns history off")
	tree.UseHistory(week, time.Now())
	assert.Equal(t, int64(2), Deserved(tree, gpus(10), demand)["a"][gpu], "with history, the queue that used everything gets 1/5")
	queues[0].Status.Usage = UsageStatus(Usage{gpu: 10 * (10 * time.Minute).Seconds()}, week, time.Now())
	tree = NewTree(queues)
	tree.UseHistory(week, time.Now())
	assert.Equal(t, int64(5), Deserved(tree, gpus(10), demand)["a"][gpu], "ten minutes of the whole cluster in a week's half-life are under a percent: shares by weight")
	queues[0].Status.Usage = UsageStatus(Usage{gpu: 10 * (4 * time.Hour).Seconds()}, week, time.Now())
	tree = NewTree(queues)
	tree.UseHistory(week, time.Now())
	assert.Equal(t, int64(4), Deserved(tree, gpus(10), demand)["a"][gpu], "four hours of it are 2%: a's weight counts x0.97 (4.93, rounded down)")
}

func TestUsageIsDecayedToNowWhenRead(t *testing.T) {
	measured := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := queue("a", "root", 1, 0, -1)
	q.Status.Usage = UsageStatus(Usage{gpu: 1000, corev1.ResourceCPU: 64}, time.Hour, measured)
	tree := NewTree([]*v1alpha1.Queue{q})
	tree.UseHistory(time.Hour, measured.Add(2*time.Hour))
	assert.InDelta(t, 250, tree.Get("a").Usage[gpu], 1e-9, "two half-lives later, a quarter")
	assert.InDelta(t, 16, tree.Get("a").Usage[corev1.ResourceCPU], 1e-9)
	tree.UseHistory(2*time.Hour, measured.Add(2*time.Hour))
	assert.InDelta(t, 1000, tree.Get("a").Usage[gpu], 1e-9, "accrued under another half-life: rescaled (x2), then decayed one half-life")
}

func TestAccrualTendsToAllocationTimesHalfLifeOverLn2(t *testing.T) {
	var u Usage
	for range 2000 {
		u = u.Accrue(Amounts{gpu: 4, corev1.ResourceCPU: 1500}, 36*time.Second, time.Hour)
	}
	// Twenty half-lives: within 2^-20 of the limit.
	avg := AverageOf(u, time.Hour)
	assert.Equal(t, int64(4), avg[gpu])
	assert.Equal(t, int64(1500), avg[corev1.ResourceCPU], "CPU accrues in core-seconds and averages back to millicores")
	one := Usage(nil).Accrue(Amounts{gpu: 4}, time.Minute, time.Hour)
	split := Usage(nil).Accrue(Amounts{gpu: 4}, 30*time.Second, time.Hour).Accrue(Amounts{gpu: 4}, 30*time.Second, time.Hour)
	assert.InDelta(t, one[gpu], split[gpu], 1e-9, "accrual does not depend on how often it is measured")
	assert.InDelta(t, 4*60*(1-math.Ln2/120), one[gpu], 0.1, "4 GPUs for a minute are 240 GPU-seconds, less their decay within the minute")
}

func TestUsageStatusHoldsByteSecondsBeyondInt64(t *testing.T) {
	// 512 TiB for a week of seconds: 3.4e20 byte-seconds, beyond int64's 9.2e18.
	big := 512.0 * (1 << 40) * week.Seconds()
	now := metav1.Now().Time
	status := UsageStatus(Usage{corev1.ResourceMemory: big, gpu: 0.25, corev1.ResourceCPU: 0}, week, now)
	q := status.ResourceSeconds[corev1.ResourceMemory]
	assert.InEpsilon(t, big, q.AsApproximateFloat64(), 1e-9)
	// It survives a round trip through the API's serialization.
	again, err := resource.ParseQuantity(q.String())
	require.NoError(t, err)
	assert.InEpsilon(t, big, again.AsApproximateFloat64(), 1e-9)
	assert.InDelta(t, 0.25, UsageFromStatus(status)[gpu], 1e-9)
	assert.NotContains(t, status.ResourceSeconds, corev1.ResourceCPU, "no usage, no entry")
	assert.Equal(t, week, status.HalfLife.Duration)
}

func TestUsageFactorIsBounded(t *testing.T) {
	assert.Equal(t, 1.0, UsageFactor(0, 0.5))
	assert.InDelta(t, 0.25, UsageFactor(1, 0.5), 1e-12)
	f := UsageFactor(1, 1e-4)
	assert.Greater(t, f, 0.0, "never 0: water-filling divides by weights")
	assert.False(t, math.IsInf(1/f, 0))
}

// The scheduler takes the half-life from the Queue controller's newest write of status.usage, its
// one setting; with no usage written anywhere, history is off.
func TestStatusHalfLifeIsTheNewestWrites(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	queue := func(name string, usage *v1alpha1.QueueUsage) *v1alpha1.Queue {
		q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Weight: 1}}
		q.Status.Usage = usage
		return q
	}
	assert.Zero(t, NewTree([]*v1alpha1.Queue{queue("a", nil), queue("b", nil)}).StatusHalfLife(), "no usage: off")

	older := UsageStatus(Usage{"cpu": 1}, time.Hour, at)
	newer := UsageStatus(Usage{"cpu": 1}, 2*time.Hour, at.Add(time.Minute))
	tree := NewTree([]*v1alpha1.Queue{queue("a", older), queue("b", newer), queue("c", nil)})
	assert.Equal(t, 2*time.Hour, tree.StatusHalfLife(), "the half-life the controller runs with now")
	tree.UseHistory(tree.StatusHalfLife(), at.Add(time.Minute))
	assert.InDelta(t, 2*math.Pow(2, -1.0/120), tree.Get("a").Usage["cpu"], 1e-9, "usage accrued under the old half-life is rescaled to the new (x2), and decayed a minute")
}
