package job

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/countmetric"
)

var jobsDesc = prometheus.NewDesc("tephra_jobs",
	"Number of Jobs by queue and phase.", []string{"queue", "phase"}, nil)

// restarts counts the restarts the controller decided, by the job's queue and the action
// (RestartJob, RestartTask, RestartSubGroup, RestartPod). It is counted when the decision is written, once.
var restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tephra_job_restarts_total",
	Help: "Restarts of Jobs, their tasks, sub-groups and pods decided by lifecycle policies, by queue and action.",
}, []string{"queue", "action"})

// registerMetrics registers tephra_jobs and the restart counter.
func registerMetrics(jobs client.Reader, elected <-chan struct{}) error {
	return countmetric.Register(phaseCollector(jobs, elected), restarts)
}

// phaseCollector computes tephra_jobs from the cache at every scrape.
func phaseCollector(jobs client.Reader, elected <-chan struct{}) countmetric.Collector[*batchv1alpha1.JobList] {
	return countmetric.Collector[*batchv1alpha1.JobList]{
		Desc: jobsDesc, Reader: jobs, Elected: elected, Log: ctrl.Log.WithName(ControllerName),
		NewList: func() *batchv1alpha1.JobList { return &batchv1alpha1.JobList{} },
		Count: func(list *batchv1alpha1.JobList, add func(...string)) {
			for i := range list.Items {
				phase := list.Items[i].Status.State.Phase
				if phase == "" {
					phase = batchv1alpha1.JobPending
				}
				add(queueOf(&list.Items[i]), string(phase))
			}
		},
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
