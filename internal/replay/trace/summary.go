package trace

import "slices"

// Summary is what a report's header says about a trace.
type Summary struct {
	// Jobs and Pods count the trace's jobs and their pods; GPUPods the pods that ask for GPUs.
	Jobs, Pods, GPUPods int
	// Span is the last job's Submit: how long the trace submits for.
	Span float64
	// GPUSeconds is the GPU time the trace asks for: the sum of Replicas*GPUs*Duration.
	GPUSeconds float64
	// Queues are the trace's queues, sorted.
	Queues []string
}

// Summarize sums jobs up; they need not be sorted.
func Summarize(jobs []Job) Summary {
	s := Summary{Jobs: len(jobs)}
	for _, j := range jobs {
		s.Pods += j.Replicas
		if j.GPUs > 0 {
			s.GPUPods += j.Replicas
		}
		s.Span = max(s.Span, j.Submit)
		s.GPUSeconds += float64(j.Replicas*j.GPUs) * j.Duration
		s.Queues = append(s.Queues, j.Queue)
	}
	slices.Sort(s.Queues)
	s.Queues = slices.Compact(s.Queues)
	return s
}

// Load is the GPU load the trace offers a cluster of gpus GPUs: the GPU time it asks for over
// the GPU time the cluster has while the trace submits, GPUSeconds/(gpus*Span). 0 if either
// is 0. It is the load Generate aims at; above 1 the queues can only grow.
func (s Summary) Load(gpus int) float64 {
	if gpus <= 0 || s.Span <= 0 {
		return 0
	}
	return s.GPUSeconds / (float64(gpus) * s.Span)
}
