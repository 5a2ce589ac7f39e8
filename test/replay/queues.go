package replay

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/localcluster"
	"github.com/tephra-dev/tephra/test/replay/report"
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

// createQueues creates a Tephra Queue under root for each queue, with its weight and guarantee,
// once tephra-controllers has created root and default. The default queue is Tephra's own; a
// trace queue of that name takes its weight and guarantee.
func createQueues(ctx context.Context, c *localcluster.Cluster, queues []report.Queue, order queueOrder) error {
	if err := localcluster.WaitDefaultQueues(ctx, c.Config); err != nil {
		return err
	}
	client := c.Tephra.SchedulingV1alpha1().Queues()
	for _, q := range queues {
		spec := schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue, Weight: int32(q.Weight), Order: order.order, OrderBoundSeconds: order.boundSeconds}
		if q.Guarantee > 0 {
			spec.Guarantee = corev1.ResourceList{localcluster.GPUResource: *resource.NewQuantity(q.Guarantee, resource.DecimalSI)}
		}
		existing, err := client.Get(ctx, q.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.Create(ctx, &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.Name}, Spec: spec}, metav1.CreateOptions{})
		case err == nil:
			existing.Spec.Weight, existing.Spec.Guarantee = spec.Weight, spec.Guarantee
			existing.Spec.Order, existing.Spec.OrderBoundSeconds = spec.Order, spec.OrderBoundSeconds
			_, err = client.Update(ctx, existing, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("queue %q: %w", q.Name, err)
		}
	}
	return nil
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

// playedPluginArgs adds to the scheduler's plugin args those of the configuration's settings that
// are times, played at the speedup: the reclaim minimum runtime, and the first level of attained
// service (an accelerator-hour of trace time).
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
	if c.LeastAttainedBound > 0 {
		set("TephraGang", "attainedServiceFirstLevelSeconds", max(int64(math.Round(time.Hour.Seconds()/speedup)), 1))
	}
}
