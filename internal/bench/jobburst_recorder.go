package bench

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// jobPodRecorder watches a burst's namespace with an informer, as a user's tooling would, and
// notes when it first sees each pod and first sees it bound, and, per Job (the pod's controlling
// owner), when it first sees one of its pods. The burst's pods are named by their controllers
// (batch/v1's with a random suffix), so unlike the matrix's recorder it cannot know them in
// advance: it counts whatever pods appear, against the number expected.
type jobPodRecorder struct {
	mu sync.Mutex
	// want is the number of pods the burst makes.
	want int
	// pods are the pods seen, by name, and whether each was seen bound.
	pods map[string]bool
	// firstPod is when the first pod of each Job was seen, by Job name.
	firstPod map[string]time.Time
	seen     int
	bound    int
	// lastSeen and lastBound are when the latest pod was first seen, and first seen bound.
	lastSeen, lastBound time.Time
	changed             chan struct{}
	stop                context.CancelFunc
}

func newJobPodRecorder(want int) *jobPodRecorder {
	return &jobPodRecorder{
		want:     want,
		pods:     make(map[string]bool, want),
		firstPod: map[string]time.Time{},
		changed:  make(chan struct{}, 1),
	}
}

// start starts watching namespace's pods and waits for the informer's first list.
func (r *jobPodRecorder) start(ctx context.Context, client kubernetes.Interface, namespace string) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	// Only the name, owner and node are needed; the rest would cost memory and copies.
	if err := informer.SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
					ResourceVersion: pod.ResourceVersion, OwnerReferences: pod.OwnerReferences},
				Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName},
			}, nil
		}
		return obj, nil
	}); err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, time.Now()) },
		UpdateFunc: func(_, obj any) { r.observe(obj, time.Now()) },
	}); err != nil {
		return err
	}
	var err error
	r.stop, err = startSynced(ctx, factory)
	return err
}

// observe notes what a pod event shows, seen at now.
func (r *jobPodRecorder) observe(obj any, now time.Time) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	wasBound, known := r.pods[pod.Name]
	if !known {
		r.seen++
		r.lastSeen = now
		if owner := metav1.GetControllerOf(pod); owner != nil && owner.Kind == "Job" {
			if _, ok := r.firstPod[owner.Name]; !ok {
				r.firstPod[owner.Name] = now
			}
		}
	}
	bound := pod.Spec.NodeName != ""
	if bound && !wasBound {
		r.bound++
		r.lastBound = now
	}
	r.pods[pod.Name] = wasBound || bound
	if !known || bound && !wasBound {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
}

// progress is how many pods were seen so far, and how many bound.
func (r *jobPodRecorder) progress() (seen, bound int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.bound
}

// done says every pod the burst makes was seen bound.
func (r *jobPodRecorder) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen >= r.want && r.bound >= r.want
}

func (r *jobPodRecorder) close() {
	if r.stop != nil {
		r.stop()
	}
}

// burstObservation is what a recorder saw of a burst, once it is over.
type burstObservation struct {
	want, seen, bound   int
	lastSeen, lastBound time.Time
	firstPod            map[string]time.Time
}

func (r *jobPodRecorder) observation() burstObservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	firstPod := make(map[string]time.Time, len(r.firstPod))
	for job, t := range r.firstPod {
		firstPod[job] = t
	}
	return burstObservation{want: r.want, seen: r.seen, bound: r.bound, lastSeen: r.lastSeen, lastBound: r.lastBound, firstPod: firstPod}
}
