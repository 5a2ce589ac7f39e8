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
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
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

// Reconciler writes every Queue's status from the pods, nodes, PodGroups and devices (DRA):
// allocated and deserved resources, workload counts and conditions. It keeps nothing in memory
// but the devices the ResourceSlices offer, which informer events keep current (evaluating
// DeviceClasses' selectors anew for every recount would cost too much), so its status never
// drifts and is right again at once after a restart.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Delay batches changes: a burst of pod events costs one recomputation per Delay, or per ten
	// times the last recomputation's duration when that is longer (recountSpacing).
	Delay time.Duration
	// SchedulerNames are the scheduler names whose pods count in the queues: the profiles of
	// tephra-scheduler that enable TephraQueue (default: tephra-scheduler alone; "default-scheduler"
	// too when Tephra replaces the default scheduler). See schedulingv1alpha1.CountsInQueues.
	SchedulerNames []string
	// UsageHalfLife is the half-life of the usage each queue accrues in status.usage, which
	// deserved shares weigh against (fair share over time); 0 turns history off and removes
	// status.usage. It must be the scheduler's TephraQueue usageHalfLife, or the two disagree.
	UsageHalfLife time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// devices are the devices the cluster's ResourceSlices offer, per DeviceClass; nil while
	// resource.k8s.io/v1 is not served (devices are not counted then).
	devices atomic.Pointer[quota.DeviceInventory]
	// requests keeps the pods' requests between recounts.
	requests requestsMemo
	// shared are the manager's informers, whose stores the recount reads.
	shared cache.Informers
	// lastRecount is how long the last recount took, in nanoseconds.
	lastRecount atomic.Int64
}

// recountSpacing bounds what the recounts cost: the next one waits at least this many times as
// long as the last took, so recounting takes at most about a tenth of a core however big the
// cluster. On a small cluster a recount takes a millisecond and Delay alone batches the events;
// on make bench-upstream's 5000 nodes and 9000 pods, recounting every Delay was 16 % of the
// process's CPU. A queue's status is so at most ten recounts old.
const recountSpacing = 10

// batchDelay is how long events wait before the recount they ask for: Delay, or longer when the
// last recount took more than a tenth of it (recountSpacing).
func (r *Reconciler) batchDelay() time.Duration {
	return max(r.Delay, recountSpacing*time.Duration(r.lastRecount.Load()))
}

// SetupWithManager runs the reconciler on any change of Queues, pods, nodes and PodGroups, and of
// DeviceClasses, ResourceSlices and ResourceClaims' allocations and users (see watchDevices).
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
	r.shared = mgr.GetCache()
	enqueue := batchingHandler{delay: r.batchDelay}
	// nudge asks for a recount when devices start to count while the controller runs.
	nudge := make(chan event.GenericEvent, 1)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&schedulingv1alpha1.Queue{}), enqueue)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&corev1.Pod{}), enqueue)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&corev1.Node{}), enqueue)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&schedulingv1alpha1.PodGroup{}), enqueue)).
		WatchesRawSource(source.Channel(nudge, enqueue)).
		Build(r)
	if err != nil {
		return err
	}
	return r.watchDevices(mgr, c, enqueue, nudge)
}

// batchingHandler maps every event to allQueues after a delay; the work queue keeps one entry.
type batchingHandler struct{ delay func() time.Duration }

var _ handler.EventHandler = batchingHandler{}

func (h batchingHandler) Create(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.AddAfter(allQueues, h.delay())
}
func (h batchingHandler) Update(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.AddAfter(allQueues, h.delay())
}
func (h batchingHandler) Delete(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.AddAfter(allQueues, h.delay())
}
func (h batchingHandler) Generic(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.AddAfter(allQueues, h.delay())
}

// Reconcile recomputes every queue's status and writes those that changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	start := time.Now()
	acct, queues, err := accountFrom(ctx, r.Client, r.shared, r.SchedulerNames, true, r.devices.Load(), &r.requests, History{HalfLife: r.UsageHalfLife, Now: now()})
	if err != nil {
		return ctrl.Result{}, err
	}
	r.lastRecount.Store(int64(time.Since(start)))
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

// AccountFrom lists the queues, pods, PodGroups and (withNodes: for deserved shares) nodes
// through reader and accounts for them; it returns the queues too. With an inventory, pods are
// charged their ResourceClaims' devices too (read through reader), and the inventory's devices
// add to the cluster's total; nil counts no devices.
func AccountFrom(ctx context.Context, reader client.Reader, schedulerNames []string, withNodes bool, inventory *quota.DeviceInventory) (*Accounting, []*schedulingv1alpha1.Queue, error) {
	return accountFrom(ctx, reader, nil, schedulerNames, withNodes, inventory, nil, History{})
}

// accountFrom is AccountFrom, with the pods' requests kept in memo between recounts (nil: none),
// usage accrued with history, and the pods, nodes and PodGroups read from the stores of shared's
// informers when set (else listed through reader).
func accountFrom(ctx context.Context, reader client.Reader, shared cache.Informers, schedulerNames []string, withNodes bool, inventory *quota.DeviceInventory, memo *requestsMemo, history History) (*Accounting, []*schedulingv1alpha1.Queue, error) {
	var queues schedulingv1alpha1.QueueList
	if err := reader.List(ctx, &queues); err != nil {
		return nil, nil, err
	}
	// Only read: neither copied nor changed.
	pods, err := readOnly[corev1.Pod](ctx, reader, shared, &corev1.PodList{})
	if err != nil {
		return nil, nil, err
	}
	var nodes []*corev1.Node
	if withNodes {
		if nodes, err = readOnly[corev1.Node](ctx, reader, shared, &corev1.NodeList{}); err != nil {
			return nil, nil, err
		}
	}
	groups, err := readOnly[schedulingv1alpha1.PodGroup](ctx, reader, shared, &schedulingv1alpha1.PodGroupList{})
	if err != nil {
		return nil, nil, err
	}
	var devices Devices // a nil *cachedDevices would be a Devices that is not nil
	if inventory != nil {
		d, err := listDevices(ctx, reader, inventory, pods)
		if err != nil {
			return nil, nil, err
		}
		devices = d
	}
	ptrs := make([]*schedulingv1alpha1.Queue, len(queues.Items))
	for i := range queues.Items {
		ptrs[i] = &queues.Items[i]
	}
	return account(ptrs, pods, nodes, groups, schedulerNames, devices, memo, history), ptrs, nil
}

// readOnly returns every object of T, which the caller must neither change nor keep: from the
// store of shared's informer for T when shared is set, else listed through reader into list
// without deep copies. The recount reads every pod of the cluster up to twice a second; copying
// each into a list, even without a deep copy, was a third of its cost in make bench-upstream's
// 3000-gang run.
func readOnly[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, reader client.Reader, shared cache.Informers, list client.ObjectList) ([]PT, error) {
	if shared != nil {
		informer, err := shared.GetInformer(ctx, PT(new(T)))
		if err != nil {
			return nil, err
		}
		if s, ok := informer.(interface{ GetStore() toolscache.Store }); ok {
			objs := s.GetStore().List()
			out := make([]PT, 0, len(objs))
			for _, obj := range objs {
				if o, ok := obj.(PT); ok {
					out = append(out, o)
				}
			}
			return out, nil
		}
	}
	if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]PT, 0, len(objs))
	for _, obj := range objs {
		if o, ok := obj.(PT); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// Accounting is every queue's usage and share, computed from the cluster's objects with the
// rules the scheduler's ledger applies too (quota.ChargeOf).
type Accounting struct {
	Tree      *quota.Tree
	Total     quota.Amounts
	Allocated map[string]quota.Amounts // by queue, subtrees summed
	Pending   map[string]quota.Amounts // by leaf queue
	// Demand is what waits and can run now, by leaf queue: not gated, in a queue that admits
	// it, of a group with the members its minimum needs. Deserved shares are of it and of
	// Allocated.
	Demand   map[string]quota.Amounts
	Deserved map[string]quota.Amounts
	// Usage is each queue's status.usage (nil when history is off).
	Usage map[string]*schedulingv1alpha1.QueueUsage
	// Workloads counts pod groups (and pods without a group) by queue and state.
	Workloads      map[string]*WorkloadCounts
	overGuaranteed map[string]string
}

// WorkloadCounts counts a queue's workloads.
type WorkloadCounts struct{ Pending, Inqueue, Running int32 }

// Account computes what every queue uses, waits for and deserves. The pods of schedulerNames
// count, and pods of other schedulers that name a queue or group (CountsInQueues). A pod is
// charged its requests and, with devices (nil: none counted), its ResourceClaims' devices as the
// scheduler charges them (quota.ChargeDevices); the cluster's total is the nodes' allocatable
// and the devices' Total. Usage history is off: AccountWithHistory accrues it.
func Account(queues []*schedulingv1alpha1.Queue, pods []corev1.Pod, nodes []corev1.Node, groups []schedulingv1alpha1.PodGroup, schedulerNames []string, devices Devices) *Accounting {
	return account(queues, pointers(pods), pointers(nodes), pointers(groups), schedulerNames, devices, nil, History{})
}

// AccountWithHistory is Account, with each queue's usage accrued from its status.usage and
// weighed in the deserved shares.
func AccountWithHistory(queues []*schedulingv1alpha1.Queue, pods []corev1.Pod, nodes []corev1.Node, groups []schedulingv1alpha1.PodGroup, schedulerNames []string, devices Devices, history History) *Accounting {
	return account(queues, pointers(pods), pointers(nodes), pointers(groups), schedulerNames, devices, nil, history)
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// account is Account, with the pods' requests kept in memo between recounts (nil: none).
func account(queues []*schedulingv1alpha1.Queue, pods []*corev1.Pod, nodes []*corev1.Node, groups []*schedulingv1alpha1.PodGroup, schedulerNames []string, devices Devices, memo *requestsMemo, history History) *Accounting {
	defer memo.forgetUnseen()
	a := &Accounting{
		Tree:      quota.NewTree(queues),
		Total:     quota.Amounts{},
		Allocated: map[string]quota.Amounts{},
		Pending:   map[string]quota.Amounts{},
		Workloads: map[string]*WorkloadCounts{},
	}
	for _, node := range nodes {
		a.Total.Add(quota.NodeCapacity(node))
	}
	var lookup quota.DeviceLookup
	if devices != nil {
		a.Total.Add(devices.Total())
		lookup = devices
	}
	facts := a.countGroups(groups)
	leafAllocated := a.chargePods(pods, facts, schedulerNames, lookup, memo)
	demand := map[string]quota.Amounts{}
	for queue, v := range leafAllocated {
		add(demand, queue, v)
	}
	for queue, v := range a.Demand {
		add(demand, queue, v)
	}
	for _, n := range a.Tree.Nodes() {
		for _, anc := range n.Ancestry() {
			if n.Leaf() {
				add(a.Allocated, anc.Name, leafAllocated[n.Name])
			}
		}
	}
	a.useHistory(queues, history)
	a.Deserved = quota.Deserved(a.Tree, a.Total, demand)
	a.countInParents()
	a.overGuaranteed = a.Tree.OverGuaranteed(a.Total)
	return a
}

// groupFacts are what charging a pod needs of its PodGroup: its queue and its minimum, by
// "namespace/name".
type groupFacts struct {
	queue map[string]string
	min   map[string]int
}

// countGroups counts each queue's PodGroups by phase and gathers their facts.
func (a *Accounting) countGroups(groups []*schedulingv1alpha1.PodGroup) groupFacts {
	facts := groupFacts{queue: map[string]string{}, min: map[string]int{}}
	for _, g := range groups {
		queue := g.Spec.Queue
		if queue == "" {
			queue = schedulingv1alpha1.DefaultQueue
		}
		facts.queue[g.Namespace+"/"+g.Name] = queue
		facts.min[g.Namespace+"/"+g.Name] = int(g.Spec.MinMember)
		counts := a.counts(queue)
		switch g.Status.Phase {
		case schedulingv1alpha1.PodGroupPending, "":
			counts.Pending++
		case schedulingv1alpha1.PodGroupInqueue:
			counts.Inqueue++
		case schedulingv1alpha1.PodGroupRunning:
			counts.Running++
		}
	}
	return facts
}

// chargePods charges every pod to its queue by quota.ChargeOf: the requests of placed pods to
// the leaf queues' allocation, which it returns, and those of waiting pods to a.Pending. Into
// a.Demand go what waits and can run now, as the scheduler counts it (plugins/queue): not gated
// pods, not the pods of a group short of its minimum, not the pods of a queue that does not
// admit them. Pods without a group count as workloads of their own.
func (a *Accounting) chargePods(pods []*corev1.Pod, facts groupFacts, schedulerNames []string, lookup quota.DeviceLookup, memo *requestsMemo) map[string]quota.Amounts {
	leafAllocated := map[string]quota.Amounts{}
	demandPending := map[string]quota.Amounts{}
	// The claims pods name directly count once per queue, placed and waiting (podRequests).
	allocatedClaims, pendingClaims, demandClaims := map[string]bool{}, map[string]bool{}, map[string]bool{}
	groupMembers := map[string]int{}
	groupPending := map[string]map[string]quota.Amounts{}
	queueOf := func(namespace, name string) (string, bool) {
		q, ok := facts.queue[namespace+"/"+name]
		return q, ok
	}
	for _, pod := range pods {
		c := quota.ChargeOf(pod, schedulerNames, queueOf)
		if c.Standing == quota.Uncounted || c.Standing == quota.Unresolved {
			continue
		}
		queue, group := c.Queue, c.Group
		requests, claims := podRequests(pod, lookup, memo)
		if c.Member() {
			groupMembers[group]++
		}
		switch c.Standing {
		case quota.Placed:
			add(leafAllocated, queue, requests)
			claimsOnce(leafAllocated, allocatedClaims, queue, pod.Namespace, claims)
			if group == "" {
				a.counts(queue).Running++
			}
		case quota.Waiting:
			add(a.Pending, queue, requests)
			claimsOnce(a.Pending, pendingClaims, queue, pod.Namespace, claims)
			if group == "" {
				a.counts(queue).Pending++
			}
			if !c.Demand() || !a.Tree.Admits(queue) {
				break
			}
			claimsOnce(demandPending, demandClaims, queue, pod.Namespace, claims)
			if group == "" {
				add(demandPending, queue, requests)
				break
			}
			if groupPending[group] == nil {
				groupPending[group] = map[string]quota.Amounts{}
			}
			add(groupPending[group], queue, requests)
		}
	}
	for group, byQueue := range groupPending {
		if groupMembers[group] < facts.min[group] {
			continue
		}
		for queue, v := range byQueue {
			add(demandPending, queue, v)
		}
	}
	a.Demand = demandPending
	return leafAllocated
}

// countInParents adds each leaf queue's workload counts to its parents'.
func (a *Accounting) countInParents() {
	for _, n := range a.Tree.Nodes() {
		if !n.Leaf() {
			continue
		}
		c := a.Workloads[n.Name]
		if c == nil {
			continue
		}
		for p := n.Parent; p != nil; p = p.Parent {
			pc := a.counts(p.Name)
			pc.Pending += c.Pending
			pc.Inqueue += c.Inqueue
			pc.Running += c.Running
		}
	}
}

func (a *Accounting) counts(queue string) *WorkloadCounts {
	c := a.Workloads[queue]
	if c == nil {
		c = &WorkloadCounts{}
		a.Workloads[queue] = c
	}
	return c
}

// openCondition says whether the queue takes new workloads, and if not which queue closes it.
func (a *Accounting) openCondition(q *schedulingv1alpha1.Queue) metav1.Condition {
	open := metav1.Condition{Type: ConditionOpen, Status: metav1.ConditionTrue, Reason: "Open", Message: "the queue takes new workloads", ObservedGeneration: q.Generation}
	n := a.Tree.Get(q.Name)
	if n == nil {
		return open
	}
	switch closed := n.ClosedBy(); {
	case closed == n:
		open.Status, open.Reason, open.Message = metav1.ConditionFalse, "Closed", "the queue is closed: what runs goes on, new workloads wait"
	case closed != nil:
		open.Status, open.Reason = metav1.ConditionFalse, "ParentClosed"
		open.Message = fmt.Sprintf("%s: parent queue %q is closed: what runs goes on, new workloads of this queue and those below it wait", schedulingv1alpha1.ReasonQueueUnavailable, closed.Name)
	}
	return open
}

// Status is the status the queue should have.
func (a *Accounting) Status(q *schedulingv1alpha1.Queue) schedulingv1alpha1.QueueStatus {
	status := schedulingv1alpha1.QueueStatus{Conditions: q.Status.DeepCopy().Conditions}
	valid := metav1.Condition{Type: ConditionValid, Status: metav1.ConditionTrue, Reason: "InTree", Message: "the queue is part of the queue tree", ObservedGeneration: q.Generation}
	if problem, bad := a.Tree.Problems[q.Name]; bad {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, "NotInTree", problem+"; its workloads wait"
	}
	meta.SetStatusCondition(&status.Conditions, valid)
	fit := metav1.Condition{Type: ConditionGuaranteesFit, Status: metav1.ConditionTrue, Reason: "Fit", Message: "the children's guarantees fit in the queue", ObservedGeneration: q.Generation}
	if msg, over := a.overGuaranteed[q.Name]; over {
		fit.Status, fit.Reason, fit.Message = metav1.ConditionFalse, "GuaranteesExceedParent", msg+"; they are scaled down in proportion"
	}
	meta.SetStatusCondition(&status.Conditions, fit)
	meta.SetStatusCondition(&status.Conditions, a.openCondition(q))
	// Keep the transition times of unchanged conditions, so an unchanged status is not rewritten.
	for i := range status.Conditions {
		if old := meta.FindStatusCondition(q.Status.Conditions, status.Conditions[i].Type); old != nil && old.Status == status.Conditions[i].Status {
			status.Conditions[i].LastTransitionTime = old.LastTransitionTime
		}
	}
	status.AllocatedSummary, status.DeservedSummary = "0", "0"
	if a.Tree.Get(q.Name) == nil {
		return status
	}
	status.AllocatedSummary, status.DeservedSummary = a.Allocated[q.Name].Describe(), a.Deserved[q.Name].Describe()
	if l := a.Allocated[q.Name].List(); len(l) > 0 {
		status.Allocated = l
	}
	if l := a.Deserved[q.Name].List(); len(l) > 0 {
		status.Deserved = l
	}
	if c := a.Workloads[q.Name]; c != nil {
		status.Pending, status.Inqueue, status.Running = c.Pending, c.Inqueue, c.Running
	}
	status.Usage = a.Usage[q.Name]
	return status
}

func add(sums map[string]quota.Amounts, key string, v quota.Amounts) {
	if len(v) == 0 {
		return
	}
	if sums[key] == nil {
		sums[key] = quota.Amounts{}
	}
	sums[key].Add(v)
}
