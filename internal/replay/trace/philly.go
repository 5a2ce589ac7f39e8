package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Columns of Philly as processed for the Pollux artifact (simulator/traces/philly.csv):
// timestamp,duration,num_gpus,gpu_time,cluster. gpu_time is duration*num_gpus, so it is not
// read; cluster, the virtual cluster, is optional, and so is name, which other processings add.
const (
	phillyTimestamp = "timestamp"
	phillyDuration  = "duration"
	phillyGPUs      = "num_gpus"
	phillyCluster   = "cluster"
	phillyName      = "name"
)

// phillyDateLayouts are the dates a timestamp may be instead of seconds: pandas' (the Pollux
// artifact's "2017-10-09 07:01:55"), and RFC 3339.
var phillyDateLayouts = []string{time.DateTime, time.RFC3339Nano, "2006-01-02T15:04:05"}

// ImportPhilly reads a Philly trace in the layout the Pollux artifact processed it into: a CSV
// whose header has timestamp, duration and num_gpus, and optionally cluster and name; other
// columns, such as a leading unnamed index, are ignored. A row becomes a job:
//
//   - Submit is timestamp, seconds or a date such as 2017-10-09 07:01:55 (taken as UTC, since
//     only differences count), less the file's earliest timestamp.
//   - Duration is duration, in seconds.
//   - A job of G = num_gpus GPUs becomes a gang (MinReplicas = Replicas) of
//     ceil(G/MaxGPUsPerPod) pods of ceil(G/pods) GPUs each: the trace format gives every pod of
//     a job the same GPUs, so when pods do not divide G the job asks for a few more GPUs than
//     the original (9 GPUs: 2 pods of 5), which ImportReport.RoundedUp counts. G = 0 is one pod
//     without GPUs.
//   - Each pod asks for CPUPerGPU cores and MemoryPerGPU memory per GPU, at least one core and
//     DefaultMemory: Philly records neither.
//   - Queue is cluster as a DNS label, "vc-" before one that starts with a digit ("6214e9"
//     becomes "vc-6214e9"), or opts.Queue if the layout has no cluster.
//   - Name is name as a DNS label, or philly-<row index> (from 0, the header not counted).
//
// A malformed row is skipped and reported, with its line. Jobs are sorted by Submit.
func ImportPhilly(r io.Reader, opts ImportOptions) ([]Job, []RowError, error) {
	im, err := newImporter(opts)
	if err != nil {
		return nil, nil, err
	}
	t, err := newTable(r,
		[]string{phillyTimestamp, phillyDuration, phillyGPUs, phillyCluster, phillyName},
		[]string{phillyTimestamp, phillyDuration, phillyGPUs})
	if err != nil {
		return nil, nil, fmt.Errorf("philly: %w", err)
	}
	problems, err := t.scan(func() (string, error) {
		j := Job{Name: dnsLabel(t.cell(phillyName), "")}
		if j.Name == "" {
			j.Name = fmt.Sprintf("philly-%d", t.index)
		}
		var err error
		if j.Submit, err = phillyTime(t.cell(phillyTimestamp)); err != nil {
			return j.Name, err
		}
		if j.Duration, err = requiredFloat(phillyDuration, t.cell(phillyDuration)); err != nil {
			return j.Name, err
		}
		if j.Duration <= 0 {
			return j.Name, cellError{phillyDuration, t.cell(phillyDuration), errors.New("must be more than 0")}
		}
		gpus, err := wholeNumber(phillyGPUs, t.cell(phillyGPUs), 0)
		if err != nil {
			return j.Name, err
		}
		j.Replicas, j.GPUs = splitGang(gpus, im.opts.MaxGPUsPerPod)
		j.MinReplicas = j.Replicas
		j.MilliCPU, j.Memory = im.podCPU(j.GPUs), im.podMemory(j.GPUs)
		j.Queue = im.queue(t.cell(phillyCluster), "vc-")
		if err := im.add(j, t.line); err != nil {
			return j.Name, err
		}
		if j.Replicas*j.GPUs > gpus {
			im.report.RoundedUp++
		}
		return j.Name, nil
	})
	if err != nil {
		return nil, problems, fmt.Errorf("philly: %w", err)
	}
	return im.finish(problems), problems, nil
}

// splitGang splits a job of gpus GPUs into the fewest pods of at most maxPerPod GPUs, each of
// the same GPUs: pods*perPod may exceed gpus by less than pods.
func splitGang(gpus, maxPerPod int) (pods, perPod int) {
	if gpus == 0 {
		return 1, 0
	}
	pods = (gpus + maxPerPod - 1) / maxPerPod
	return pods, (gpus + pods - 1) / pods
}

// phillyTime parses a Philly timestamp, seconds or a date, into seconds.
func phillyTime(text string) (float64, error) {
	if text == "" {
		return 0, cellError{phillyTimestamp, "", errRequired}
	}
	if v, err := strconv.ParseFloat(text, 64); err == nil {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, cellError{phillyTimestamp, text, errors.New("not a finite number")}
		}
		return v, nil
	}
	for _, layout := range phillyDateLayouts {
		if at, err := time.Parse(layout, text); err == nil {
			return float64(at.Unix()) + float64(at.Nanosecond())/1e9, nil
		}
	}
	return 0, cellError{phillyTimestamp, text, errors.New("neither seconds nor a date such as 2017-10-09 07:01:55")}
}
