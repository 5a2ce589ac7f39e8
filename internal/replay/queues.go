package replay

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/replay/report"
	"github.com/tephra-dev/tephra/internal/replay/trace"
	"github.com/tephra-dev/tephra/plugins/ioaware"
	queueplugin "github.com/tephra-dev/tephra/plugins/queue"
)

// queuesFile is the optional queues file: the weight and GPU guarantee of some of the trace's
// queues, e.g.
//
//	queues:
//	- name: team-a
//	  weight: 2
//	- name: team-b
//	  guarantee: 16
//
// A queue of the trace that the file leaves out gets weight 1 and no guarantee.
type queuesFile struct {
	Queues []struct {
		Name      string `json:"name"`
		Weight    int64  `json:"weight,omitempty"`
		Guarantee int64  `json:"guarantee,omitempty"`
	} `json:"queues"`
}

// ReadQueues reads a queues file (path "" for none) and returns a queue for each name of the
// trace's, in sorted order, with the file's weight and guarantee where it gives them.
func ReadQueues(path string, traceQueues []string) ([]report.Queue, error) {
	given := map[string]report.Queue{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var file queuesFile
		if err := yaml.UnmarshalStrict(data, &file); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i, q := range file.Queues {
			switch {
			case len(validation.IsDNS1123Label(q.Name)) > 0:
				return nil, fmt.Errorf("%s: queues[%d]: name %q: must be a lowercase DNS label", path, i, q.Name)
			case q.Weight < 0 || q.Weight > 65535:
				return nil, fmt.Errorf("%s: queue %q: weight %d: must be between 1 and 65535", path, q.Name, q.Weight)
			case q.Guarantee < 0:
				return nil, fmt.Errorf("%s: queue %q: guarantee %d: must not be negative", path, q.Name, q.Guarantee)
			case q.Name == schedulingv1alpha1.RootQueue:
				return nil, fmt.Errorf("%s: queue %q: the root queue is Tephra's own", path, q.Name)
			}
			given[q.Name] = report.Queue{Name: q.Name, Weight: max(q.Weight, 1), Guarantee: q.Guarantee}
		}
	}
	names := slices.Sorted(slices.Values(traceQueues))
	names = slices.Compact(names)
	out := make([]report.Queue, 0, len(names))
	for _, name := range names {
		q, ok := given[name]
		if !ok {
			q = report.Queue{Name: name, Weight: 1}
		}
		out = append(out, q)
	}
	return out, nil
}

// createQueues creates the configuration's Queues (queueSpecs), once tephra-controllers has
// created root and default. The default queue is Tephra's own; a trace queue of that name takes
// its place, with the trace queue's settings.
func createQueues(ctx context.Context, c *localcluster.Cluster, specs map[string]schedulingv1alpha1.QueueSpec) error {
	if err := localcluster.WaitDefaultQueues(ctx, c.Config); err != nil {
		return err
	}
	client := c.Tephra.SchedulingV1alpha1().Queues()
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		spec := specs[name]
		existing, err := client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.Create(ctx, &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		case err == nil:
			existing.Spec.Weight, existing.Spec.Guarantee, existing.Spec.Capability = spec.Weight, spec.Guarantee, spec.Capability
			existing.Spec.Reclaimable = spec.Reclaimable
			existing.Spec.Order, existing.Spec.OrderBoundSeconds = spec.Order, spec.OrderBoundSeconds
			_, err = client.Update(ctx, existing, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
	}
	return nil
}

// queueSpecs are the Queues of a configuration with queues, by name: one under root per trace
// queue, with its weight and GPU guarantee and the configuration's order, and in a static
// partition its slice of the cluster's GPUs as its capability.
func (c *Configuration) queueSpecs(queues []report.Queue, clusterGPUs int, speedup float64) map[string]schedulingv1alpha1.QueueSpec {
	order := c.orderOf(speedup)
	var partition map[string]int64
	if c.Partition {
		partition = partitionGPUs(queues, clusterGPUs)
	}
	specs := make(map[string]schedulingv1alpha1.QueueSpec, len(queues))
	for _, q := range queues {
		spec := schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue, Weight: int32(q.Weight), Order: order.order, OrderBoundSeconds: order.boundSeconds}
		if q.Guarantee > 0 {
			spec.Guarantee = gpus(q.Guarantee)
		}
		if c.Partition {
			spec.Capability = gpus(partition[q.Name])
			// The capability keeps the queue from borrowing GPUs, but does not rule out reclaim:
			// it caps GPUs only, while CPU and memory are still shared by weight, so a queue of
			// CPU-heavy jobs can hold more than its deserved CPU and be reclaimed for it; and
			// guarantees larger than their slices can make the slices add up to more than the
			// cluster, leaving a queue above its deserved share. Not reclaimable takes every
			// queue out of reclaim's victims in every resource. Preemption by priority within a
			// queue, which a team would have on a slice of its own too, still happens.
			spec.Reclaimable = ptr.To(false)
		}
		specs[q.Name] = spec
	}
	return specs
}

// partitionGPUs is each queue's slice of the cluster's GPUs: its weight's share of them, rounded
// down so that the slices fit in the cluster, or its guarantee if that is larger.
func partitionGPUs(queues []report.Queue, clusterGPUs int) map[string]int64 {
	var weights int64
	for _, q := range queues {
		weights += q.Weight
	}
	out := make(map[string]int64, len(queues))
	for _, q := range queues {
		out[q.Name] = max(int64(clusterGPUs)*q.Weight/weights, q.Guarantee)
	}
	return out
}

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{localcluster.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}
}

// jobsAboveCapability says, queue by queue, how many jobs need more GPUs at once (their minimum's)
// than their Queue's capability: Tephra holds such a gang back for good (docs/queues.md), so in a
// static partition they never run, and the report should say why.
func jobsAboveCapability(jobs []trace.Job, specs map[string]schedulingv1alpha1.QueueSpec) []string {
	over := map[string]int{}
	largest := map[string]int{}
	for _, j := range jobs {
		capability, ok := specs[j.Queue].Capability[localcluster.GPUResource]
		need := j.MinReplicas * j.GPUs
		if ok && int64(need) > capability.Value() {
			over[j.Queue]++
			largest[j.Queue] = max(largest[j.Queue], need)
		}
	}
	var out []string
	for _, queue := range slices.Sorted(maps.Keys(over)) {
		capability := specs[queue].Capability[localcluster.GPUResource]
		out = append(out, fmt.Sprintf("%d jobs of queue %s need more GPUs at once (up to %d) than its capability of %s, and cannot run",
			over[queue], queue, largest[queue], capability.String()))
	}
	return out
}

// queueOrder is how a configuration's queues order their workloads (zero: submission).
type queueOrder struct {
	order        schedulingv1alpha1.QueueOrder
	boundSeconds *int32
}

// orderOf is the configuration's queue order, its bound played at the speedup (at least a second).
func (c *Configuration) orderOf(speedup float64) queueOrder {
	played := func(d time.Duration) *int32 {
		bound := max(int32(math.Round(d.Seconds()/speedup)), 1)
		return &bound
	}
	switch {
	case c.ShortestFirstBound > 0:
		return queueOrder{order: schedulingv1alpha1.QueueOrderShortestEstimateFirst, boundSeconds: played(c.ShortestFirstBound)}
	case c.LeastAttainedBound > 0:
		return queueOrder{order: schedulingv1alpha1.QueueOrderLeastAttainedService, boundSeconds: played(c.LeastAttainedBound)}
	}
	return queueOrder{}
}

// playedUsageHalfLife is tephra-controllers' --usage-half-life for the configuration, the
// half-life of usage history played at the speedup: its own, else, for Tephra's queues, the
// shipped one (quota.DefaultUsageHalfLife), so that fair share over time weighs a day of the
// trace as a day of the cluster would; "" for none. Played in wall-clock time, the shipped week
// would be years of trace, and no history at all.
func (c *Configuration) playedUsageHalfLife(speedup float64) string {
	halfLife := c.UsageHalfLife
	if halfLife <= 0 && c.Queues {
		halfLife = quota.DefaultUsageHalfLife
	}
	if halfLife <= 0 {
		return ""
	}
	return (time.Duration(float64(halfLife) / speedup)).Round(time.Second).String()
}

// playedPluginArgs adds to the scheduler's plugin args those of the configuration's settings that
// are times, played at the speedup: the reclaim minimum runtime, the first level of attained
// service (an accelerator-hour of trace time), for Tephra's queues, the reclaim patience limit
// (the configuration's, else the shipped one), and, where pods declare their data, the locality
// wait, so that a replay plays the limits a day of the trace would meet.
func (c *Configuration) playedPluginArgs(o *localcluster.Options, speedup float64) {
	set := func(plugin, arg string, value any) {
		if o.SchedulerPluginArgs == nil {
			o.SchedulerPluginArgs = map[string]map[string]any{}
		}
		if o.SchedulerPluginArgs[plugin] == nil {
			o.SchedulerPluginArgs[plugin] = map[string]any{}
		}
		o.SchedulerPluginArgs[plugin][arg] = value
	}
	if c.ReclaimMinRuntime > 0 {
		set("TephraQueue", "reclaimMinRuntime", (time.Duration(float64(c.ReclaimMinRuntime) / speedup)).Round(100*time.Millisecond).String())
	}
	if c.Queues {
		limit := queueplugin.DefaultReclaimPatienceLimit
		if c.ReclaimPatienceLimit > 0 {
			limit = c.ReclaimPatienceLimit
		}
		set("TephraQueue", "reclaimPatienceLimit", (time.Duration(float64(limit) / speedup)).Round(100*time.Millisecond).String())
	}
	if c.DataLocality {
		wait := ioaware.DefaultLocalityWait
		if c.LocalityWait > 0 {
			wait = c.LocalityWait
		}
		set("TephraIO", "localityWait", (time.Duration(float64(wait) / speedup)).Round(100*time.Millisecond).String())
	}
	if c.LeastAttainedBound > 0 {
		set("TephraGang", "attainedServiceFirstLevelSeconds", max(int64(math.Round(time.Hour.Seconds()/speedup)), 1))
	}
}
