// Package setup registers Tephra's controllers with a controller-runtime manager: what
// tephra-controllers runs, and what benchmarks that run the controllers in their own process
// (make bench-upstream) run the same way.
package setup

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/cronjob"
	"github.com/tephra-dev/tephra/controllers/foreign"
	"github.com/tephra-dev/tephra/controllers/job"
	"github.com/tephra-dev/tephra/controllers/jobflow"
	"github.com/tephra-dev/tephra/controllers/kueue"
	"github.com/tephra-dev/tephra/controllers/podgroup"
	"github.com/tephra-dev/tephra/controllers/queue"
	"github.com/tephra-dev/tephra/controllers/upstream"
	"github.com/tephra-dev/tephra/controllers/whenserved"
	"github.com/tephra-dev/tephra/internal/groups"
)

// Scheme holds every kind the controllers read or write.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(batchv1alpha1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	return scheme
}

// Cache is how the controllers' informers keep objects: without their managedFields, which no
// controller reads (updates from a cached object leave the server's managedFields as they are),
// and which are often the largest part of a pod, as kube-scheduler drops them from its pods.
func Cache() cache.Options {
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
}

// Options are what the controllers are told by their flags.
type Options struct {
	// SchedulerNames are the schedulers whose pods count in the queues: the profiles that enable
	// TephraQueue.
	SchedulerNames []string
	// DefaultReadyTimeout is the ready timeout of PodGroups that set none (0: none).
	DefaultReadyTimeout time.Duration
	// UsageHalfLife is the half-life of the queues' usage history (0: off); see
	// queue.Reconciler.UsageHalfLife.
	UsageHalfLife time.Duration
	// ConcurrentJobSyncs is how many Tephra Jobs are decided at once (0: DefaultConcurrentJobSyncs).
	ConcurrentJobSyncs int
}

// DefaultConcurrentJobSyncs is how many Tephra Jobs are decided at once by default: a decision
// mostly waits on the apiserver (a status, a PodGroup, pods), so a burst of Jobs is served by
// many at once.
const DefaultConcurrentJobSyncs = 16

// Controllers registers every Tephra controller with the manager (the webhooks aside).
func Controllers(mgr ctrl.Manager, opts Options) error {
	if err := mgr.Add(queue.DefaultQueues{Client: mgr.GetClient()}); err != nil {
		return err
	}
	queues := &queue.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(queue.ControllerName), SchedulerNames: opts.SchedulerNames, UsageHalfLife: opts.UsageHalfLife}
	if err := queues.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("queue controller: %w", err)
	}
	podGroups := &podgroup.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(podgroup.ControllerName), DefaultReadyTimeout: opts.DefaultReadyTimeout}
	if err := podGroups.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pod group controller: %w", err)
	}
	// With a default ready timeout, which only the PodGroup controller enforces, every Job's group
	// needs a PodGroup object, a one-pod Job's too.
	jobs := &job.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(job.ControllerName), ConcurrentSyncs: opts.ConcurrentJobSyncs,
		GroupObjects: opts.DefaultReadyTimeout > 0}
	if jobs.ConcurrentSyncs <= 0 {
		jobs.ConcurrentSyncs = DefaultConcurrentJobSyncs
	}
	if err := jobs.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("job controller: %w", err)
	}
	flows := &jobflow.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(jobflow.ControllerName)}
	if err := flows.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("jobflow controller: %w", err)
	}
	crons := &cronjob.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(cronjob.ControllerName)}
	if err := crons.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("cronjob controller: %w", err)
	}
	// The adapters of scheduler-plugins' and Volcano's PodGroups and Queues, and of JobSets: only
	// those whose CRDs are installed run.
	if err := foreign.Setup(mgr, ctrl.Log.WithName("setup"), opts.SchedulerNames); err != nil {
		return fmt.Errorf("foreign adapters: %w", err)
	}
	if err := compositeAdapter(mgr); err != nil {
		return fmt.Errorf("upstream composite adapter: %w", err)
	}
	if err := upstreamAdapter(mgr); err != nil {
		return fmt.Errorf("upstream PodGroup adapter: %w", err)
	}
	// Tephra Jobs under Kueue's admission: only where Kueue's Workloads are served.
	if err := whenserved.Start(mgr, ctrl.Log.WithName("setup"), whenserved.Adapter{
		Name: kueue.ControllerName,
		GVK:  kueue.GroupVersion.WithKind("Workload"),
		Setup: func() error {
			r := &kueue.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(kueue.ControllerName)}
			if err := r.SetupWithManager(mgr); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return kueue.WarmQueueReads(ctx, mgr.GetCache())
		},
	}); err != nil {
		return fmt.Errorf("kueue adapter: %w", err)
	}
	return nil
}

// compositeAdapter runs the adapter for upstream CompositePodGroups (scheduling.k8s.io/v1alpha3)
// only when the apiserver serves them, and their child PodGroups (v1beta1).
func compositeAdapter(mgr ctrl.Manager) error {
	log := ctrl.Log.WithName("setup")
	var workloads bool
	return whenserved.Start(mgr, log, whenserved.Adapter{
		Name: upstream.CompositeControllerName,
		GVK:  upstream.CompositeGroupVersion.WithKind("CompositePodGroup"),
		Served: func() (bool, error) {
			composites, err := upstream.CompositeServed(mgr.GetConfig())
			if err != nil || !composites {
				return false, err
			}
			podGroups, w, err := groups.UpstreamServed(mgr.GetConfig())
			workloads = w
			return podGroups, err
		},
		Setup: func() error {
			r := &upstream.CompositeReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(upstream.CompositeControllerName), Workloads: workloads}
			return r.SetupWithManager(mgr)
		},
	})
}

// upstreamAdapter runs the adapter for upstream scheduling.k8s.io/v1beta1 PodGroups only when the
// apiserver serves them (GenericWorkload and --runtime-config): a watch on a kind that is not
// served would stop the manager. When they are not served at start, the leader checks again
// every whenserved.RecheckInterval (an apiserver restarted with the API enabled).
func upstreamAdapter(mgr ctrl.Manager) error {
	log := ctrl.Log.WithName("setup")
	var workloads bool
	return whenserved.Start(mgr, log, whenserved.Adapter{
		Name: upstream.ControllerName,
		GVK:  upstream.GroupVersion.WithKind("PodGroup"),
		Served: func() (bool, error) {
			podGroups, w, err := groups.UpstreamServed(mgr.GetConfig())
			workloads = w
			return podGroups, err
		},
		Setup: func() error {
			log.Info("upstream adapter reads Workloads too", "workloads", workloads)
			r := &upstream.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(upstream.ControllerName), Workloads: workloads}
			return r.SetupWithManager(mgr)
		},
	})
}
