// Package report turns what tephra-replay observed in each configuration's run into outcomes
// (job completion times, waits, makespan, GPU utilisation, partial gangs, queue shares against
// their deserved shares, preemptions, jobs that never ran) and writes them as a Markdown report,
// SVG plots and a CSV of per-job results.
package report

// Times in this package are trace seconds: seconds from the trace's start, the replay's wall-clock
// times multiplied by its speedup. A time that never came is NaN.

// Run is what one configuration's replay of a trace observed.
type Run struct {
	// Config is the configuration's short name (C, B0, B1) and Title what it is.
	Config, Title string
	// GPUs is the cluster's GPU capacity; Nodes and NodeGPUs its nodes and the GPUs of each (0
	// in runs.json written before they were recorded).
	GPUs            int
	Nodes, NodeGPUs int
	// End is when the run stopped observing: every job ended, or the replay gave up waiting.
	End float64
	// Jobs are the trace's jobs as this run played them, in the trace's order.
	Jobs []Job
	// Queues are the replay's queues. A configuration without queues (B0, B1) is measured
	// against the same deserved shares as one with them.
	Queues []Queue
}

// Job is one trace job in one run.
type Job struct {
	Name, Queue string
	// Submit is when it was submitted; Duration how long it runs once its minimum runs.
	Submit, Duration      float64
	Replicas, MinReplicas int
	// GPUs per pod.
	GPUs int
	// Started are the times at which its minimum came to run (every pod of its minimum
	// Running): more than one when a preemption made it start again.
	Started []float64
	// Ended is when its last pod ended after its work was done; NaN if it never finished.
	Ended float64
	// Pods are every pod it had, those a preemption replaced included.
	Pods []Pod
	// Dataset is the dataset it reads ("" for none), and Transfer the trace seconds its starts
	// waited to pull it, placed on nodes that did not cache it.
	Dataset  string  `json:",omitempty"`
	Transfer float64 `json:",omitempty"`
}

// Pod is one pod of a job.
type Pod struct {
	Name string
	// Seen is when the replay first saw the pod exist: the time its Job's controller took to
	// create it is Seen less the job's Submit (0 in runs.json written before it was recorded).
	Seen float64 `json:",omitempty"`
	// Bound is when it was bound to a node, Running when it ran, Ended when it stopped holding
	// its node (succeeded, evicted or deleted); NaN for what never came. A pod still bound when
	// the run ended has Ended NaN and holds its GPUs until Run.End.
	Bound, Running, Ended float64
	// Preempted says that the scheduler evicted it to make room for another pod, and Eviction
	// when and why (nil when it was not, and in runs.json written before it was recorded).
	Preempted bool
	Eviction  *Eviction `json:",omitempty"`
	// Node is where it was bound ("" if never, or not recorded).
	Node string `json:",omitempty"`
}

// Eviction is a pod's eviction by the scheduler: when it was seen, and its DisruptionTarget
// condition's message (for whom, and for which queue).
type Eviction struct {
	At  float64
	Why string
}

// Queue is a queue of the replay: its weight (default 1) and its guarantee in GPUs (default 0),
// as the replay's Queue objects have them.
type Queue struct {
	Name      string
	Weight    int64
	Guarantee int64
}
