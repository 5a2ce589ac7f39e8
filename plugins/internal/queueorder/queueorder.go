// Package queueorder lets TephraQueue ask TephraGang where a waiting workload stands in its
// queue's order. TephraGang orders the active queue (QueueSort): by priority, then by its job's
// dominant share, then by the place its queue's order gives it (submission, shortest estimate or
// least attained service). When TephraQueue holds a queue at its deserved share for another
// queue's waiting workload, it names the workload that queue's order runs next among those that
// fit, not any that fits: under least attained service the two differ most, and a hold for a
// workload its own queue does not run kept the held queue waiting for nothing.
package queueorder

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Rank is where a pod's workload stands among the waiting pods of its priority: the smaller share
// first, then a pod never refused (in queues ordered by submission), then the earlier place.
type Rank struct {
	Share    float64
	FirstTry bool
	Place    time.Time
}

// Before says whether r runs before o.
func (r Rank) Before(o Rank) bool {
	if r.Share != o.Share {
		return r.Share < o.Share
	}
	if r.FirstTry != o.FirstTry {
		return r.FirstTry
	}
	return r.Place.Before(o.Place)
}

// Ranker ranks waiting pods as the active queue orders them.
type Ranker interface {
	Rank(pod *corev1.Pod) Rank
}

// rankers are the profiles' rankers, by the framework handle their plugins share.
var rankers sync.Map // fwk.Handle → Ranker

// Publish makes r the ranker of the profile whose plugins share h.
func Publish(h fwk.Handle, r Ranker) { rankers.Store(h, r) }

// Of is the ranker of the profile whose plugins share h; nil when the profile has no TephraGang
// (or it is not built yet), and waiting pods are then ranked by their creation.
func Of(h fwk.Handle) Ranker {
	r, ok := rankers.Load(h)
	if !ok {
		return nil
	}
	return r.(Ranker)
}
