package queue

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// loadingPoll is how often the plugin checks whether the ledger has loaded, while pods wait.
const loadingPoll = 100 * time.Millisecond

// loadingWaiters are the pods PreFilter turned away while the ledger was still loading. The
// scheduler starts its cycles once its informers have synced, not once the plugin's handlers
// have seen their initial lists (the ledger's pods, nodes and, with DRA, every ResourceClaim,
// whose handler charges each claim's pods), and no cluster event says that they have: a pod
// turned away then would wait for an unrelated event, or for the scheduling queue's flush of
// unschedulable pods (5 minutes). The plugin brings them back itself once the ledger has loaded.
type loadingWaiters struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	watching bool
}

// rejectWhileLoading turns a pod away until the ledger has loaded, and makes sure it is tried
// again then (a pod still in its cycle when activated is requeued as it comes back).
func (q *Queue) rejectWhileLoading(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	w := &q.loading
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods == nil {
		w.pods = map[string]*corev1.Pod{}
	}
	w.pods[pod.Namespace+"/"+pod.Name] = pod
	if !w.watching {
		w.watching = true
		logger := klog.FromContext(ctx)
		stop := q.stop
		if stop == nil {
			stop = context.Background()
		}
		go func() {
			err := wait.PollUntilContextCancel(stop, loadingPoll, false, func(context.Context) (bool, error) { return q.synced(), nil })
			w.mu.Lock()
			pods := w.pods
			w.pods, w.watching = nil, false
			w.mu.Unlock()
			if err == nil && len(pods) > 0 {
				logger.V(2).Info("TephraQueue's ledger has loaded: trying again the pods turned away meanwhile", "pods", len(pods))
				q.handle.Activate(logger, pods)
			}
		}()
	}
	return fwk.NewStatus(fwk.Unschedulable, "the queue ledger is still loading")
}
