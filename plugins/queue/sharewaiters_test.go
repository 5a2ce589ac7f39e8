package queue

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// A share that rises brings back the pods PostFilter turned away in the queues named, still
// pending, once each; not pods placed, deleted, bound or made anew under the same name, nor
// pods of other queues.
func TestShareWaitersTakeThePendingPodsOfTheQueuesNamed(t *testing.T) {
	pod := func(name string, uid types.UID) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
	}
	waiting, other, placed, deleted, bound, renewed := pod("waiting", "1"), pod("other", "2"), pod("placed", "3"), pod("deleted", "4"), pod("bound", "5"), pod("renewed", "6")
	moved := pod("moved", "7")
	var w shareWaiters
	for _, p := range []*corev1.Pod{waiting, placed, deleted, bound, renewed} {
		w.add("team-a", p)
	}
	w.add("team-b", other)
	w.add("team-b", moved)
	w.add("team-a", moved) // turned away again, now in team-a
	w.forget(placed.UID)
	w.podDeleted(cache.DeletedFinalStateUnknown{Key: "ns/deleted", Obj: deleted})

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	onNode := bound.DeepCopy()
	onNode.Spec.NodeName = "node-1"
	for _, p := range []*corev1.Pod{waiting, other, moved, onNode, pod("renewed", "60")} {
		assert.NoError(t, indexer.Add(p))
	}
	lister := corelisters.NewPodLister(indexer)

	got := w.take(map[string]bool{"team-a": true}, lister)
	assert.ElementsMatch(t, []string{"ns/waiting", "ns/moved"}, keysOf(got))
	assert.Empty(t, w.take(map[string]bool{"team-a": true}, lister), "taken once: turned away again, a pod is added again")
	assert.Equal(t, []string{"ns/other"}, keysOf(w.take(map[string]bool{"team-b": true}, lister)))
	assert.Empty(t, w.queueOf, "nothing left behind")
}

func keysOf(pods map[string]*corev1.Pod) []string {
	var keys []string
	for k := range pods {
		keys = append(keys, k)
	}
	return keys
}
