// Package foreign holds tephra-controllers' adapters for the gang APIs of other schedulers: a
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) or a Volcano PodGroup
// (scheduling.volcano.sh/v1beta1) is translated into a Tephra PodGroup of the same namespace and
// name, and a Volcano Queue into a Tephra Queue of the same name; each mirror is owned by its
// foreign object (controller ownerReference, so deleting the foreign object deletes the mirror)
// and the foreign object's status is written back from the mirror's. The scheduler reads Tephra's
// API only.
package foreign

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
)

// Controller names, also the sources of their events.
const (
	SchedulerPluginsControllerName = "schedulerplugins-podgroup-adapter"
	VolcanoPodGroupControllerName  = "volcano-podgroup-adapter"
	VolcanoQueueControllerName     = "volcano-queue-adapter"
)

// RecheckInterval is how often the adapters whose API is not served check again whether it is.
var RecheckInterval = 10 * time.Second

// adapter is one foreign kind and how to start its controller.
type adapter struct {
	name  string
	gvk   schema.GroupVersionKind
	setup func() error
}

// Setup starts each adapter whose foreign API the apiserver serves (a manager that watches a kind
// that does not exist fails as a whole) and logs which run. The others start when their CRD is
// installed: the leader checks every RecheckInterval.
func Setup(mgr ctrl.Manager, log logr.Logger) error {
	served := func(gvk schema.GroupVersionKind) bool {
		_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil && !meta.IsNoMatchError(err) {
			log.Error(err, "cannot tell whether the API is served; its adapter does not run", "kind", gvk.String())
		}
		return err == nil
	}
	adapters := []adapter{
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
	var waiting []adapter
	for _, a := range adapters {
		if !served(a.gvk) {
			log.Info("adapter not started: the API is not served; it starts when its CRD is installed", "adapter", a.name, "kind", a.gvk.String())
			waiting = append(waiting, a)
			continue
		}
		if err := a.setup(); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		log.Info("adapter started", "adapter", a.name, "kind", a.gvk.String())
	}
	if len(waiting) == 0 {
		return nil
	}
	// A runnable of the leader: controllers added to a started manager start at once.
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ticker := time.NewTicker(RecheckInterval)
		defer ticker.Stop()
		for len(waiting) > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
			var still []adapter
			for _, a := range waiting {
				if !served(a.gvk) {
					still = append(still, a)
					continue
				}
				if err := a.setup(); err != nil {
					log.Error(err, "cannot start adapter", "adapter", a.name, "kind", a.gvk.String())
					continue
				}
				log.Info("adapter started: its API is served now", "adapter", a.name, "kind", a.gvk.String())
			}
			waiting = still
		}
		return nil
	}))
}
