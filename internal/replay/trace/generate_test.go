package trace

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Over a month the offered load is the one asked for, within 20%: the arrival rate accounts
// for the mix of shapes and for the capped durations.
func TestGenerateLoad(t *testing.T) {
	for _, opts := range []GenerateOptions{
		{Seed: 1, Span: 30 * 86400, GPUs: 64, Load: 0.8},
		{Seed: 2, Span: 30 * 86400, GPUs: 256, Load: 1.2, MeanDuration: 600},
		// A small cluster: large gangs are cut to half its 16 GPUs.
		{Seed: 3, Span: 30 * 86400, GPUs: 16, Load: 0.5, MeanDuration: 3600},
	} {
		jobs := Generate(opts)
		s := Summarize(jobs)
		load := s.GPUSeconds / (float64(opts.GPUs) * opts.Span)
		assert.InEpsilon(t, opts.Load, load, 0.2, "%+v: %d jobs", opts, len(jobs))

		var sum float64
		for _, j := range jobs {
			sum += j.Duration
		}
		mean := opts.MeanDuration
		if mean == 0 {
			mean = DefaultMeanDuration
		}
		assert.InEpsilon(t, mean, sum/float64(len(jobs)), 0.1, "%+v: mean duration", opts)
	}
}

// The same options make the same trace; another seed another.
func TestGenerateDeterministic(t *testing.T) {
	opts := GenerateOptions{Seed: 42, GPUs: 32}
	a, b := Generate(opts), Generate(opts)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b)
	opts.Seed = 43
	assert.NotEqual(t, a, Generate(opts))
}

// Every generated job is one Read accepts, so the trace can be written and replayed as is; and
// jobs have the shapes the mix promises.
func TestGenerateJobs(t *testing.T) {
	opts := GenerateOptions{Seed: 7, Span: 7 * 86400, GPUs: 64}
	jobs := Generate(opts)
	require.Greater(t, len(jobs), 1000)

	var buf bytes.Buffer
	require.NoError(t, Write(&buf, jobs))
	read, problems, err := Read(&buf)
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.Len(t, read, len(jobs))
	for i := range read {
		read[i].Line = 0
	}
	assert.Equal(t, jobs, read, "sorted by submit already, and named in that order")
	assert.Equal(t, "job-00001", jobs[0].Name)

	var small, multi, elastic, large int
	queues := map[string]int{}
	for _, j := range jobs {
		assert.LessOrEqual(t, j.Replicas*j.GPUs, opts.GPUs/2, j.Name)
		assert.LessOrEqual(t, j.GPUs, DefaultMaxGPUsPerPod, j.Name)
		assert.GreaterOrEqual(t, j.GPUs, 1, j.Name)
		assert.Equal(t, int64(4000*j.GPUs), j.MilliCPU, j.Name)
		assert.GreaterOrEqual(t, j.Duration, 60.0, j.Name)
		assert.LessOrEqual(t, j.Duration, 8*1800.0, j.Name)
		assert.Less(t, j.Submit, opts.Span, j.Name)
		queues[j.Queue]++
		switch {
		case j.Replicas == 1 && j.GPUs <= 2:
			small++
		case j.Replicas*j.GPUs == opts.GPUs/2 && j.GPUs == 8:
			large++ // the large gangs, cut to half the cluster, and some medium ones
		}
		if j.Replicas > 1 {
			multi++
			if j.MinReplicas < j.Replicas {
				elastic++
				assert.Equal(t, (j.Replicas+1)/2, j.MinReplicas, j.Name)
			}
		}
	}
	assert.InDelta(t, 0.70, float64(small)/float64(len(jobs)), 0.05)
	assert.InDelta(t, 0.30, float64(multi)/float64(len(jobs)), 0.05)
	assert.InDelta(t, 0.10, float64(elastic)/float64(multi), 0.05)
	assert.Positive(t, large)
	assert.Len(t, queues, 3)
	for q, n := range queues {
		assert.Contains(t, DefaultQueues, q)
		assert.Greater(t, n, len(jobs)/6, "every queue gets a share: %s", q)
	}
}

// Queues come in bursts: over an hour, the busiest queue's share of jobs varies much more than
// if each job picked a queue uniformly (a third, give or take a few percent).
func TestGenerateBursts(t *testing.T) {
	jobs := Generate(GenerateOptions{Seed: 5, Span: 14 * 86400, GPUs: 512, Load: 1})
	perHour := map[int]map[string]int{}
	for _, j := range jobs {
		h := int(j.Submit / 3600)
		if perHour[h] == nil {
			perHour[h] = map[string]int{}
		}
		perHour[h][j.Queue]++
	}
	skewed := 0
	for _, counts := range perHour {
		total, top := 0, 0
		for _, n := range counts {
			total += n
			top = max(top, n)
		}
		if total >= 30 && float64(top)/float64(total) > 0.6 {
			skewed++
		}
	}
	assert.Greater(t, skewed, len(perHour)/10, "hours when one queue submits most jobs")
}

// capShape cuts pods first, then GPUs per pod, to stay within the limits.
func TestCapShape(t *testing.T) {
	for _, tc := range []struct{ pods, perPod, maxPerPod, limit, wantPods, wantPerPod int }{
		{16, 8, 8, 32, 4, 8},
		{16, 8, 8, 512, 16, 8},
		{2, 8, 4, 512, 2, 4},
		{4, 8, 8, 4, 1, 4},
		{1, 2, 8, 1, 1, 1},
	} {
		pods, perPod := capShape(tc.pods, tc.perPod, tc.maxPerPod, tc.limit)
		assert.Equal(t, []int{tc.wantPods, tc.wantPerPod}, []int{pods, perPod}, "%+v", tc)
	}
}

// With datasets, every job reads one of its queue's few, the first most often, each of one size;
// the rest of the trace is the one generated without them.
func TestGeneratedJobsReuseTheirQueuesDatasets(t *testing.T) {
	opts := GenerateOptions{Seed: 3, Span: 6 * 3600, GPUs: 64}
	plain := Generate(opts)
	opts.DatasetsPerQueue, opts.DatasetGB = 3, 400
	withData := Generate(opts)
	require.Equal(t, len(plain), len(withData))
	sizes, counts := map[string]float64{}, map[string]int{}
	for i, j := range withData {
		j.Dataset, j.DatasetGB = "", 0
		assert.Equal(t, plain[i], j)
		d := withData[i]
		assert.True(t, strings.HasPrefix(d.Dataset, d.Queue+"-data-"), d.Dataset)
		if size, ok := sizes[d.Dataset]; ok {
			assert.Equal(t, size, d.DatasetGB)
		}
		sizes[d.Dataset] = d.DatasetGB
		assert.LessOrEqual(t, d.DatasetGB, 400.0)
		counts[d.Dataset[len(d.Dataset)-1:]]++
	}
	assert.LessOrEqual(t, len(sizes), 9, "3 queues of 3 datasets")
	assert.Greater(t, counts["0"], counts["2"], "the first of each queue is read most (half its jobs, the last a quarter)")
}
