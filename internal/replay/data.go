package replay

import (
	"context"
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/datasets"
)

// DataOptions say how the replay plays the jobs' data (the trace's dataset columns): a job whose
// minimum starts on nodes that do not all cache its dataset first pulls it, for its size over
// BandwidthGBps seconds of trace time, before its work; a job that ends leaves its dataset cached
// on the nodes its pods ran on, each node caching at most NodeCacheGB, the least recently read
// dataset evicted first. The replay labels the nodes as a cache's agent would
// (data.tephra.dev/<name>), in every configuration; in those with DataLocality, the pods declare
// their dataset too, and TephraIO places them by it.
type DataOptions struct {
	// BandwidthGBps is how fast a node pulls a dataset, in gigabytes per second of trace time
	// (default 1.25, 10 Gbit/s).
	BandwidthGBps float64
	// NodeCacheGB is what a node's cache holds (default 1000).
	NodeCacheGB float64
}

// Defaults of DataOptions.
const (
	DefaultDataBandwidthGBps = 1.25
	DefaultNodeCacheGB       = 1000
)

func (o DataOptions) withDefaults() DataOptions {
	if o.BandwidthGBps <= 0 {
		o.BandwidthGBps = DefaultDataBandwidthGBps
	}
	if o.NodeCacheGB <= 0 {
		o.NodeCacheGB = DefaultNodeCacheGB
	}
	return o
}

// nodeCaches are what each node's cache holds, in the order last read (least recent first).
type nodeCaches struct {
	opts  DataOptions
	nodes map[string][]cached
}

type cached struct {
	dataset string
	gb      float64
}

func newNodeCaches(opts DataOptions) *nodeCaches {
	return &nodeCaches{opts: opts.withDefaults(), nodes: map[string][]cached{}}
}

// holds says whether a node caches the dataset.
func (c *nodeCaches) holds(node, dataset string) bool {
	return slices.ContainsFunc(c.nodes[node], func(e cached) bool { return e.dataset == dataset })
}

// transfer is the trace seconds a job whose minimum starts on nodes waits for its dataset: 0
// when every node caches it (or it reads none), else its size over the bandwidth (the nodes pull
// it at once, each its own copy).
func (c *nodeCaches) transfer(dataset string, gb float64, nodes []string) float64 {
	if dataset == "" {
		return 0
	}
	for _, n := range nodes {
		if !c.holds(n, dataset) {
			return gb / c.opts.BandwidthGBps
		}
	}
	return 0
}

// keep caches a dataset a job read on a node, as the most recently read, and returns the
// datasets evicted for it. A dataset larger than the cache is not kept.
func (c *nodeCaches) keep(node, dataset string, gb float64) (added bool, evicted []string) {
	entries := slices.DeleteFunc(c.nodes[node], func(e cached) bool { return e.dataset == dataset })
	had := len(entries) < len(c.nodes[node])
	if gb > c.opts.NodeCacheGB {
		c.nodes[node] = entries
		if had {
			evicted = append(evicted, dataset)
		}
		return false, evicted
	}
	used := gb
	for _, e := range entries {
		used += e.gb
	}
	for used > c.opts.NodeCacheGB && len(entries) > 0 {
		used -= entries[0].gb
		evicted = append(evicted, entries[0].dataset)
		entries = entries[1:]
	}
	c.nodes[node] = append(entries, cached{dataset: dataset, gb: gb})
	return !had, evicted
}

// cacheData keeps a finished job's dataset on the nodes its pods ran on, and labels the nodes
// whose cache changed. The caller holds d.mu.
func (d *driver) cacheData(j *jobRun) {
	if j.trace.Dataset == "" || d.caches == nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range j.order {
		if p.node == "" || p.running.IsZero() || seen[p.node] {
			continue
		}
		seen[p.node] = true
		added, evicted := d.caches.keep(p.node, j.trace.Dataset, j.trace.DatasetGB)
		if !added && len(evicted) == 0 {
			continue
		}
		labels := map[string]any{}
		if added {
			labels[datasets.NodeLabelPrefix+j.trace.Dataset] = datasets.Cached
		}
		for _, e := range evicted {
			labels[datasets.NodeLabelPrefix+e] = nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		node := p.node
		d.actions <- action{what: "labelling node " + node + "'s cache", do: func(ctx context.Context) error {
			_, err := d.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}}
	}
}

// transferFor is the trace seconds a job starting on its running pods' nodes waits for its data.
func (d *driver) transferFor(j *jobRun, running []*podRun) float64 {
	if d.caches == nil {
		return 0
	}
	nodes := make([]string, 0, len(running))
	for _, p := range running {
		nodes = append(nodes, p.node)
	}
	return d.caches.transfer(j.trace.Dataset, j.trace.DatasetGB, nodes)
}
