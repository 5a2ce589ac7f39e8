// Package foreign holds tephra-controllers' adapters for the gang APIs of other schedulers and
// of workload controllers: a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1), a Volcano
// PodGroup (scheduling.volcano.sh/v1beta1) or a JobSet (jobset.x-k8s.io/v1alpha2) is translated
// into a Tephra PodGroup of the same namespace and name, and a Volcano Queue into a Tephra Queue
// of the same name; each mirror is owned by its foreign object (controller ownerReference, so deleting the foreign object deletes the mirror)
// and the foreign object's status is written back from the mirror's. The scheduler reads Tephra's
// API only.
package foreign

import (
	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	"github.com/tephra-dev/tephra/controllers/whenserved"
)

// Controller names, also the sources of their events.
const (
	SchedulerPluginsControllerName = "schedulerplugins-podgroup-adapter"
	VolcanoPodGroupControllerName  = "volcano-podgroup-adapter"
	VolcanoQueueControllerName     = "volcano-queue-adapter"
)

// Setup starts each adapter whose foreign API the apiserver serves (a manager that watches a kind
// that does not exist fails as a whole) and logs which run. The others start when their CRD is
// installed: the leader checks every whenserved.RecheckInterval.
func Setup(mgr ctrl.Manager, log logr.Logger, schedulerNames []string) error {
	return whenserved.Start(mgr, log,
		whenserved.Adapter{Name: SchedulerPluginsControllerName, GVK: schedulerpluginsv1alpha1.SchemeGroupVersion.WithKind("PodGroup"), Setup: func() error {
			return (&SchedulerPluginsReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(SchedulerPluginsControllerName)}).SetupWithManager(mgr)
		}},
		whenserved.Adapter{Name: VolcanoPodGroupControllerName, GVK: volcanov1beta1.SchemeGroupVersion.WithKind("PodGroup"), Setup: func() error {
			return (&VolcanoPodGroupReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(VolcanoPodGroupControllerName)}).SetupWithManager(mgr)
		}},
		whenserved.Adapter{Name: VolcanoQueueControllerName, GVK: volcanov1beta1.SchemeGroupVersion.WithKind("Queue"), Setup: func() error {
			return (&VolcanoQueueReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(VolcanoQueueControllerName)}).SetupWithManager(mgr)
		}},
		whenserved.Adapter{Name: JobSetControllerName, GVK: JobSetGVK, Setup: func() error {
			return (&JobSetReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(JobSetControllerName), SchedulerNames: schedulerNames}).SetupWithManager(mgr)
		}},
	)
}
