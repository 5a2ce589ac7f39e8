// Package whenserved starts tephra-controllers' adapters only when the API they watch is served: a
// manager that watches a kind the apiserver does not serve fails as a whole, and the default
// install has none of the foreign CRDs. An adapter whose API is not served at start is started
// later by the leader, which checks again every RecheckInterval (a CRD installed after Tephra, or
// an apiserver restarted with another --runtime-config).
package whenserved

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// RecheckInterval is how often the adapters whose API is not served check again whether it is.
var RecheckInterval = 10 * time.Second

// Adapter is one watched kind and how to start its controller.
type Adapter struct {
	// Name names the adapter in logs.
	Name string
	// GVK is the kind the adapter watches.
	GVK schema.GroupVersionKind
	// Served, when set, says whether the API is served; by default the manager's RESTMapper
	// knows GVK.
	Served func() (bool, error)
	// Setup adds the adapter's controller to the manager. It is called at most once.
	Setup func() error
}

// Manager is what Start needs of a controller-runtime manager.
type Manager interface {
	Add(manager.Runnable) error
	GetRESTMapper() meta.RESTMapper
}

// Start sets up each adapter whose API is served now and logs which run; an error of their Setup
// is returned. The others are started by a runnable of the leader as soon as their API is served
// (controllers added to a started manager start at once).
func Start(mgr Manager, log logr.Logger, adapters ...Adapter) error {
	served := func(a Adapter) bool {
		var ok bool
		var err error
		if a.Served != nil {
			ok, err = a.Served()
		} else {
			_, err = mgr.GetRESTMapper().RESTMapping(a.GVK.GroupKind(), a.GVK.Version)
			ok = err == nil
			if meta.IsNoMatchError(err) {
				err = nil
			}
		}
		if err != nil {
			log.Error(err, "cannot tell whether the API is served; its adapter does not run yet", "adapter", a.Name, "kind", a.GVK.String())
			return false
		}
		return ok
	}
	var waiting []Adapter
	for _, a := range adapters {
		if !served(a) {
			log.Info("adapter not started: the API is not served; it starts when it is", "adapter", a.Name, "kind", a.GVK.String())
			waiting = append(waiting, a)
			continue
		}
		if err := a.Setup(); err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		log.Info("adapter started", "adapter", a.Name, "kind", a.GVK.String())
	}
	if len(waiting) == 0 {
		return nil
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ticker := time.NewTicker(RecheckInterval)
		defer ticker.Stop()
		for len(waiting) > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
			var still []Adapter
			for _, a := range waiting {
				if !served(a) {
					still = append(still, a)
					continue
				}
				if err := a.Setup(); err != nil {
					log.Error(err, "cannot start adapter", "adapter", a.Name, "kind", a.GVK.String())
					continue
				}
				log.Info("adapter started: its API is served now", "adapter", a.Name, "kind", a.GVK.String())
			}
			waiting = still
		}
		return nil
	}))
}
