package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// mutatingVerbs are the verbs of apiserver_request_total that write: the POST, PUT, PATCH
// and DELETE, and the two other writes the apiserver counts apart (server-side apply, delete of a
// collection).
var mutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true, "DELETECOLLECTION": true}

// mutatingRequests reads the apiserver's /metrics and sums apiserver_request_total over the
// mutating verbs.
func (b *benchCluster) mutatingRequests(ctx context.Context) (float64, error) {
	data, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	return sumMutatingRequests(string(data))
}

// sumMutatingRequests sums, in Prometheus text format, the samples of apiserver_request_total
// whose verb label is a mutating verb.
func sumMutatingRequests(text string) (float64, error) {
	const name = "apiserver_request_total{"
	var sum float64
	found := false
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		found = true
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return 0, fmt.Errorf("malformed sample %q", line)
		}
		if !mutatingVerbs[labelValue(rest[:end], "verb")] {
			continue
		}
		fields := strings.Fields(rest[end+1:])
		if len(fields) == 0 {
			return 0, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("malformed sample %q: %w", line, err)
		}
		sum += v
	}
	if !found {
		return 0, fmt.Errorf("no apiserver_request_total in the apiserver's metrics")
	}
	return sum, nil
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
