// Package foreign holds tephra-controllers' adapters for the gang APIs of other schedulers: a
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) or a Volcano PodGroup
// (scheduling.volcano.sh/v1beta1) is translated into a Tephra PodGroup of the same namespace and
// name, and a Volcano Queue into a Tephra Queue of the same name; each mirror is owned by its
// foreign object (controller ownerReference, so deleting the foreign object deletes the mirror)
// and the foreign object's status is written back from the mirror's. The scheduler reads Tephra's
// API only.
package foreign

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
)

// Controller names, also the sources of their events.
const (
	SchedulerPluginsControllerName = "schedulerplugins-podgroup-adapter"
	VolcanoPodGroupControllerName  = "volcano-podgroup-adapter"
	VolcanoQueueControllerName     = "volcano-queue-adapter"
)

// Setup starts each adapter whose foreign API the apiserver serves (a manager that watches a kind
// that does not exist fails as a whole) and logs which run. An adapter whose CRD is installed
// later starts when tephra-controllers restarts.
func Setup(mgr ctrl.Manager, log logr.Logger) error {
	served := func(gvk schema.GroupVersionKind) bool {
		_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil && !meta.IsNoMatchError(err) {
			log.Error(err, "cannot tell whether the API is served; its adapter does not run", "kind", gvk.String())
		}
		return err == nil
	}
	adapters := []struct {
		name  string
		gvk   schema.GroupVersionKind
		setup func() error
	}{
		{SchedulerPluginsControllerName, schedulerpluginsv1alpha1.SchemeGroupVersion.WithKind("PodGroup"), func() error {
			return (&SchedulerPluginsReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(SchedulerPluginsControllerName)}).SetupWithManager(mgr)
		}},
		{VolcanoPodGroupControllerName, volcanov1beta1.SchemeGroupVersion.WithKind("PodGroup"), func() error {
			return (&VolcanoPodGroupReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(VolcanoPodGroupControllerName)}).SetupWithManager(mgr)
		}},
		{VolcanoQueueControllerName, volcanov1beta1.SchemeGroupVersion.WithKind("Queue"), func() error {
			return (&VolcanoQueueReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(VolcanoQueueControllerName)}).SetupWithManager(mgr)
		}},
	}
	for _, a := range adapters {
		if !served(a.gvk) {
			log.Info("adapter not started: the API is not served (install its CRD and restart to enable it)", "adapter", a.name, "kind", a.gvk.String())
			continue
		}
		if err := a.setup(); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		log.Info("adapter started", "adapter", a.name, "kind", a.gvk.String())
	}
	return nil
}
