package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// recorder watches a workload's pods with an informer, as a user's tooling would, and notes
// when it first sees each pod (created), first sees it with spec.nodeName set (bound), and first
// sees it ended or deleted (finished; Q's pods only end). All figures of a scenario but the
// scheduler's CPU, memory and the apiserver's request counts come from it.
type recorder struct {
	mu     sync.Mutex
	pods   map[string]*podRecord
	gangs  map[string]*gangRecord
	seen   int // pods seen created
	bound  int // pods seen bound, blockers included
	toBind int // measured pods not yet bound
	ended  int // pods seen ended (Succeeded or Failed) or deleted
	// claimed counts the pods seen naming a generated ResourceClaim in their status (scenarios
	// with devices).
	claimed int
	// evicted counts the pods deleted before they ended (in Q, reclaimed or preempted).
	evicted int
	// binds are the bind times of the measured pods, in the order seen.
	binds []time.Time
	// partial counts the pods bound in gangs not yet whole; peakPartial is its maximum.
	partial, peakPartial int
	// onEnd, if set, is called (without the lock) with the node of each bound pod that ends.
	onEnd   func(node string)
	changed chan struct{}
	stop    context.CancelFunc
}

type podRecord struct {
	gang    string
	blocker bool
	queue   string
	gpus    int
	run     time.Duration
	node    string
	// created, bound and ended are when the recorder saw them; evicted says the pod was deleted
	// before it ended.
	created, bound, ended time.Time
	evicted               bool
	// claimed: the pod's status named its generated claim.
	claimed bool
}

type gangRecord struct {
	minMember    int
	blocker      bool
	firstCreated time.Time
	bound        int
	// firstBound is when its first member was seen bound, whole when its minMember-th was.
	firstBound, whole time.Time
}

// newRecorder prepares a recorder for the workload's pods.
func newRecorder(w *workload) *recorder {
	r := &recorder{
		pods:    make(map[string]*podRecord, len(w.pods)),
		gangs:   make(map[string]*gangRecord, len(w.gangs)),
		changed: make(chan struct{}, 1),
		toBind:  w.measured(),
	}
	for _, g := range w.gangs {
		r.gangs[g.name] = &gangRecord{minMember: g.minMember, blocker: g.blocker}
	}
	for _, p := range w.pods {
		r.pods[p.name] = &podRecord{gang: p.gang, blocker: p.blocker, queue: p.queue, gpus: p.gpus, run: p.run}
	}
	return r
}

// start starts watching the workload's namespace and waits for the informer's first list.
func (r *recorder) start(ctx context.Context, client kubernetes.Interface, namespace string) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	// The recorder needs a pod's name, node, phase and generated claims only; the rest would cost
	// memory and copies.
	if err := informer.SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
				Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName},
				Status:     corev1.PodStatus{Phase: pod.Status.Phase, ResourceClaimStatuses: pod.Status.ResourceClaimStatuses},
			}, nil
		}
		return obj, nil
	}); err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			r.observe(obj, true)
		},
	}); err != nil {
		return err
	}
	var err error
	r.stop, err = startSynced(ctx, factory)
	return err
}

func (r *recorder) observe(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	var (
		notify  func(string)
		endedOn string
	)
	r.mu.Lock()
	defer func() {
		r.mu.Unlock()
		if notify != nil && endedOn != "" {
			notify(endedOn)
		}
	}()
	p := r.pods[pod.Name]
	if p == nil {
		return
	}
	if p.created.IsZero() {
		p.created = now
		r.seen++
		if g := r.gangs[p.gang]; g != nil && g.firstCreated.IsZero() {
			g.firstCreated = now
		}
	}
	if !p.claimed && slices.ContainsFunc(pod.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.ResourceClaimName != nil }) {
		p.claimed = true
		r.claimed++
	}
	if pod.Spec.NodeName != "" && p.bound.IsZero() {
		r.bindLocked(p, pod.Spec.NodeName, now)
	}
	if p.ended.IsZero() && (deleted || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
		p.ended = now
		r.ended++
		if deleted && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			p.evicted = true
			r.evicted++
		}
		notify, endedOn = r.onEnd, p.node
		r.signal()
	}
}

func (r *recorder) bindLocked(p *podRecord, node string, now time.Time) {
	p.bound, p.node = now, node
	r.bound++
	if !p.blocker {
		r.toBind--
		r.binds = append(r.binds, now)
	}
	if g := r.gangs[p.gang]; g != nil {
		g.bound++
		if g.firstBound.IsZero() {
			g.firstBound = now
		}
		switch {
		case g.bound < g.minMember:
			r.partial++
			r.peakPartial = max(r.peakPartial, r.partial)
		case g.bound == g.minMember:
			r.partial -= g.minMember - 1
			g.whole = now
		}
	}
	r.signal()
}

func (r *recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// recorderCounts are how far a workload is.
type recorderCounts struct {
	// seen pods created; bound pods, blockers included; toBind measured pods not bound yet;
	// ended pods ended or deleted; claimed pods that name their generated claim.
	seen, bound, toBind, ended, claimed int
}

func (r *recorder) counts() recorderCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorderCounts{seen: r.seen, bound: r.bound, toBind: r.toBind, ended: r.ended, claimed: r.claimed}
}

// boundNodes are the nodes of the measured pods seen bound, by pod name.
func (r *recorder) boundNodes() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.pods))
	for name, p := range r.pods {
		if !p.blocker && !p.bound.IsZero() {
			out[name] = p.node
		}
	}
	return out
}

// setOnEnd makes the recorder call f with the node of each bound pod that ends or is deleted.
func (r *recorder) setOnEnd(f func(node string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onEnd = f
}

// Changed is signalled (at most once per read) after a pod is seen bound or ended.
func (r *recorder) Changed() <-chan struct{} { return r.changed }

// close stops the informer.
func (r *recorder) close() {
	if r.stop != nil {
		r.stop()
	}
}

// observation is what a recorder saw of a scenario, once it is over.
type observation struct {
	// binds are the measured pods' bind times, in order.
	binds []time.Time
	// latencies are the measured pods' create→bind times.
	latencies []time.Duration
	// gangLatencies are, per measured gang that became whole, its first member created → its
	// minMember-th bound.
	gangLatencies []time.Duration
	// gangSpreads are, per measured gang that became whole, its first member bound → its
	// minMember-th bound: how long the gang was partly bound.
	gangSpreads []time.Duration
	gangsWhole  int
	gangs       int
	// blockersWhole counts never-fitting gangs that were seen whole (which is a bug).
	blockersWhole int
	bound         int
	peakPartial   int
	// partialAtEnd counts the pods bound in gangs that never became whole.
	partialAtEnd int
	evicted      int
	// pods are copies of every pod's record, for Q's figures.
	pods []podRecord
}

func (r *recorder) observation() observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := observation{binds: slices.Clone(r.binds), bound: r.bound, peakPartial: r.peakPartial, partialAtEnd: r.partial, evicted: r.evicted}
	slices.SortFunc(o.binds, time.Time.Compare)
	for _, p := range r.pods {
		o.pods = append(o.pods, *p)
		if !p.blocker && !p.bound.IsZero() {
			o.latencies = append(o.latencies, p.bound.Sub(p.created))
		}
	}
	for _, g := range r.gangs {
		if g.blocker {
			if !g.whole.IsZero() {
				o.blockersWhole++
			}
			continue
		}
		o.gangs++
		if !g.whole.IsZero() {
			o.gangsWhole++
			o.gangLatencies = append(o.gangLatencies, g.whole.Sub(g.firstCreated))
			o.gangSpreads = append(o.gangSpreads, g.whole.Sub(g.firstBound))
		}
	}
	return o
}

// startSynced starts a recorder's informers and waits, a minute at most, until they have synced;
// stop ends them.
func startSynced(ctx context.Context, factory informers.SharedInformerFactory) (stop context.CancelFunc, err error) {
	ctx, stop = context.WithCancel(ctx)
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			stop()
			return nil, fmt.Errorf("the recorder's %v informer did not sync", typ)
		}
	}
	return stop, nil
}
