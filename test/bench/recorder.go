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
// when it first sees each pod (created) and first sees it with spec.nodeName set (bound). All
// figures of a scenario but the scheduler's CPU, memory and the apiserver's request counts come
// from it.
type recorder struct {
	mu     sync.Mutex
	pods   map[string]*podRecord
	gangs  map[string]*gangRecord
	seen   int // pods seen created
	bound  int // pods seen bound, blockers included
	toBind int // measured pods not yet bound
	// binds are the bind times of the measured pods, in the order seen.
	binds []time.Time
	// partial counts the pods bound in gangs not yet whole; peakPartial is its maximum.
	partial, peakPartial int
	changed              chan struct{}
	stop                 context.CancelFunc
}

type podRecord struct {
	gang           string
	blocker        bool
	created, bound time.Time
}

type gangRecord struct {
	minMember    int
	blocker      bool
	firstCreated time.Time
	bound        int
	whole        time.Time
}

// startRecorder starts watching the workload's namespace; it expects the workload's pods.
func startRecorder(ctx context.Context, client kubernetes.Interface, w *workload) (*recorder, error) {
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
		r.pods[p.name] = &podRecord{gang: p.gang, blocker: p.blocker}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(w.namespace))
	informer := factory.Core().V1().Pods().Informer()
	// The recorder needs a pod's name and node only; the rest would cost memory and copies.
	if err := informer.SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
				Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName},
			}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, err
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj) },
		UpdateFunc: func(_, obj any) { r.observe(obj) },
	}); err != nil {
		return nil, err
	}
	ctx, r.stop = context.WithCancel(ctx)
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			r.stop()
			return nil, fmt.Errorf("the recorder's %v informer did not sync", typ)
		}
	}
	return r, nil
}

func (r *recorder) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
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
	if pod.Spec.NodeName == "" || !p.bound.IsZero() {
		return
	}
	p.bound = now
	r.bound++
	if !p.blocker {
		r.toBind--
		r.binds = append(r.binds, now)
	}
	if g := r.gangs[p.gang]; g != nil {
		g.bound++
		switch {
		case g.bound < g.minMember:
			r.partial++
			r.peakPartial = max(r.peakPartial, r.partial)
		case g.bound == g.minMember:
			r.partial -= g.minMember - 1
			g.whole = now
		}
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// counts returns how many pods have been seen created and bound, and how many measured pods
// are still to bind.
func (r *recorder) counts() (seen, bound, toBind int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.bound, r.toBind
}

// Changed is signalled (at most once per read) after a pod is seen bound.
func (r *recorder) Changed() <-chan struct{} { return r.changed }

// close stops the informer.
func (r *recorder) close() { r.stop() }

// observation is what a recorder saw of a scenario, once it is over.
type observation struct {
	// binds are the measured pods' bind times, in order.
	binds []time.Time
	// latencies are the measured pods' create→bind times.
	latencies []time.Duration
	// gangLatencies are, per measured gang that became whole, its first member created → its
	// minMember-th bound.
	gangLatencies []time.Duration
	gangsWhole    int
	gangs         int
	// blockersWhole counts never-fitting gangs that were seen whole (which is a bug).
	blockersWhole int
	bound         int
	peakPartial   int
}

func (r *recorder) observation() observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := observation{binds: slices.Clone(r.binds), bound: r.bound, peakPartial: r.peakPartial}
	slices.SortFunc(o.binds, time.Time.Compare)
	for _, p := range r.pods {
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
		}
	}
	return o
}
