package benchupstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	tephraclient "github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/queue"
	"github.com/tephra-dev/tephra/controllers/setup"
)

var setLoggerOnce sync.Once

// startTephra is the harness's prepare hook for Tephra's profile. It runs once the apiserver and
// the scheduler run, before the workload: so Tephra's scheduler has started without its CRDs, as
// it must on a cluster that installs them later. It installs the CRDs of manifests/crds, starts
// tephra-controllers' controllers in this process (the Queue controller counts the workloads'
// PodGroups, which the upstream PodGroup adapter writes the status of; the default queue is
// created) and stops them when the workload ends.
//
// Without controllers (the tephra-scheduler profile, for workloads without PodGroups: it tells
// the scheduler's cost from the controllers' in this one process), it creates the root and
// default queues as the controllers would, and nothing else runs.
func startTephra(root string, controllers bool) perf.HookFn {
	return func(tCtx ktesting.TContext) error {
		// The harness's clients speak protobuf, which Tephra's kinds do not; tephra-controllers
		// speaks JSON.
		cfg := rest.CopyConfig(tCtx.RESTConfig())
		cfg.ContentType, cfg.AcceptContentTypes = "", ""
		var ctx context.Context = tCtx
		if err := installCRDs(ctx, filepath.Join(root, "manifests", "crds"), apiextensionsclient.NewForConfigOrDie(cfg)); err != nil {
			return err
		}
		setLoggerOnce.Do(func() { ctrl.SetLogger(klog.NewKlogr().WithName("tephra-controllers")) })
		if !controllers {
			c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
			if err != nil {
				return err
			}
			return queue.DefaultQueues{Client: c}.Start(ctx)
		}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 setup.Scheme(),
			Cache:                  setup.Cache(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// A manager per workload in one process: controller names repeat.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			return err
		}
		if err := setup.Controllers(mgr, setup.Options{SchedulerNames: []string{"default-scheduler", schedulingv1alpha1.SchedulerName}}); err != nil {
			return err
		}
		mgrCtx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var stopped error
		go func() {
			stopped = mgr.Start(mgrCtx)
			close(done)
		}()
		// Cleanups run last-registered first: the controllers stop before the scheduler and the
		// apiserver.
		tCtx.Cleanup(func() {
			cancel()
			<-done
			if stopped != nil {
				tCtx.Errorf("tephra-controllers: %v", stopped)
			}
		})
		tephra := tephraclient.NewForConfigOrDie(cfg)
		return pollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
			select {
			case <-done:
				return false, fmt.Errorf("tephra-controllers stopped: %w", stopped)
			default:
			}
			_, err := tephra.SchedulingV1alpha1().Queues().Get(ctx, schedulingv1alpha1.DefaultQueue, metav1.GetOptions{})
			return err == nil, nil
		})
	}
}

// installCRDs creates every CustomResourceDefinition in dir (kustomization.yaml aside) and waits
// until each is established.
func installCRDs(ctx context.Context, dir string, client apiextensionsclient.Interface) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	if len(names) == 0 {
		return errors.New("no CRDs in " + dir)
	}
	return pollUntil(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}
