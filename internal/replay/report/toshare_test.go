package report

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// On 4 GPUs sampled every 10 s, queue a is owed room from 10 to 40 (contended, it holds 1 of the
// 2 it deserves), reaches its share at 40, is owed room again at 60 and is still below at the end
// (100); below its share while nobody else asks (uncontended) starts no episode. Queue b holds
// what it deserves throughout.
func TestTimeToShareIsFromOwedRoomToTheShare(t *testing.T) {
	s := Series{
		Times:     []float64{5, 15, 25, 35, 45, 55, 65, 75, 85, 95},
		Contended: []bool{false, true, true, true, true, false, true, true, true, true},
		Share: [][]float64{
			{0, 0.25, 0.25, 0.25, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25},
			{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
		},
		Deserved: [][]float64{
			{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
			{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
		},
	}
	all, queues := toShareOf(s, 100, 4)
	a, b := queues[0], queues[1]
	assert.Equal(t, 2, a.Episodes, "15 to 45, and 65 to the end; the uncontended 5 and 55 start none")
	assert.Equal(t, 1, a.Unreached)
	assert.InDelta(t, (30.0+35.0)/2, a.Mean, 1e-9)
	assert.InDelta(t, 35.0, a.Max, 1e-9)
	assert.Zero(t, b.Episodes)
	assert.True(t, math.IsNaN(b.Mean) && math.IsNaN(b.Max), "no episode, no figure")
	assert.Equal(t, ToShare{Episodes: 2, Unreached: 1, Mean: a.Mean, Max: a.Max}, all)
}

// Less than a GPU below the share is at the share: held and deserved are whole GPUs.
func TestTimeToShareIgnoresLessThanAGPU(t *testing.T) {
	s := Series{Times: []float64{5, 15}, Contended: []bool{true, true},
		Share: [][]float64{{0.25, 0.25}}, Deserved: [][]float64{{0.25 + 0.1/4, 0.25}}}
	all, _ := toShareOf(s, 20, 4)
	assert.Zero(t, all.Episodes)
}

// Through Analyze: on 4 GPUs, a holds all 4 from 0 to 50 while b waits from 0 for 2; b reaches its
// share at 50 (a's job ends), sampled every 25 s: one episode of b, from 12.5 to 62.5.
func TestAnalyzeReportsEachQueuesTimeToShare(t *testing.T) {
	run := Run{Config: "C", GPUs: 4, End: 100, Queues: []Queue{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}, Jobs: []Job{
		gangJob("a1", "a", 0, 4, []float64{0}, 50, pod("a1-0", 0, 0, 50)),
		gangJob("b1", "b", 0, 2, []float64{50}, 100, pod("b1-0", 50, 50, 100)),
	}}
	o := Options{Samples: 4}.Analyze(run)
	assert.Zero(t, o.Queues[0].ToShare.Episodes, "a held more than its share")
	assert.Equal(t, ToShare{Episodes: 1, Mean: 50, Max: 50}, o.Queues[1].ToShare)
	assert.Equal(t, 1, o.All.ToShare.Episodes)
}
