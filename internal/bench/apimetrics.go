package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// mutatingVerbs are the verbs of apiserver_request_total that write: the POST, PUT, PATCH
// and DELETE, and the two other writes the apiserver counts apart (server-side apply, delete of a
// collection).
var mutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true, "DELETECOLLECTION": true}

// mutatingRequests reads the apiserver's /metrics and sums apiserver_request_total over the
// mutating verbs.
func (b *benchCluster) mutatingRequests(ctx context.Context) (float64, error) {
	byResource, err := b.mutatingRequestsByResource(ctx)
	total := 0.0
	for _, v := range byResource {
		total += v
	}
	return total, err
}

// mutatingRequestsByResource reads the apiserver's /metrics and sums apiserver_request_total over
// the mutating verbs by resource.
func (b *benchCluster) mutatingRequestsByResource(ctx context.Context) (map[string]float64, error) {
	data, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	return mutatingByResource(string(data))
}

// sumMutatingRequests sums, in Prometheus text format, the samples of apiserver_request_total
// whose verb label is a mutating verb.
func sumMutatingRequests(text string) (float64, error) {
	return sumSamples(text, "apiserver_request_total", func(labels string) bool {
		return mutatingVerbs[labelValue(labels, "verb")]
	})
}

// schedulingAttempts reads the scheduler's /metrics, keeps them in the cluster's folder
// (scheduler-metrics.txt: batching, plugin and queue metrics for a closer look) and sums
// scheduler_schedule_attempts_total over its results (scheduled, unschedulable, error): every
// scheduling cycle, so attempts per pod bound tell how often pods were tried again.
func (b *benchCluster) schedulingAttempts(ctx context.Context) (float64, error) {
	client, err := b.schedulerClient(30 * time.Second)
	if err != nil {
		return 0, err
	}
	data, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the scheduler's /metrics: %w", err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir(), "scheduler-metrics.txt"), data, 0o644); err != nil {
		return 0, err
	}
	return sumSamples(string(data), "scheduler_schedule_attempts_total", func(string) bool { return true })
}

// sumSamples sums, in Prometheus text format, the samples of a labelled metric whose labels keep
// accepts.
func sumSamples(text, metric string, keep func(labels string) bool) (float64, error) {
	sums, err := sumSamplesBy(text, metric, func(labels string) (string, bool) { return "", keep(labels) })
	return sums[""], err
}

// sumSamplesBy sums, in Prometheus text format, the samples of a labelled metric by the key that
// key gives their labels, leaving out those it does not keep.
func sumSamplesBy(text, metric string, key func(labels string) (string, bool)) (map[string]float64, error) {
	name := metric + "{"
	sums := map[string]float64{}
	found := false
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		found = true
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return nil, fmt.Errorf("malformed sample %q", line)
		}
		k, keep := key(rest[:end])
		if !keep {
			continue
		}
		fields := strings.Fields(rest[end+1:])
		if len(fields) == 0 {
			return nil, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("malformed sample %q: %w", line, err)
		}
		sums[k] += v
	}
	if !found {
		return nil, fmt.Errorf("no %s in the metrics", metric)
	}
	return sums, nil
}

// mutatingByResource sums, in Prometheus text format, apiserver_request_total over the mutating
// verbs by resource ("pods", "jobs/status").
func mutatingByResource(text string) (map[string]float64, error) {
	return sumSamplesBy(text, "apiserver_request_total", func(labels string) (string, bool) {
		resource := labelValue(labels, "resource")
		if sub := labelValue(labels, "subresource"); sub != "" {
			resource += "/" + sub
		}
		return resource, mutatingVerbs[labelValue(labels, "verb")]
	})
}

// labelValue finds a label's value in `a="x",b="y"` (values as the apiserver writes them, with no
// escaped quotes in the labels read here).
func labelValue(labels, name string) string {
	for pair := range strings.SplitSeq(labels, ",") {
		key, value, ok := strings.Cut(pair, "=")
		if ok && key == name {
			return strings.Trim(value, `"`)
		}
	}
	return ""
}
