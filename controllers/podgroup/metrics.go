package podgroup

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/countmetric"
)

var podGroupsDesc = prometheus.NewDesc("tephra_podgroups",
	"Number of PodGroups by namespace and phase.", []string{"namespace", "phase"}, nil)

// estimateOverruns counts the groups that ran past their runtime estimate, by queue: the groups
// whose status turned their RuntimeEstimateExceeded condition True (groupstatus.OverranNow).
var estimateOverruns = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tephra_podgroup_runtime_estimate_exceeded_total",
	Help: "PodGroups (and so Tephra Jobs) that ran longer than their runtime estimate, by queue.",
}, []string{"queue"})

// registerPhaseMetric registers tephra_podgroups, and the counter of runtime estimate overruns.
func registerPhaseMetric(groups client.Reader, elected <-chan struct{}) error {
	return countmetric.Register(phaseCollector(groups, elected), estimateOverruns)
}

// phaseCollector computes tephra_podgroups from the cache at every scrape.
func phaseCollector(groups client.Reader, elected <-chan struct{}) countmetric.Collector[*schedulingv1alpha1.PodGroupList] {
	return countmetric.Collector[*schedulingv1alpha1.PodGroupList]{
		Desc: podGroupsDesc, Reader: groups, Elected: elected, Log: ctrl.Log.WithName(ControllerName),
		NewList: func() *schedulingv1alpha1.PodGroupList { return &schedulingv1alpha1.PodGroupList{} },
		Count: func(list *schedulingv1alpha1.PodGroupList, add func(...string)) {
			for i := range list.Items {
				phase := list.Items[i].Status.Phase
				if phase == "" { // not reconciled yet: nothing has been placed
					phase = schedulingv1alpha1.PodGroupPending
				}
				add(list.Items[i].Namespace, string(phase))
			}
		},
	}
}
