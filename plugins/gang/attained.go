package gang

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
)

// A queue may order its waiting workloads by the service they have received so far, least first
// (Queue spec.order LeastAttainedService), as Tiresias (NSDI'19) does for GPU jobs whose runtimes
// nobody knows: a job that has run little is likely to end soon, one that has run long is likely
// to run long still, so serving the least-served first lowers the mean completion time without
// estimates. A workload's service is the accelerator-seconds its pods have run: each run of a
// pod, from its start to its end or deletion, times its accelerators. A workload is its pod group,
// else the controller that owns its pods (which makes them again), else its pod, as reclaim counts
// restarts per job (plugins/queue/reclaim, reclaimcost.go): a workload restarted after a preemption or a
// reclaim keeps what it has attained.
//
// The service is discretized into a few levels, as Tiresias does, so that a long job is not
// pushed back each time it runs a little more and thrashes against newer ones: it moves a level
// down only at each tenfold of its service. Within a level, workloads keep the order they came;
// a workload that comes back after a run (its pods deleted by a preemption or a reclaim, made
// again by its Job) came at the end of that run, as a gang whose attempt failed comes again in a
// queue ordered by submission: its earlier place was used by the run. Its level then puts it behind
// newer workloads of lower levels, within the queue's orderBoundSeconds (levelDelay).
//
// The scheduler counts in its own memory, from its pod informer, for every workload whatever its
// queue's order, so that a queue switched to this order finds its workloads' history: a few map
// operations when a pod starts and when it ends. A restarted scheduler counts from zero, but for
// the runs under way, which it counts from their pods' start.

// serviceLevelSteps are the attained service, in multiples of the first level (TephraGang's
// attainedServiceFirstLevelSeconds, an accelerator-hour by default), at which a workload moves a
// level down: below the first it is at level 0 (a workload that never ran is), at or above the
// last at level len(serviceLevelSteps). Tenfold steps because jobs' GPU time in shared clusters spans
// orders of magnitude, heavy-tailed (the published traces of shared GPU clusters: minutes of
// debugging to thousands of GPU-hours of training): each order of magnitude is a level, and a job
// is moved back at most three times over its life. An accelerator-hour is the first step by
// default: most short jobs (a debug run, a trial of a sweep) end below it and stay ahead of
// everything that has run longer.
var serviceLevelSteps = [...]float64{1, 10, 100}

// serviceLevelCount is the number of levels.
const serviceLevelCount = len(serviceLevelSteps) + 1

// levelOf is the level of a service in accelerator-seconds, whose first level is at first.
func levelOf(unitSeconds float64, first time.Duration) int {
	level := 0
	for _, step := range serviceLevelSteps {
		if unitSeconds >= step*first.Seconds() {
			level++
		}
	}
	return level
}

// levelDelay is what a level adds to a workload's place in a queue whose bound is bound: the
// levels share the bound evenly, the top one waiting a whole bound. So a workload goes behind
// those of lower levels that came up to a third of the bound after it per level between them,
// and is never passed over by one that came more than the bound after it, as under
// ShortestEstimateFirst (order.go).
func levelDelay(level int, bound time.Duration) time.Duration {
	return bound * time.Duration(level) / time.Duration(serviceLevelCount-1)
}

// attainedService counts the service of workloads, and holds the places it gave queued pods.
type attainedService struct {
	mu        sync.Mutex
	workloads map[string]*workloadService
	// runs are the pods running now, by UID, with their workload.
	runs map[types.UID]*serviceRun
	// frozen are the places of queued pods in queues ordered by attained service (attainedPlace).
	frozen map[types.UID]frozenPlace
}

// workloadService is what a workload has attained.
type workloadService struct {
	// ended is the service of its runs that have ended, in accelerator-seconds.
	ended float64
	// running are its runs under way.
	running map[types.UID]*serviceRun
	// lastEnded is when its last run ended (zero: none has).
	lastEnded time.Time
}

// serviceRun is a pod's run: since when, at how many accelerators (or cores).
type serviceRun struct {
	workload string
	start    time.Time
	rate     float64
}

type frozenPlace struct {
	at, place time.Time
}

// forgetServiceAfter is how long a workload's service is kept after its last run ended, so that
// workloads long gone (those of controllers, whose deletion the scheduler does not see) do not
// pile up. Pod groups are forgotten with their PodGroup, plain pods with the pod.
const forgetServiceAfter = 7 * 24 * time.Hour

func newAttainedService() *attainedService {
	return &attainedService{workloads: map[string]*workloadService{}, runs: map[types.UID]*serviceRun{}, frozen: map[types.UID]frozenPlace{}}
}

// workloadOf is the workload a pod's service counts for.
func workloadOf(pod *corev1.Pod) string {
	if key, ok := groupOf(pod); ok {
		return groupWorkload(key)
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		return "owner/" + string(owner.UID)
	}
	return "pod/" + string(pod.UID)
}

func groupWorkload(key groupKey) string { return "group/" + key.String() }

// serviceRate is what a second of the pod's run adds to its workload's service: its accelerators,
// the largest count among the extended resources (nvidia.com/gpu and the like) and the DRA devices
// of one class it asks for (the largest, not the sum: a GPU's NIC or a device plugin's and DRA's
// view of one GPU is no second accelerator); for a pod without any, its CPU cores.
func (g *groupManager) serviceRate(pod *corev1.Pod) float64 {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	accelerators := int64(0)
	for name, q := range requests {
		if v1helper.IsExtendedResourceName(name) {
			accelerators = max(accelerators, q.Value())
		}
	}
	if g.devices != nil && devices.UsesDevices(pod) {
		for name, v := range g.devices.Charge(pod).Charged {
			if _, amount, ok := quota.DeviceClassOf(name); ok && amount == "devices" {
				accelerators = max(accelerators, v)
			}
		}
	}
	if accelerators > 0 {
		return float64(accelerators)
	}
	return float64(requests.Cpu().MilliValue()) / 1000
}

// running says whether a pod runs on its node: bound, started, not ended nor being deleted.
func running(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil &&
		(pod.Status.StartTime != nil || pod.Status.Phase == corev1.PodRunning) &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// serviceHandler counts the service of workloads from the scheduler's pod informer.
func (g *groupManager) serviceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { g.podSeen(obj, false) },
		UpdateFunc: func(_, obj any) { g.podSeen(obj, false) },
		DeleteFunc: func(obj any) { g.podSeen(obj, true) },
	}
}

// podSeen follows a pod from the scheduler's informer: a run starts when it is seen running, and
// ends when it is seen ended, being deleted, or gone.
func (g *groupManager) podSeen(obj any, gone bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, gone = tombstone.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || v1alpha1.IsSystemPod(pod) {
		return
	}
	a := g.attained
	now := g.now()
	runs := !gone && running(pod)
	a.mu.Lock()
	if gone || pod.Spec.NodeName != "" {
		delete(a.frozen, pod.UID) // bound or gone: it is not queued again
	}
	run, known := a.runs[pod.UID]
	if !runs && known {
		a.ended(pod.UID, run, now)
	}
	a.mu.Unlock()
	if !runs || known {
		return
	}
	// Its rate is read out of the lock: its devices are looked up under locks of their own.
	run = &serviceRun{workload: workloadOf(pod), start: now, rate: g.serviceRate(pod)}
	if s := pod.Status.StartTime; s != nil && s.Time.Before(now) {
		// A scheduler started while the pod runs counts it from its start.
		run.start = s.Time
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, known := a.runs[pod.UID]; !known {
		a.started(pod.UID, run, now)
	}
}

// started records a run under way. Called under the lock.
func (a *attainedService) started(uid types.UID, run *serviceRun, now time.Time) {
	w := a.workloads[run.workload]
	if w == nil {
		if len(a.workloads)%1024 == 1023 {
			a.sweep(now)
		}
		w = &workloadService{}
		a.workloads[run.workload] = w
	}
	if w.running == nil {
		w.running = map[types.UID]*serviceRun{}
	}
	w.running[uid] = run
	a.runs[uid] = run
}

// ended adds a run that ended to its workload's service. Called under the lock.
func (a *attainedService) ended(uid types.UID, run *serviceRun, now time.Time) {
	delete(a.runs, uid)
	w := a.workloads[run.workload]
	if w == nil {
		return
	}
	delete(w.running, uid)
	if now.After(run.start) {
		w.ended += now.Sub(run.start).Seconds() * run.rate
	}
	w.lastEnded = now
	if run.workload == "pod/"+string(uid) {
		// A plain pod without a controller runs once: ended, it is not queued again.
		delete(a.workloads, run.workload)
	}
}

// sweep forgets the workloads with nothing running whose last run ended long ago. Called under
// the lock.
func (a *attainedService) sweep(now time.Time) {
	for key, w := range a.workloads {
		if len(w.running) == 0 && now.Sub(w.lastEnded) > forgetServiceAfter {
			delete(a.workloads, key)
		}
	}
}

// forget drops a workload that will not come back (its PodGroup was deleted).
func (a *attainedService) forget(workload string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.workloads[workload]
	if w == nil {
		return
	}
	for uid := range w.running {
		delete(a.runs, uid)
	}
	delete(a.workloads, workload)
}

// of is a workload's service now, in accelerator-seconds, and when its last run ended. Called
// under the lock.
func (a *attainedService) of(workload string, now time.Time) (float64, time.Time) {
	w := a.workloads[workload]
	if w == nil {
		return 0, time.Time{}
	}
	service := w.ended
	for _, run := range w.running {
		if now.After(run.start) {
			service += now.Sub(run.start).Seconds() * run.rate
		}
	}
	return service, w.lastEnded
}

// attainedPlace is the place of a queued pod in a queue ordered by attained service: when its
// workload came (its group's creation, else the pod's), or when its last run ended if later (its
// earlier place was used by that run: it comes again), plus its level's delay, capped at the
// bound.
//
// The active queue is a heap whose keys must not change while a pod is queued. A workload's
// service grows only while it runs, and a workload that waits whole does not run, so its level
// would stay anyway; but part of a workload may run while another part waits (a gang's member
// created again, an elastic member), and a run may end meanwhile. So the place is worked out when
// the pod enters the queue (its queue timestamp) and kept until it enters again, as the DRF share
// is (drf.go).
func (g *groupManager) attainedPlace(e fwk.QueuedEntityInfo, pod *corev1.Pod, bound time.Duration) time.Time {
	a := g.attained
	at := e.GetTimestamp()
	a.mu.Lock()
	f, ok := a.frozen[pod.UID]
	a.mu.Unlock()
	if ok && f.at.Equal(at) {
		return f.place
	}
	place := g.attainedPlaceNow(pod, at, bound)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.frozen) >= maxFrozen {
		clear(a.frozen)
	}
	a.frozen[pod.UID] = frozenPlace{at: at, place: place}
	return place
}

// attainedPlaceNow is the place attainedPlace works out for a pod queued at at.
func (g *groupManager) attainedPlaceNow(pod *corev1.Pod, at time.Time, bound time.Duration) time.Time {
	a := g.attained
	came := pod.CreationTimestamp.Time
	if came.IsZero() {
		came = at
	}
	if key, ok := groupOf(pod); ok {
		if t, ok := g.groups.createdTime(key); ok {
			came = t
		}
	}
	workload := workloadOf(pod)
	now := g.now()
	a.mu.Lock()
	service, lastEnded := a.of(workload, now)
	a.mu.Unlock()
	if lastEnded.After(came) {
		came = lastEnded
	}
	return came.Add(min(levelDelay(levelOf(service, time.Duration(*g.args.AttainedServiceFirstLevelSeconds)*time.Second), bound), bound))
}

// frozenAttainedPlace is the place attainedPlace gave the pod when it last entered the queue.
func (g *groupManager) frozenAttainedPlace(pod *corev1.Pod) (time.Time, bool) {
	a := g.attained
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.frozen[pod.UID]
	return f.place, ok
}
