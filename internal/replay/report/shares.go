package report

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// gpu is the resource the replay's pods ask for, as internal/quota names it.
const gpu corev1.ResourceName = "nvidia.com/gpu"

// queueSpec is a queue as its deserved share is computed.
type queueSpec struct {
	Name              string
	Weight, Guarantee int64
}

// queueSpecs are the run's queues and those its jobs name, sorted by name. A queue the jobs name
// but Run.Queues lacks gets the defaults (weight 1, no guarantee), as a Queue object would.
func queueSpecs(run Run) []queueSpec {
	byName := map[string]queueSpec{}
	for _, q := range run.Queues {
		if q.Name != "" {
			byName[q.Name] = queueSpec{Name: q.Name, Weight: max(q.Weight, 1), Guarantee: max(q.Guarantee, 0)}
		}
	}
	for _, j := range run.Jobs {
		if name := queueOf(j); byName[name].Name == "" {
			byName[name] = queueSpec{Name: name, Weight: 1}
		}
	}
	out := make([]queueSpec, 0, len(byName))
	for _, q := range byName {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// queueOf is the queue a job is in: v1alpha1.DefaultQueue when it names none.
func queueOf(j Job) string {
	if j.Queue == "" {
		return v1alpha1.DefaultQueue
	}
	return j.Queue
}

// shares turns the grid's difference arrays into the series, and computes the queues' deserved
// shares and their deviations.
func shares(out *Outcomes, queues []queueSpec, g grid, allocated, busy []int64, held, demand [][]int64) {
	s := &out.Series
	s.Times = make([]float64, g.n)
	for k := range s.Times {
		s.Times[k] = g.at(k)
	}
	capacity := float64(out.GPUs)
	fraction := func(v int64) float64 {
		if capacity <= 0 {
			return 0
		}
		return float64(v) / capacity
	}
	s.Allocated, s.Busy = cumulate(allocated, g.n, fraction), cumulate(busy, g.n, fraction)
	s.Share, s.Deserved = make([][]float64, len(queues)), make([][]float64, len(queues))
	demands := make([][]int64, len(queues))
	for i := range queues {
		s.Share[i] = cumulate(held[i], g.n, fraction)
		s.Deserved[i] = make([]float64, g.n)
		demands[i] = cumulate(demand[i], g.n, func(v int64) int64 { return v })
	}
	s.Contended = make([]bool, g.n)

	divide := newDivider(queues, out.GPUs)
	deviation, share, deserved := make([]float64, len(queues)), make([]float64, len(queues)), make([]float64, len(queues))
	asked := make([]int64, len(queues))
	for k := 0; k < g.n && divide != nil; k++ {
		var sum int64
		for i := range queues {
			asked[i] = demands[i][k]
			sum += asked[i]
		}
		d := divide.deserved(asked)
		s.Contended[k] = sum >= int64(out.GPUs)
		if s.Contended[k] {
			out.ContendedSamples++
		}
		for i := range queues {
			s.Deserved[i][k] = fraction(d[i])
			if s.Contended[k] {
				deviation[i] += math.Abs(s.Share[i][k] - s.Deserved[i][k])
				share[i] += s.Share[i][k]
				deserved[i] += s.Deserved[i][k]
			}
		}
	}

	// The GPU-seconds held and deserved over the contended samples: each sample stands for its
	// cell of the grid, dt long.
	gpuSeconds := capacity * g.dt
	for i := range out.Queues {
		q := &out.Queues[i]
		q.ReceivedGPUSeconds, q.DeservedGPUSeconds = share[i]*gpuSeconds, deserved[i]*gpuSeconds
		out.All.ReceivedGPUSeconds += q.ReceivedGPUSeconds
		out.All.DeservedGPUSeconds += q.DeservedGPUSeconds
	}

	out.All.MeanShare, out.All.MeanDeserved, out.All.ShareMAD = math.NaN(), math.NaN(), math.NaN()
	for i := range out.Queues {
		q := &out.Queues[i]
		q.MeanShare, q.MeanDeserved, q.ShareMAD = math.NaN(), math.NaN(), math.NaN()
	}
	if out.ContendedSamples == 0 {
		return
	}
	n := float64(out.ContendedSamples)
	out.All.MeanShare, out.All.MeanDeserved = 0, 0
	var mads []float64
	for i := range out.Queues {
		q := &out.Queues[i]
		q.MeanShare, q.MeanDeserved, q.ShareMAD = share[i]/n, deserved[i]/n, deviation[i]/n
		out.All.MeanShare += q.MeanShare
		out.All.MeanDeserved += q.MeanDeserved
		if q.Jobs > 0 {
			mads = append(mads, q.ShareMAD)
		}
	}
	if len(mads) > 0 {
		out.All.ShareMAD = StatsOf(mads).Mean
	}
}

// divider divides the cluster's GPUs between the queues as Tephra does (weights, guarantees,
// water-filling capped at what each asks: docs/queues.md).
type divider struct {
	tree   *quota.Tree
	queues []queueSpec
	total  quota.Amounts
}

// newDivider is nil for a cluster without GPUs: there is nothing to divide.
func newDivider(queues []queueSpec, gpus int) *divider {
	if gpus <= 0 {
		return nil
	}
	objects := make([]*v1alpha1.Queue, 0, len(queues))
	for _, q := range queues {
		if q.Name == v1alpha1.RootQueue {
			continue
		}
		obj := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.Name}}
		obj.Spec.Weight = int32(min(q.Weight, math.MaxInt32))
		if q.Guarantee > 0 {
			obj.Spec.Guarantee = corev1.ResourceList{gpu: *resource.NewQuantity(q.Guarantee, resource.DecimalSI)}
		}
		objects = append(objects, obj)
	}
	return &divider{tree: quota.NewTree(objects), queues: queues, total: quota.Amounts{gpu: int64(gpus)}}
}

// deserved is each queue's deserved GPUs, in the queues' order, when each asks asked[i] GPUs.
func (d *divider) deserved(asked []int64) []int64 {
	demand := make(map[string]quota.Amounts, len(d.queues))
	for i, q := range d.queues {
		demand[q.Name] = quota.Amounts{gpu: asked[i]}
	}
	got := quota.Deserved(d.tree, d.total, demand)
	out := make([]int64, len(d.queues))
	for i, q := range d.queues {
		out[i] = got[q.Name][gpu]
	}
	return out
}
