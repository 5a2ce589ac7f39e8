package job

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// goneTTL bounds how long a gone pod is remembered when no decision consumes it (its job was
// deleted, say).
const goneTTL = 10 * time.Minute

// gonePods remembers, per job, the last state of its pods that were deleted before the
// controller decided on their end. The pod garbage collector fails the pods of a deleted node
// and deletes them at once, and `kubectl delete --force` removes a running pod in one step: the
// cache may never show the pod ending, only missing, and a missing pod is simply created again.
// Remembering the last state lets the decision see the eviction and apply the job's PodEvicted
// policy. The memory is lost with the controller: a restart in that short window creates the
// pod again without a policy (docs/operations.md).
type gonePods struct {
	mu   sync.Mutex
	pods map[types.NamespacedName]map[types.UID]gonePod
	// ours are the pods the controller itself deletes (restarts, clean-up, force deletions),
	// with when: their end was decided, so they are not remembered. A resumed job starts a run
	// with the same retry number as the one it aborted, whose pods it deleted: remembered, they
	// would read as evictions of the new run.
	ours map[types.UID]time.Time
}

type gonePod struct {
	pod  *corev1.Pod
	seen time.Time
}

// deleting notes that the controller deletes a pod itself, before it asks the apiserver to.
func (g *gonePods) deleting(uid types.UID, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ours == nil {
		g.ours = map[types.UID]time.Time{}
	}
	if len(g.ours) > 1024 {
		// Deletions whose event never came (the pod was gone already) are forgotten in time.
		for uid, at := range g.ours {
			if now.Sub(at) > goneTTL {
				delete(g.ours, uid)
			}
		}
	}
	g.ours[uid] = now
}

// remember records a deleted pod of a job, if its end can matter: someone else deleted it, and
// it had not succeeded.
func (g *gonePods) remember(job types.NamespacedName, pod *corev1.Pod, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ours := g.ours[pod.UID]; ours {
		delete(g.ours, pod.UID)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		return
	}
	if g.pods == nil {
		g.pods = map[types.NamespacedName]map[types.UID]gonePod{}
	}
	if g.pods[job] == nil {
		g.pods[job] = map[types.UID]gonePod{}
	}
	g.pods[job][pod.UID] = gonePod{pod: pod, seen: now}
}

// of returns the gone pods of a job whose slot no pod holds again, forgetting the others: a pod
// of the same name exists (the slot was filled again, or the name was reused) or the memory is
// older than goneTTL. Pods of an earlier run stay until then but are stale to the decision.
func (g *gonePods) of(job types.NamespacedName, present []corev1.Pod, now time.Time) []corev1.Pod {
	g.mu.Lock()
	defer g.mu.Unlock()
	entries := g.pods[job]
	if len(entries) == 0 {
		return nil
	}
	names := make(map[string]bool, len(present))
	for i := range present {
		names[present[i].Name] = true
	}
	var out []corev1.Pod
	for uid, e := range entries {
		if names[e.pod.Name] || now.Sub(e.seen) > goneTTL {
			delete(entries, uid)
			continue
		}
		out = append(out, *e.pod)
	}
	if len(entries) == 0 {
		delete(g.pods, job)
	}
	return out
}

// forget drops a job's memory: the job is gone.
func (g *gonePods) forget(job types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pods, job)
}

// podHandler enqueues a pod's job for every change of the pod, as Owns does, and first
// remembers a deleted pod's last state, so that the decision it triggers sees it.
func (r *Reconciler) podHandler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(obj client.Object, q queue) {
		if job, ok := jobOf(obj); ok {
			q.Add(reconcile.Request{NamespacedName: job})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { enqueue(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			enqueue(e.ObjectOld, q)
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			// controller-runtime hands over the last state the cache had, also when the
			// deletion itself was missed (DeleteStateUnknown): the pod vanished as it was then.
			if pod, ok := e.Object.(*corev1.Pod); ok {
				if job, ok := jobOf(pod); ok {
					r.gone.remember(job, pod, r.now())
				}
				if ref := metav1.GetControllerOf(pod); ref != nil {
					// A pod deleted before a decision saw it created is not waited for.
					r.unseen.deleted(ref.UID, pod)
				}
			}
			enqueue(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { enqueue(e.Object, q) },
	}
}

// jobOf is the Tephra Job that controls an object.
func jobOf(obj metav1.Object) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, batchv1alpha1.GroupName+"/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}
