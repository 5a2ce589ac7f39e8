// Package queue is Tephra's capacity-queue plugin (TephraQueue). It decides whether a pod may
// take capacity now, given its queue: the queue must be a usable leaf, the pod must not take the
// queue or any ancestor past its capability, and, while other queues wait for their deserved
// share, it must not take its own queue past its deserved share. A gang's minimum is admitted
// whole or not at all. When a queue below its deserved share cannot place a pod, PostFilter
// reclaims from queues above theirs, and a pod may preempt lower-priority pods of its own queue:
// package reclaim chooses and evicts the victims, under the reclaim rules.
//
// The plugin keeps one in-memory ledger of every queue's usage, fed by the scheduler's informers
// and by Reserve/Unreserve; it writes nothing to Queue objects (the Queue controller reports
// status from the pods, with the same rules from package quota). Devices of Dynamic Resource
// Allocation count as any resource (devices.go, docs/dra.md): reclaim gives victims' devices back
// to DRA's allocator in its dry run (reclaim/devicefit.go), and Filter holds the devices a preemption
// freed for the pod nominated there (filter.go).
package queue

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/refusal"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
	"github.com/tephra-dev/tephra/plugins/internal/victimwait"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraQueue"

// queueEvent is the cluster event resource of Tephra's Queues.
const queueEvent fwk.EventResource = "queues.v1alpha1.scheduling.tephra.dev"

// podGroupEvent is the cluster event resource of Tephra's PodGroups.
const podGroupEvent fwk.EventResource = "podgroups.v1alpha1.scheduling.tephra.dev"

// Queue is the capacity-queue plugin.
type Queue struct {
	handle fwk.Handle
	// lastGone is the last deleted pod isSchedulableAfterAssignedPodDeleted took out of the
	// ledger.
	lastGone  atomic.Pointer[types.UID]
	queues    schedulinglisters.QueueLister
	podGroups schedulinglisters.PodGroupLister
	// namespaces gives the labels that queues' namespaceSelectors match.
	namespaces corelisters.NamespaceLister
	ledger     *ledger.Ledger
	accounts   *accounts
	// reclaimer chooses and evicts the victims of PostFilter and PodGroupPostFilter (package
	// reclaim).
	reclaimer *reclaim.Reclaimer
	// systemPreemption is upstream's DefaultPreemption, for system pods (v1alpha1.IsSystemPod).
	systemPreemption *defaultpreemption.DefaultPreemption
	// synced says whether the ledger has seen every pod and node the scheduler has.
	synced func() bool
	// loading are the pods turned away until synced, to try again then (loading.go).
	loading loadingWaiters
	// stop is the scheduler's context, which ends the plugin's goroutines.
	stop context.Context
	// queueRunning is set once the scheduling queue calls PreEnqueue: pods may be activated.
	queueRunning atomic.Bool
	// refusals keeps a pod's refusal message while only its figures change, so that the
	// scheduler does not write its condition on every attempt (plugins/internal/refusal).
	refusals *refusal.Memo
	// shareWaiters are the pods PostFilter turned away, brought back when their queue's share
	// rises (queueShareRose).
	shareWaiters shareWaiters
	// holds are the pods PreFilter refused by their queue's state, which PreEnqueue keeps waiting
	// while that state stands (holds.go).
	holds heldPodSet
	// victims holds the preemptors, pods and groups, whose victims are still going, and wakes
	// them when the last is gone (plugins/internal/victimwait).
	victims victimwait.Waits
}

var (
	_ fwk.PreEnqueuePlugin         = &Queue{}
	_ fwk.PreFilterPlugin          = &Queue{}
	_ fwk.FilterPlugin             = &Queue{}
	_ fwk.PostFilterPlugin         = &Queue{}
	_ fwk.PodGroupPostFilterPlugin = &Queue{}
	_ fwk.ReservePlugin            = &Queue{}
	_ fwk.EnqueueExtensions        = &Queue{}
	_ fwk.SignPlugin               = &Queue{}
)

// New builds the plugin and fills its ledger from the informers before the first cycle. The
// pods of the profile's scheduler name count in the queues from now on; the ledger is shared with
// the scheduler's other profiles that enable TephraQueue (accounts).
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	factory, err := setup.Informers(handle.KubeConfig())
	if err != nil {
		return nil, err
	}
	if args.UsageHalfLife != nil {
		klog.FromContext(ctx).Info("TephraQueue's usageHalfLife is ignored: the scheduler reads the half-life that tephra-controllers' --usage-half-life sets from Queue status.usage", "usageHalfLife", args.UsageHalfLife.Duration)
	}
	a, err := accountsFor(handle, factory)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		refusals: refusal.NewMemo(),
		handle:   handle,
		queues:   factory.Scheduling().V1alpha1().Queues().Lister(),
		// The scheduler's own factory: started with the scheduler's informers.
		namespaces: handle.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		podGroups:  a.podGroups,
		ledger:     a.ledger,
		accounts:   a,
		synced:     a.synced,
		stop:       ctx,
	}
	q.victims.Wake = func(pods map[string]*corev1.Pod) { handle.Activate(klog.Background(), pods) }
	q.victims.Changed = func(held int) { preemptorsWaitingForVictims.Set(float64(held)) }
	if q.reclaimer, err = reclaim.New(reclaim.Deps{
		Name: Name, Handle: handle, Plugin: reclaimQueries{q}, Ledger: a.ledger, PodGroups: a.podGroups,
		Topologies: factory.Scheduling().V1alpha1().Topologies().Lister(), Devices: a.devices, Victims: &q.victims, Stop: ctx,
	}, reclaimSettings(args)); err != nil {
		return nil, err
	}
	if _, err := factory.Scheduling().V1alpha1().Queues().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: q.queueAdded, UpdateFunc: q.queueUpdated}); err != nil {
		return nil, err
	}
	if err := a.watchGroups(factory, cache.ResourceEventHandlerFuncs{UpdateFunc: q.podGroupChanged}); err != nil {
		return nil, err
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: q.reclaimer.PodUpdated, DeleteFunc: func(obj any) {
		q.shareWaiters.podDeleted(obj)
		q.holds.podDeleted(obj)
		q.reclaimer.PodDeleted(obj)
		q.victimOrPreemptorDeleted(obj)
	}}); err != nil {
		return nil, err
	}
	if err := setup.StartAndSync(ctx, Name, handle.KubeConfig(), factory,
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("queues"), Registration: a.queueReg},
		setup.Watch{Resource: v1alpha1.SchemeGroupVersion.WithResource("podgroups"), Registration: a.groupReg}); err != nil {
		return nil, err
	}
	// System pods preempt as they would under upstream's kube-scheduler, with its defaults.
	if q.systemPreemption, err = defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, handle, feature.Features{}); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("TephraQueue counts the pods of this profile in the queues", "profile", handle.ProfileName())
	return q, nil
}

// Name of the plugin.
func (q *Queue) Name() string { return Name }

// currentTree returns the queue tree, rebuilt if Queues changed.
func (q *Queue) currentTree() *quota.Tree { return q.accounts.shares.currentTree() }

// workload is the queue-relevant identity of a pod.
type workload = reclaim.Workload

// workloadOf resolves a pod's queue and group.
func (q *Queue) workloadOf(pod *corev1.Pod) (workload, *fwk.Status) {
	name, grouped := v1alpha1.PodGroupNameOf(pod)
	if !grouped {
		return workload{Queue: v1alpha1.QueueOfPod(pod, "")}, nil
	}
	pg, err := q.podGroups.PodGroups(pod.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// TephraGang holds such pods and says why.
		return workload{}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: pod group %q does not exist", v1alpha1.ReasonPodGroupNotFound, name))
	}
	if err != nil {
		return workload{}, fwk.AsStatus(err)
	}
	return workload{Queue: v1alpha1.QueueOfPod(pod, pg.Spec.Queue), Group: pod.Namespace + "/" + name, PodGroup: pg}, nil
}

func (q *Queue) podEvent(pod *corev1.Pod, reason, msg string) {
	q.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, reason, "Scheduling", msg)
}

// queueNameOf returns the queue a pod counts in, as it resolves now.
func (q *Queue) queueNameOf(pod *corev1.Pod) string {
	if w, status := q.workloadOf(pod); status == nil {
		return w.Queue
	}
	return v1alpha1.QueueOfPod(pod, "")
}
