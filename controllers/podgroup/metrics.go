package podgroup

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

var podGroupsDesc = prometheus.NewDesc("tephra_podgroups",
	"Number of PodGroups by namespace and phase.", []string{"namespace", "phase"}, nil)

// phaseCollector computes tephra_podgroups from the cache at every scrape, rather than keeping
// a gauge up to date on each reconcile: a count taken from the groups that exist cannot miss a
// delete or drift after a restart.
type phaseCollector struct {
	groups client.Reader
	// elected is closed once this replica leads. Only the leader reports, so that summing the
	// metric across replicas does not count a group twice.
	elected <-chan struct{}
}

// registerPhaseMetric registers the collector in controller-runtime's registry. A process that
// sets up a second manager keeps the first one's collector.
func registerPhaseMetric(groups client.Reader, elected <-chan struct{}) error {
	err := metrics.Registry.Register(phaseCollector{groups: groups, elected: elected})
	if _, already := errors.AsType[prometheus.AlreadyRegisteredError](err); already {
		return nil
	}
	return err
}

func (c phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- podGroupsDesc }

func (c phaseCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var groups schedulingv1alpha1.PodGroupList
	if err := c.groups.List(ctx, &groups); err != nil {
		// An invalid metric would fail the whole scrape (controller-runtime serves with
		// HTTPErrorOnError), losing every other metric for want of this one.
		ctrl.Log.WithName(ControllerName).Error(err, "cannot list pod groups for the tephra_podgroups metric")
		return
	}
	type key struct{ namespace, phase string }
	counts := map[key]float64{}
	for i := range groups.Items {
		phase := groups.Items[i].Status.Phase
		if phase == "" { // not reconciled yet: nothing has been placed
			phase = schedulingv1alpha1.PodGroupPending
		}
		counts[key{groups.Items[i].Namespace, string(phase)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(podGroupsDesc, prometheus.GaugeValue, n, k.namespace, k.phase)
	}
}
