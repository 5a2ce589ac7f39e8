package gang

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// The wake-up tests run TephraGang's PreEnqueue, QueueSort and queueing hints in kube-scheduler's
// own scheduling queue (its in-flight events, gating, backoff and Activate), and play a gang
// that preempts, and its victims' deletions, in random interleavings: the lost wake-ups of issue
// #38 depend on the order of a pod's cycle, the events the queue sees meanwhile and the group's
// timers, which an e2e run reaches only now and then.
//
// The world: nodes n0 and n1 of 1 CPU hold victims v0 and v1; group g (minMember 2) has four
// members of 1 CPU and a higher priority. The first member refused evicts both victims (as
// TephraQueue's PostFilter does, nominated to n0, and held at PreEnqueue while its preemption
// runs, as TephraQueue's PreEnqueue holds it); a later one finds room coming on n1. Every run must
// end with the group's minimum bound, without the periodic flush of unschedulable pods.

// wakeProfile is the scheduler name of the world's pods: the queue keys its hints by profile.
const wakeProfile = "tephra-scheduler"

// wakeWorld is one run's cluster, scheduler queue and scheduling cycles.
type wakeWorld struct {
	t   *testing.T
	f   *fixture
	q   *internalqueue.PriorityQueue
	rng *rand.Rand
	ctx context.Context

	mu      sync.Mutex
	trace   []string
	members []*corev1.Pod
	// onNode is the scheduler cache: the pods each node holds (victims, and members assumed or
	// bound).
	onNode map[string][]*corev1.Pod
	// nominated: members TephraQueue nominated, and where.
	nominated map[types.UID]string
	// preempting: members whose preemption runs (TephraQueue's PreEnqueue holds them).
	preempting map[types.UID]bool
	// evicting are the victims being evicted, whose deletion events are still to come;
	// replacing, the victims whose replacement (of lower priority, in their group, as their Job
	// creates it) is still to come.
	evicting  []*corev1.Pod
	replacing []*corev1.Pod
	evicted   bool
	// waiting: members at Permit, with their node; bound: members bound.
	waiting map[types.UID]string
	bound   map[types.UID]string
	infos   map[types.UID]*framework.QueuedPodInfo
}

// queuePreEnqueue is TephraQueue's PreEnqueue as the world needs it: a pod whose preemption runs is
// held until its last victim is gone (kube-scheduler's executor, IsPodRunningPreemption).
type queuePreEnqueue struct{ w *wakeWorld }

func (p queuePreEnqueue) Name() string { return "TephraQueue" }
func (p queuePreEnqueue) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if p.w.preempting[pod.UID] {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: waiting for the victims of the pod's preemption to be evicted")
	}
	return nil
}

// activatingHandle sends the plugin's Activate calls to the world's queue.
type activatingHandle struct {
	*fakeHandle
	w *wakeWorld
}

func (h *activatingHandle) Activate(logger klog.Logger, pods map[string]*corev1.Pod) {
	h.fakeHandle.Activate(logger, pods)
	h.w.log("activate %s", strings.Join(slices.Sorted(maps.Keys(pods)), ","))
	h.w.q.Activate(logger, pods)
}

func (h *activatingHandle) ProfileName() string { return wakeProfile }

func newWakeWorld(t *testing.T, seed uint64) *wakeWorld {
	t.Helper()
	w := &wakeWorld{t: t, f: newFixture(t), rng: rand.New(rand.NewPCG(seed, seed)), ctx: context.Background(),
		onNode: map[string][]*corev1.Pod{}, nominated: map[types.UID]string{}, preempting: map[types.UID]bool{},
		waiting: map[types.UID]string{}, bound: map[types.UID]string{}, infos: map[types.UID]*framework.QueuedPodInfo{}}
	// Events are not read: a recorder without a channel drops them.
	w.f.handle.recorder = &events.FakeRecorder{}
	w.f.gang.handle = &activatingHandle{fakeHandle: w.f.handle, w: w}
	// Real time: the group's backoff timers are real timers.
	w.f.gang.now = time.Now

	w.f.group(t, "g", 2, nil, time.Now())
	w.f.group(t, "low", 2, nil, time.Now().Add(-time.Hour))
	for _, name := range []string{"v0", "v1"} {
		v := w.f.member(t, name, "low", "")
		v.Spec.SchedulerName = wakeProfile
		w.f.bind(t, v, "n"+name[1:])
		w.onNode[v.Spec.NodeName] = append(w.onNode[v.Spec.NodeName], v)
	}
	for i := range 4 {
		m := w.f.member(t, fmt.Sprintf("m%d", i), "g", "")
		m.Spec.SchedulerName = wakeProfile
		m.Spec.Priority = ptr.To[int32](1000)
		w.members = append(w.members, m)
	}

	events, err := w.f.gang.EventsToRegister(w.ctx)
	require.NoError(t, err)
	hints := internalqueue.QueueingHintMap{}
	for _, e := range events {
		hints[e.Event] = append(hints[e.Event], &internalqueue.QueueingHintFunction{PluginName: Name, QueueingHintFn: e.QueueingHintFn})
	}
	// TephraQueue (no hints: every event it registers queues) and NodeResourcesFit (which queues
	// a pod it refused when an assigned pod goes).
	queueAll := func(klog.Logger, *corev1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.Queue, nil }
	deleted := framework.EventAssignedPodDelete
	hints[deleted] = append(hints[deleted],
		&internalqueue.QueueingHintFunction{PluginName: "TephraQueue", QueueingHintFn: queueAll},
		&internalqueue.QueueingHintFunction{PluginName: "NodeResourcesFit", QueueingHintFn: queueAll})
	schedmetrics.Register()
	w.q = internalqueue.NewTestQueue(w.ctx, w.f.gang.Less,
		internalqueue.WithQueueingHintMapPerProfile(internalqueue.QueueingHintMapPerProfile{wakeProfile: hints}),
		internalqueue.WithPreEnqueuePluginMap(map[string]map[string]fwk.PreEnqueuePlugin{wakeProfile: {Name: w.f.gang, "TephraQueue": queuePreEnqueue{w}}}),
		internalqueue.WithPodInitialBackoffDuration(20*time.Millisecond), internalqueue.WithPodMaxBackoffDuration(100*time.Millisecond))
	ctx, cancel := context.WithCancel(w.ctx)
	t.Cleanup(cancel)
	w.ctx = ctx
	go w.q.Run(klog.Background())
	for _, i := range w.rng.Perm(len(w.members)) {
		w.q.Add(w.ctx, w.members[i])
	}
	return w
}

func (w *wakeWorld) log(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

// snapshot is the nodes as the scheduler's cache holds them at the start of a cycle.
func (w *wakeWorld) snapshot() []fwk.NodeInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	var nodes []fwk.NodeInfo
	for _, name := range []string{"n0", "n1"} {
		info := framework.NewNodeInfo(w.onNode[name]...)
		info.SetNode(cpuNode(name, 1).Node())
		nodes = append(nodes, info)
	}
	return nodes
}

// free says whether node has room for pod: nothing on it, and no other pod of its priority or
// higher nominated to it (the members TephraQueue nominated outrank the replacements).
func (w *wakeWorld) free(node string, pod *corev1.Pod) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.onNode[node]) > 0 {
		return false
	}
	for uid, n := range w.nominated {
		if n == node && uid != pod.UID && isGangMember(pod) {
			return false
		}
		if n == node && !isGangMember(pod) {
			return false
		}
	}
	return true
}

// isGangMember says whether pod is of the preempting group g (not a victim's replacement).
func isGangMember(pod *corev1.Pod) bool { return pod.Labels[v1alpha1.PodGroupLabel] == "g" }

// cycle pops a pod and runs its scheduling cycle.
func (w *wakeWorld) cycle() {
	logger := klog.Background()
	entity, err := w.q.Pop(logger)
	require.NoError(w.t, err)
	pInfo := entity.(*framework.QueuedPodInfo)
	pod := pInfo.Pod
	cycle := w.q.SchedulingCycle()
	nodes := w.snapshot()
	// The queue may see events while the pod is in flight: after the cycle's snapshot, after
	// PreFilter, after PostFilter.
	w.maybeDeleteVictim()
	state := framework.NewCycleState()
	result, status := w.f.gang.PreFilter(w.ctx, state, pod, nodes)
	w.maybeDeleteVictim()
	rejector := Name
	if status.IsSuccess() {
		var chosen string
		for _, n := range nodes {
			name := n.Node().Name
			if (result.AllNodes() || result.NodeNames.Has(name)) && w.free(name, pod) {
				chosen = name
				break
			}
		}
		if chosen != "" {
			w.log("%s: PreFilter ok, reserved on %s", pod.Name, chosen)
			w.reserve(pod, chosen)
			w.infos[pod.UID] = pInfo
			permit, _ := w.f.gang.Permit(w.ctx, state, pod, chosen)
			switch permit.Code() {
			case fwk.Wait:
				w.f.handle.wait(pod)
				w.log("%s: waits at Permit", pod.Name)
			case fwk.Success:
				w.bind(pod)
			default:
				w.log("%s: Permit refused: %s", pod.Name, permit.Message())
				w.unreserve(pod, chosen, permit.Message())
			}
			w.settleWaiting()
			return
		}
		status, rejector = fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"), "NodeResourcesFit"
	}
	w.log("%s: refused by %s: %s", pod.Name, rejector, status.Message())
	if !status.IsRejected() || status.Code() != fwk.UnschedulableAndUnresolvable {
		if !isGangMember(pod) || !w.reclaim(pod) {
			_, post := w.f.gang.PostFilter(w.ctx, state, pod, nil)
			w.log("%s: PostFilter: %s", pod.Name, post.Message())
		}
	}
	w.maybeDeleteVictim()
	pInfo.UnschedulablePlugins = sets.New(rejector)
	require.NoError(w.t, w.q.AddUnschedulablePodIfNotPresent(logger, pInfo, cycle))
	w.settleWaiting()
}

// reclaim is TephraQueue's PostFilter for a member of g: the first refused member evicts both
// victims (their group is one unit); a member without a nomination later finds room coming on a
// node a victim is leaving, or evicts a replacement (of lower priority) that took a node: a bound
// one is deleted, one waiting at Permit is rejected. It says whether it nominated the pod (the
// framework then runs no other PostFilter).
func (w *wakeWorld) reclaim(pod *corev1.Pod) bool {
	w.mu.Lock()
	if _, ok := w.nominated[pod.UID]; ok {
		w.mu.Unlock()
		return false // its last preemption is still taking effect
	}
	if !w.evicted {
		w.evicted = true
		w.nominated[pod.UID] = "n0"
		victims := append(slices.Clone(w.onNode["n0"]), w.onNode["n1"]...)
		w.mu.Unlock()
		w.log("%s: evicts v0 and v1, nominated to n0", pod.Name)
		w.evict(pod, victims...)
		return true
	}
	for _, node := range []string{"n1", "n0"} {
		taken := false
		for _, n := range w.nominated {
			taken = taken || n == node
		}
		if taken {
			continue
		}
		var leaving, evictable []*corev1.Pod
		for _, p := range w.onNode[node] {
			switch {
			case slices.ContainsFunc(w.evicting, func(v *corev1.Pod) bool { return v.UID == p.UID }):
				leaving = append(leaving, p)
			case !isGangMember(p):
				evictable = append(evictable, p)
			}
		}
		if len(leaving) == 0 && len(evictable) == 0 {
			continue
		}
		w.nominated[pod.UID] = node
		w.mu.Unlock()
		if len(evictable) == 0 {
			w.log("%s: room coming on %s", pod.Name, node)
			setup.EvictingFor(w.ctx, w.f.handle, pod)
			return true
		}
		w.log("%s: evicts %s on %s", pod.Name, evictable[0].Name, node)
		w.evict(pod, evictable...)
		return true
	}
	w.mu.Unlock()
	return false
}

// evict evicts victims for a preemptor: one waiting at Permit is rejected in memory; a bound one
// is marked terminating now, deleted later (deleteVictim), and its preemptor is held at
// PreEnqueue until then.
func (w *wakeWorld) evict(preemptor *corev1.Pod, victims ...*corev1.Pod) {
	for _, v := range victims {
		if wp := w.f.handle.GetWaitingPod(v.UID); wp != nil {
			wp.(*fakeWaitingPod).Preempt("TephraQueue", "preempted")
			continue
		}
		terminating := v.DeepCopy()
		terminating.DeletionTimestamp = ptr.To(metav1.Now())
		require.NoError(w.t, w.f.pods.Update(terminating))
		w.mu.Lock()
		w.evicting = append(w.evicting, v)
		w.preempting[preemptor.UID] = true
		w.mu.Unlock()
	}
	setup.EvictingFor(w.ctx, w.f.handle, preemptor)
}

func (w *wakeWorld) reserve(pod *corev1.Pod, node string) {
	require.True(w.t, w.f.gang.Reserve(w.ctx, nil, pod, node).IsSuccess())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onNode[node] = append(w.onNode[node], pod)
	w.waiting[pod.UID] = node
}

// unreserve undoes a member's Reserve after Permit refused it, and sends it back to the queue as
// the framework does.
func (w *wakeWorld) unreserve(pod *corev1.Pod, node, why string) {
	w.f.gang.Unreserve(w.ctx, nil, pod, node)
	w.mu.Lock()
	w.onNode[node] = slices.DeleteFunc(w.onNode[node], func(p *corev1.Pod) bool { return p.UID == pod.UID })
	delete(w.waiting, pod.UID)
	pInfo := w.infos[pod.UID]
	w.mu.Unlock()
	w.log("%s: unreserved: %s", pod.Name, why)
	// The framework clears its nomination, and the room it was assumed on counts as freed.
	w.mu.Lock()
	delete(w.nominated, pod.UID)
	w.mu.Unlock()
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	pInfo.UnschedulablePlugins = sets.New(Name)
	require.NoError(w.t, w.q.AddUnschedulablePodIfNotPresent(klog.Background(), pInfo, w.q.SchedulingCycle()))
	w.q.MoveAllToActiveOrBackoffQueue(klog.Background(), framework.EventAssignedPodDelete, assumed, nil, func(p *corev1.Pod) bool { return p.UID != pod.UID })
}

func (w *wakeWorld) bind(pod *corev1.Pod) {
	w.mu.Lock()
	node := w.waiting[pod.UID]
	delete(w.waiting, pod.UID)
	delete(w.nominated, pod.UID)
	if isGangMember(pod) {
		w.bound[pod.UID] = node
	}
	w.mu.Unlock()
	w.log("%s: bound to %s", pod.Name, node)
	w.f.gang.PostBind(w.ctx, nil, pod, node)
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	require.NoError(w.t, w.f.pods.Update(bound))
	w.q.Done(pod.UID)
}

// settleWaiting binds the members Permit allowed and sends back those it rejected.
func (w *wakeWorld) settleWaiting() {
	w.f.handle.mu.Lock()
	var allowed, rejected []*fakeWaitingPod
	for uid, wp := range w.f.handle.waiting {
		switch {
		case wp.allowed:
			allowed = append(allowed, wp)
			delete(w.f.handle.waiting, uid)
		case wp.rejected != "":
			rejected = append(rejected, wp)
			delete(w.f.handle.waiting, uid)
		}
	}
	w.f.handle.mu.Unlock()
	for _, wp := range allowed {
		w.bind(wp.pod)
	}
	for _, wp := range rejected {
		w.mu.Lock()
		node := w.waiting[wp.pod.UID]
		w.mu.Unlock()
		w.unreserve(wp.pod, node, wp.rejected)
	}
}

// deleteVictim removes an evicted victim: the cache first, then the queue's event, as
// kube-scheduler's pod informer handler does. Its preemptor's PreEnqueue lets it go once the last
// victim is gone.
func (w *wakeWorld) deleteVictim() {
	w.mu.Lock()
	i := w.rng.IntN(len(w.evicting))
	v := w.evicting[i]
	w.evicting = slices.Delete(w.evicting, i, i+1)
	w.onNode[v.Spec.NodeName] = slices.DeleteFunc(w.onNode[v.Spec.NodeName], func(p *corev1.Pod) bool { return p.UID == v.UID })
	if len(w.evicting) == 0 {
		clear(w.preempting) // the preemptions' last victims are gone
	}
	w.mu.Unlock()
	w.log("%s deleted", v.Name)
	require.NoError(w.t, w.f.pods.Delete(v))
	w.q.MoveAllToActiveOrBackoffQueue(klog.Background(), framework.EventAssignedPodDelete, v, nil, nil)
	w.mu.Lock()
	w.replacing = append(w.replacing, v)
	w.mu.Unlock()
}

// replaceVictim creates a deleted victim's replacement: a pod of its group and priority, which
// the scheduler tries beside the gang.
func (w *wakeWorld) replaceVictim() {
	w.mu.Lock()
	v := w.replacing[0]
	w.replacing = w.replacing[1:]
	w.mu.Unlock()
	r := w.f.member(w.t, "r"+v.Name[1:], "low", "")
	r.Spec.SchedulerName = wakeProfile
	w.log("%s created", r.Name)
	w.q.Add(w.ctx, r)
}

// maybeDeleteVictim deletes an evicted victim, one time in three.
func (w *wakeWorld) maybeDeleteVictim() {
	w.mu.Lock()
	events := len(w.evicting)
	w.mu.Unlock()
	if events > 0 && w.rng.IntN(3) == 0 {
		w.deleteVictim()
	}
}

// runnable says whether the queue has a pod to pop now.
func (w *wakeWorld) runnable() bool {
	if len(w.q.PodsInActiveQ()) > 0 {
		return true
	}
	return utilfeature.DefaultFeatureGate.Enabled(features.SchedulerPopFromBackoffQ) && len(w.q.PodsInBackoffQ()) > 0
}

// run plays the world until the group's minimum is bound, or nothing can happen any more (no pod
// to pop, no victim to delete, and no timer has brought a pod back within quiet).
func (w *wakeWorld) run(quiet time.Duration) bool {
	for steps := 0; steps < 500; steps++ {
		w.mu.Lock()
		done := len(w.bound) >= 2
		events := len(w.evicting)
		creations := len(w.replacing)
		w.mu.Unlock()
		if done {
			return true
		}
		// A pod rejected at Permit goes back to the queue at once: its binding cycle was waiting.
		w.settleWaiting()
		canCycle := w.runnable()
		switch {
		case canCycle && (events+creations == 0 || w.rng.IntN(3) > 0):
			w.cycle()
		case creations > 0 && (events == 0 || w.rng.IntN(2) == 0):
			w.replaceVictim()
		case events > 0:
			w.deleteVictim()
		default:
			// Wait for a timer (a pod's backoff, a group's) to bring a pod back.
			deadline := time.Now().Add(quiet)
			for time.Now().Before(deadline) && !w.runnable() {
				time.Sleep(10 * time.Millisecond)
			}
			if !w.runnable() {
				return false
			}
		}
	}
	return false
}

func (w *wakeWorld) describe() string {
	pods, summary := w.q.PendingPods()
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("queue %s (%s), bound %d\n  %s", summary, strings.Join(names, ","), len(w.bound), strings.Join(w.trace, "\n  "))
}

// wakeRuns is how many interleavings TestAPreemptingGangIsWokenWhenItsVictimsGo plays
// (TEPHRA_WAKEUP_RUNS overrides it).
func wakeRuns(t *testing.T) int {
	if v := os.Getenv("TEPHRA_WAKEUP_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 100
}

// A gang that preempts within its queue binds its minimum once its victims are gone, in every
// interleaving of its members' cycles with the victims' deletions; none waits for the periodic
// flush of unschedulable pods (issue #38).
func TestAPreemptingGangIsWokenWhenItsVictimsGo(t *testing.T) {
	stuck := 0
	var first string
	for seed := range uint64(wakeRuns(t)) {
		w := newWakeWorld(t, seed)
		if !w.run(1500 * time.Millisecond) {
			stuck++
			if first == "" {
				first = fmt.Sprintf("seed %d: %s", seed, w.describe())
			}
		}
		w.q.Close()
	}
	require.Zero(t, stuck, "runs that left the gang waiting for the periodic flush, of %d; the first:\n%s", wakeRuns(t), first)
}
