package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groupstatus"
	"github.com/tephra-dev/tephra/internal/ledger"
)

// ControllerName names the controller, in logs and as the reporting controller of its events.
const ControllerName = "tephra-queue"

// Condition types of a Queue.
const (
	// ConditionValid is False when the queue is not in the tree (its parent is missing, or it is
	// its own ancestor): its workloads wait.
	ConditionValid = "Valid"
	// ConditionGuaranteesFit is False when the children's guarantees exceed the queue's own
	// guarantee (or, for root, the cluster): they are scaled down in proportion.
	ConditionGuaranteesFit = "GuaranteesFit"
	// ConditionOpen is False when the queue takes no new workloads: it is closed (reason Closed),
	// or a queue above it is (reason ParentClosed), whatever its own spec.state says.
	ConditionOpen = "Open"
)

// allQueues is the one reconcile request: shares depend on every queue and every pod, so all
// statuses are computed together.
var allQueues = reconcile.Request{NamespacedName: types.NamespacedName{Name: "all-queues"}}

// Reconciler writes every Queue's status: allocated and deserved resources, workload counts and
// conditions. It reads them from a ledger (internal/ledger) that informer events of pods, nodes
// and PodGroups keep current one object at a time, as tephra-scheduler's TephraQueue keeps its
// own: each status is computed from the ledger's sums, never from a recount of every pod, and is
// right again at once after a restart, whose initial lists feed the ledger before the first
// status is written.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Delay batches changes: a burst of events costs one status computation per Delay, or per ten
	// times the last one's duration when that is longer (computeSpacing).
	Delay time.Duration
	// SchedulerNames are the scheduler names whose pods count in the queues: the profiles of
	// tephra-scheduler that enable TephraQueue (default: tephra-scheduler alone; "default-scheduler"
	// too when Tephra replaces the default scheduler). See schedulingv1alpha1.CountsInQueues.
	SchedulerNames []string
	// UsageHalfLife is the half-life of the usage each queue accrues in status.usage, which
	// deserved shares weigh against (fair share over time); 0 turns history off and removes
	// status.usage. The scheduler reads it from the status, with the usage.
	UsageHalfLife time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// feed keeps the ledger current from the informers' events (SetupWithManager).
	feed *ledger.Feed
	// informed are the PodGroups and pods as the manager's informers show them.
	informed informed
	// devices charges pods their claims' devices once resource.k8s.io/v1 is served
	// (devices.go); nil until then.
	devices atomic.Pointer[liveDevices]
	// lastCompute is how long the last status computation took, in nanoseconds.
	lastCompute atomic.Int64
}

// computeSpacing bounds what computing the statuses costs: the next computation waits at least
// this many times as long as the last took, so that it takes at most about a tenth of a core
// however big the cluster.
const computeSpacing = 10

// batchDelay is how long events wait before the status computation they ask for: Delay, or
// longer when the last computation took more than a tenth of it (computeSpacing).
func (r *Reconciler) batchDelay() time.Duration {
	return max(r.Delay, computeSpacing*time.Duration(r.lastCompute.Load()))
}

// SetupWithManager feeds the ledger from the manager's informers of pods, nodes, PodGroups and
// (where served) upstream PodGroups and Workloads (watchUpstream), and runs the reconciler on any
// change of those, of Queues, and of DeviceClasses, ResourceSlices and ResourceClaims'
// allocations and users (see watchDevices).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Delay == 0 {
		r.Delay = 500 * time.Millisecond
	}
	if len(r.SchedulerNames) == 0 {
		r.SchedulerNames = []string{schedulingv1alpha1.SchedulerName}
	}
	if err := registerMetrics(); err != nil {
		return err
	}
	ctx := context.Background()
	pods, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	if err := pods.AddIndexers(toolscache.Indexers{ledger.PodGroupIndex: ledger.IndexByGroup}); err != nil {
		return fmt.Errorf("index pods by pod group: %w", err)
	}
	groups, err := mgr.GetCache().GetInformer(ctx, &schedulingv1alpha1.PodGroup{})
	if err != nil {
		return err
	}
	if r.informed, err = informedGroups(pods, groups); err != nil {
		return err
	}
	r.feed = ledger.NewFeed(ledger.New(r.SchedulerNames...), r.informed)
	enqueue := batchingHandler{delay: r.batchDelay}
	// nudge asks for a status computation when devices start to count while the controller runs.
	nudge := make(chan event.GenericEvent, 1)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&schedulingv1alpha1.Queue{}), enqueue)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, feeding[*corev1.Pod](enqueue, r.feed.ObservePod, r.feed.ForgetPod))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Node{}, feeding[*corev1.Node](enqueue,
			func(obj any) { r.feed.ObserveNode(obj, false) }, func(obj any) { r.feed.ObserveNode(obj, true) }))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &schedulingv1alpha1.PodGroup{}, feedingGroups(enqueue, r.feed))).
		WatchesRawSource(source.Channel(nudge, enqueue)).
		Build(r)
	if err != nil {
		return err
	}
	if err := r.watchUpstream(mgr, c, enqueue); err != nil {
		return err
	}
	return r.watchDevices(mgr, c, enqueue, nudge)
}

// batchingHandler maps every event to allQueues after a delay; the work queue keeps one entry.
type batchingHandler struct{ delay func() time.Duration }

var _ handler.EventHandler = batchingHandler{}

func (h batchingHandler) Create(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.add(q)
}
func (h batchingHandler) Update(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.add(q)
}
func (h batchingHandler) Delete(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.add(q)
}
func (h batchingHandler) Generic(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.add(q)
}

func (h batchingHandler) add(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.AddAfter(allQueues, h.delay())
}

// feeding is the batching handler of a kind whose objects feed the ledger first: the handler
// records the change before it asks for the status computation, which so sees it. (A handler of
// its own on the informer would be called in no set order with the controller's.)
func feeding[T client.Object](h batchingHandler, observe, forget func(any)) handler.TypedEventHandler[T, reconcile.Request] {
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			observe(e.Object)
			h.add(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			observe(e.ObjectNew)
			h.add(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			forget(e.Object)
			h.add(q)
		},
	}
}

// feedingGroups is feeding for PodGroups, whose changes the ledger follows (Feed.GroupUpdated).
func feedingGroups(h batchingHandler, feed *ledger.Feed) handler.TypedEventHandler[*schedulingv1alpha1.PodGroup, reconcile.Request] {
	return handler.TypedFuncs[*schedulingv1alpha1.PodGroup, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*schedulingv1alpha1.PodGroup], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			feed.GroupAdded(e.Object)
			h.add(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*schedulingv1alpha1.PodGroup], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			feed.GroupUpdated(e.ObjectOld, e.ObjectNew)
			h.add(q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*schedulingv1alpha1.PodGroup], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			feed.GroupDeleted(e.Object)
			h.add(q)
		},
	}
}

// holdsOf says why each group's queue holds it now (groupstatus.HoldOf), as the PodGroup
// controller decides it for a PodGroup object: the Queue controller counts an upstream group,
// whose status nobody writes, Pending while its queue holds it, as it counts an object. A
// namespace that cannot be read holds nothing: its group counts as its members make it.
func (r *Reconciler) holdsOf(ctx context.Context, queues []*schedulingv1alpha1.Queue) func(*schedulingv1alpha1.PodGroup) groupstatus.Hold {
	holds := groupstatus.NewHolds(queues)
	return func(pg *schedulingv1alpha1.PodGroup) groupstatus.Hold {
		var ns corev1.Namespace
		if err := r.Get(ctx, types.NamespacedName{Name: pg.Namespace}, &ns); err != nil {
			return groupstatus.Hold{}
		}
		return holds.Of(pg, ns.Labels)
	}
}

// Reconcile computes every queue's status from the ledger and writes those that changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	start := time.Now()
	var queueList schedulingv1alpha1.QueueList
	if err := r.List(ctx, &queueList); err != nil {
		return ctrl.Result{}, err
	}
	queues := pointers(queueList.Items)
	if d := r.devices.Load(); d != nil {
		d.refresh(r.feed, r.informed.pods)
	}
	acct := fromLedger(r.feed.Ledger(), queues, r.informed.list(r.holdsOf(ctx, queues)), History{HalfLife: r.UsageHalfLife, Now: now()})
	r.lastCompute.Store(int64(time.Since(start)))
	exportMetrics(acct)
	var errs []error
	for _, q := range queues {
		status := acct.Status(q)
		if equality.Semantic.DeepEqual(q.Status, status) {
			continue
		}
		previous := q.Status
		q.Status = status
		if err := r.Status().Update(ctx, q); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				// The queue changed meanwhile: its event brings another reconcile.
				continue
			}
			errs = append(errs, fmt.Errorf("update status of queue %s: %w", q.Name, err))
			continue
		}
		r.recordEvents(q, previous)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, errs[0]
	}
	if r.UsageHalfLife > 0 {
		// Usage grows (and decays) without any event: come back to write it.
		return ctrl.Result{RequeueAfter: UsageRefresh(r.UsageHalfLife)}, nil
	}
	return ctrl.Result{}, nil
}

// recordEvents announces conditions that turned False.
func (r *Reconciler) recordEvents(q *schedulingv1alpha1.Queue, previous schedulingv1alpha1.QueueStatus) {
	if r.Recorder == nil {
		return
	}
	for _, c := range q.Status.Conditions {
		before := meta.FindStatusCondition(previous.Conditions, c.Type)
		if c.Status == metav1.ConditionFalse && (before == nil || before.Status != metav1.ConditionFalse || before.Message != c.Message) {
			r.Recorder.Eventf(q, nil, corev1.EventTypeWarning, c.Reason, "UpdateStatus", "%s", c.Message)
		}
	}
}
