package report

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
)

// JobsColumns is the header of WriteJobsCSV's table.
var JobsColumns = []string{
	"config", "job", "queue", "submit", "replicas", "min_replicas", "gpus", "duration",
	"started", "restarts", "ended", "wait", "jct", "preempted_pods", "partial_gpu_seconds",
}

// WriteJobsCSV writes one row per configuration and job, in the runs' and then the jobs' order,
// so that any figure of the report can be recomputed or broken down another way. Times are
// trace seconds rounded to the millisecond; a time that never came is an empty cell. started is
// the first time the job's minimum ran and restarts how many more times it did (after a
// preemption); queue is the queue the report put it in (v1alpha1.DefaultQueue when it named
// none).
func WriteJobsCSV(w io.Writer, runs []Run) error {
	out := csv.NewWriter(w)
	if err := out.Write(JobsColumns); err != nil {
		return err
	}
	for _, run := range runs {
		end := run.End
		if math.IsNaN(end) || end < 0 {
			end = 0
		}
		for _, j := range run.Jobs {
			started, wait := math.NaN(), math.NaN()
			if len(j.Started) > 0 {
				started = j.Started[0]
				wait = started - j.Submit
			}
			preempted := 0
			for _, p := range j.Pods {
				if p.Preempted {
					preempted++
				}
			}
			row := []string{
				run.Config, j.Name, queueOf(j), seconds(j.Submit),
				strconv.Itoa(j.Replicas), strconv.Itoa(minimum(j)), strconv.Itoa(j.GPUs), seconds(j.Duration),
				seconds(started), strconv.Itoa(max(len(j.Started)-1, 0)), seconds(j.Ended),
				seconds(wait), seconds(j.Ended - j.Submit),
				strconv.Itoa(preempted), seconds(timeline(j, end).partial),
			}
			if err := out.Write(row); err != nil {
				return err
			}
		}
	}
	out.Flush()
	return out.Error()
}

// seconds formats a time or duration to the millisecond, without trailing zeros; NaN is empty.
func seconds(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	r := math.Round(v*1000) / 1000
	if r == 0 {
		r = 0 // not "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
