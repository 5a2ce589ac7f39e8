// Package setup holds what every Tephra scheduler plugin does when it is built: read its args
// from the scheduler configuration, and watch Tephra's API objects through one informer factory
// that all plugins and profiles of the scheduler share, so each kind is watched once.
package setup

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	tephraclient "github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	tephrainformers "github.com/tephra-dev/tephra/apis/client/informers/externalversions"
)

// Args are a plugin's args type: defaults for what is unset, then validation.
type Args[T any] interface {
	*T
	SetDefaults()
	Validate() error
}

// ParseArgs reads a plugin's args from the scheduler configuration (nil: all defaults), strictly,
// so that a misspelled field is an error rather than a silent default; then defaults and
// validates them.
func ParseArgs[T any, PT Args[T]](plugin string, obj runtime.Object) (PT, error) {
	args := PT(new(T))
	if obj != nil {
		raw, ok := obj.(*runtime.Unknown)
		if !ok {
			return nil, fmt.Errorf("%s args: want runtime.Unknown, got %T", plugin, obj)
		}
		if err := yaml.UnmarshalStrict(raw.Raw, args); err != nil {
			return nil, fmt.Errorf("%s args: %w", plugin, err)
		}
	}
	args.SetDefaults()
	if err := args.Validate(); err != nil {
		return nil, fmt.Errorf("%s args: %w", plugin, err)
	}
	return args, nil
}

var (
	factoriesMu sync.Mutex
	factories   = map[*rest.Config]tephrainformers.SharedInformerFactory{}
)

// Informers returns the informer factory of Tephra's APIs for a scheduler's client
// configuration (every profile's handle returns the same one).
func Informers(config *rest.Config) (tephrainformers.SharedInformerFactory, error) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if factory, ok := factories[config]; ok {
		return factory, nil
	}
	client, err := tephraclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	// Without managedFields, which no plugin reads, as kube-scheduler keeps its pods.
	factory := tephrainformers.NewSharedInformerFactoryWithOptions(client, 0, tephrainformers.WithTransform(stripManagedFields))
	factories[config] = factory
	return factory, nil
}

// stripManagedFields drops an object's managedFields before the informer stores it.
func stripManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// Watch is an informer a plugin needs: the resource it lists and the plugin's handler on it.
type Watch struct {
	Resource     schema.GroupVersionResource
	Registration cache.ResourceEventHandlerRegistration
}

// notServedLogPeriod is how often a plugin started before its CRDs says it still waits for them.
const notServedLogPeriod = 30 * time.Second

// StartAndSync starts the informers registered with factory so far and waits, at most a minute,
// until the plugin's handlers have seen their informers' contents.
//
// When the apiserver does not serve a watched resource (its CRD is not installed yet), the plugin
// does not wait: it starts and sees none of those objects, which holds the pods of queues and
// pod groups as a missing queue or group does, and says so every 30 s until the CRDs are installed
// and the informers have listed them. Installing the CRDs after the scheduler (a Helm upgrade,
// upstream's scheduler_perf harness) then needs no restart.
func StartAndSync(ctx context.Context, plugin string, config *rest.Config, factory tephrainformers.SharedInformerFactory, watches ...Watch) error {
	factory.Start(ctx.Done())
	logger := klog.FromContext(ctx).WithValues("plugin", plugin)
	if missing := notServed(config, watches); len(missing) > 0 {
		logger.Info("Tephra's CRDs are not installed: scheduling the pods of queues and pod groups waits for them (kubectl apply -k manifests/crds)", "notServed", missing)
		go sayUntilSynced(ctx, logger, watches)
		return nil
	}
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, w := range watches {
		if !cache.WaitForCacheSync(syncCtx.Done(), w.Registration.HasSynced) {
			return fmt.Errorf("%s: the cache of %s did not sync within a minute (can the scheduler list them? see its RBAC)", plugin, w.Resource.GroupResource())
		}
	}
	return nil
}

// notServed lists the watched resources the apiserver does not serve. A discovery error other
// than "not found" counts as served, so that the caller waits as it would have without asking.
func notServed(config *rest.Config, watches []Watch) []string {
	client, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil
	}
	served := map[schema.GroupVersion]map[string]bool{}
	var missing []string
	for _, w := range watches {
		gv := w.Resource.GroupVersion()
		if _, known := served[gv]; !known {
			served[gv] = map[string]bool{}
			list, err := client.ServerResourcesForGroupVersion(gv.String())
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				served[gv] = nil // unknown: assume served
			default:
				for _, r := range list.APIResources {
					served[gv][r.Name] = true
				}
			}
		}
		if names := served[gv]; names != nil && !names[w.Resource.Resource] {
			missing = append(missing, w.Resource.GroupResource().String())
		}
	}
	return missing
}

// sayUntilSynced logs, every notServedLogPeriod, which informers have not listed their objects yet,
// and once when all have.
func sayUntilSynced(ctx context.Context, logger klog.Logger, watches []Watch) {
	_ = wait.PollUntilContextCancel(ctx, notServedLogPeriod, false, func(context.Context) (bool, error) {
		var waiting []string
		for _, w := range watches {
			if !w.Registration.HasSynced() {
				waiting = append(waiting, w.Resource.GroupResource().String())
			}
		}
		if len(waiting) > 0 {
			logger.Info("Still waiting for Tephra's CRDs to be installed", "notSynced", waiting)
			return false, nil
		}
		logger.Info("Tephra's CRDs are installed and listed: the plugin sees their objects")
		return true, nil
	})
}
