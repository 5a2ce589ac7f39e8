package jobflow

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/countmetric"
)

var jobFlowsDesc = prometheus.NewDesc("tephra_jobflows",
	"Number of JobFlows by phase.", []string{"phase"}, nil)

func registerMetrics(flows client.Reader, elected <-chan struct{}) error {
	return countmetric.Register(countmetric.Collector[*batchv1alpha1.JobFlowList]{
		Desc: jobFlowsDesc, Reader: flows, Elected: elected, Log: ctrl.Log.WithName(ControllerName),
		NewList: func() *batchv1alpha1.JobFlowList { return &batchv1alpha1.JobFlowList{} },
		Count: func(list *batchv1alpha1.JobFlowList, add func(...string)) {
			for i := range list.Items {
				phase := list.Items[i].Status.State.Phase
				if phase == "" {
					phase = batchv1alpha1.FlowPending
				}
				add(string(phase))
			}
		},
	})
}
