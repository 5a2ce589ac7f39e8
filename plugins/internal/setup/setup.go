// Package setup holds what every Tephra scheduler plugin does when it is built: read its args
// from the scheduler configuration, and watch Tephra's API objects through one informer factory
// that all plugins and profiles of the scheduler share, so each kind is watched once.
package setup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
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
	factory := tephrainformers.NewSharedInformerFactory(client, 0)
	factories[config] = factory
	return factory, nil
}

// StartAndSync starts the informers registered with factory so far and waits, at most a minute,
// until the given handler registrations have seen their informers' contents.
func StartAndSync(ctx context.Context, plugin string, factory tephrainformers.SharedInformerFactory, registrations ...cache.ResourceEventHandlerRegistration) error {
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, registration := range registrations {
		if !cache.WaitForCacheSync(syncCtx.Done(), registration.HasSynced) {
			return fmt.Errorf("%s: the caches of Tephra's objects did not sync within a minute (are the CRDs installed?)", plugin)
		}
	}
	return nil
}
