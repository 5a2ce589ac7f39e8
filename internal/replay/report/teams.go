package report

import (
	"fmt"
	"math"
	"strings"
)

// How each team fared across the configurations: a queue's mean JCT and wait against the same
// queue's in the baseline, and the GPU-hours it received against those it deserved while the
// cluster was contended. A queue whose jobs took longer than under upstream's gangs, although it
// received no more than its share, is a team that fair sharing made worse off.

// BaselineConfig is the configuration each queue is compared with: upstream's gangs (B1).
const BaselineConfig = "B1"

// StaticPartitionConfig is the configuration that gives each queue a fixed part of the cluster:
// sharing must do no worse than it for any team.
const StaticPartitionConfig = "Cp"

// byConfig is the outcome of the configuration named so; nil if it did not run.
func byConfig(outs []Outcomes, config string) *Outcomes {
	for i := range outs {
		if outs[i].Config == config {
			return &outs[i]
		}
	}
	return nil
}

// queueIn is the summary of the queue named so in o; nil if o has none.
func queueIn(o *Outcomes, name string) *Summary {
	for i := range o.Queues {
		if o.Queues[i].Queue == name {
			return &o.Queues[i]
		}
	}
	return nil
}

// versus is a queue's figure in o over the same queue's in base: NaN when either lacks the queue
// or the figure, or base's is 0.
func versus(o, base *Outcomes, queue string, of func(*Summary) float64) float64 {
	q, b := queueIn(o, queue), queueIn(base, queue)
	if q == nil || b == nil {
		return math.NaN()
	}
	r := of(q) / of(b)
	if math.IsInf(r, 0) {
		return math.NaN()
	}
	return r
}

// queueNames are the queues of every configuration: the first's, then those the others add, in
// the order they come.
func queueNames(outs []Outcomes) []string {
	var names []string
	seen := map[string]bool{}
	for i := range outs {
		for _, q := range outs[i].Queues {
			if !seen[q.Queue] {
				seen[q.Queue] = true
				names = append(names, q.Queue)
			}
		}
	}
	return names
}

// receivedOverDeserved is a queue's GPU-hours received over deserved while the cluster was
// contended, as "received / deserved (ratio×)"; "–" when no time was contended.
func receivedOverDeserved(o *Outcomes, q *Summary) string {
	if o.ContendedSamples == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s (%s)", gpuHours(q.ReceivedGPUSeconds), gpuHours(q.DeservedGPUSeconds),
		times(ratio(q.ReceivedGPUSeconds, q.DeservedGPUSeconds)))
}

// receivedAtMostDeserved says whether a queue received no more GPU-hours than it deserved while
// the cluster was contended (to a rounding error).
func receivedAtMostDeserved(q *Summary) bool {
	return q.ReceivedGPUSeconds <= q.DeservedGPUSeconds*(1+1e-9)+1e-6
}

// times formats a ratio; "–" for NaN.
func times(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

// writeQueuesAcross writes a row per queue and configuration: its mean JCT and wait, as a ratio
// to BaselineConfig's when that ran, and its GPU-hours received against deserved over the
// contended period.
func writeQueuesAcross(b *strings.Builder, outs []Outcomes) {
	names := queueNames(outs)
	if len(names) == 0 {
		return
	}
	base := byConfig(outs, BaselineConfig)
	b.WriteString("### Each queue in each configuration\n\n")
	if base != nil {
		fmt.Fprintf(b, "| Queue | Configuration | JCT mean | JCT × %[1]s | Wait mean | Wait × %[1]s | GPU-hours received / deserved, contended |\n", BaselineConfig)
		b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	} else {
		b.WriteString("| Queue | Configuration | JCT mean | Wait mean | GPU-hours received / deserved, contended |\n")
		b.WriteString("|---|---|---:|---:|---:|\n")
	}
	jct := func(s *Summary) float64 { return s.JCT.Mean }
	wait := func(s *Summary) float64 { return s.Wait.Mean }
	for _, name := range names {
		for i := range outs {
			o := &outs[i]
			q := queueIn(o, name)
			if q == nil {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %s |", cell(name), cell(o.Config), Duration(q.JCT.Mean))
			if base != nil {
				fmt.Fprintf(b, " %s |", times(versus(o, base, name, jct)))
			}
			fmt.Fprintf(b, " %s |", Duration(q.Wait.Mean))
			if base != nil {
				fmt.Fprintf(b, " %s |", times(versus(o, base, name, wait)))
			}
			fmt.Fprintf(b, " %s |\n", receivedOverDeserved(o, q))
		}
	}
	b.WriteString("\nGPU-hours are integrated over each configuration's contended samples (the queues asking at least the cluster): a queue below 1.00× held less than its deserved share then.\n\n")
}
