// Package trace is tephra-replay's job trace: the CSV format it replays (Read, Write), the
// importers that turn two public trace layouts into it (Philly as processed for the Pollux
// artifact, Alibaba's cluster-trace-gpu-v2023 openb_pod_list), and a generator of synthetic
// traces of a given load (Generate).
package trace

// Job is one row of a trace: a job of Replicas pods, each asking for GPUs, CPU and Memory, that
// runs Duration seconds once MinReplicas of them run, submitted Submit seconds after the trace's
// start, in Queue.
type Job struct {
	// Name is unique in a trace.
	Name string
	// Submit is seconds from the trace's start.
	Submit float64
	// Duration is seconds the job runs once all its minimum runs.
	Duration float64
	// Queue is the team or virtual cluster.
	Queue string
	// Replicas is the job's pods; MinReplicas its gang minimum (Replicas unless set).
	Replicas, MinReplicas int
	// GPUs per pod.
	GPUs int
	// MilliCPU per pod (default 1000).
	MilliCPU int64
	// Memory per pod, as a quantity (default "4Gi").
	Memory string
	// Priority, if HasPriority.
	Priority    int32
	HasPriority bool
	// Dataset the job reads ("" for none), of DatasetGB gigabytes: a job placed on nodes that do
	// not cache it first pulls it (docs/replay.md, "Data").
	Dataset   string
	DatasetGB float64
	// Line is the row's line in its file (1 is the header), for messages; 0 for a job not read.
	Line int
}
