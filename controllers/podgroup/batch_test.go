package podgroup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// A member's changes reach its group after the delay, one request for many changes; a pod that
// moves to another group has both groups reconciled; a pod of no group asks for nothing.
func TestMembersBatchedMakeOneRequestPerGroupAfterTheDelay(t *testing.T) {
	member := func(group string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		if group != "" {
			pod.Labels = map[string]string{schedulingv1alpha1.PodGroupLabel: group}
		}
		return pod
	}
	ctx := context.Background()
	newQueue := func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		return q
	}

	later := newQueue()
	h := membersBatched(time.Hour)
	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: member("a")}, later)
	assert.Zero(t, later.Len(), "nothing before the delay")

	q := newQueue()
	h = membersBatched(10 * time.Millisecond)
	for range 3 {
		h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: member("a")}, q)
	}
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: member("a"), ObjectNew: member("b")}, q)
	h.Delete(ctx, event.TypedDeleteEvent[client.Object]{Object: member("")}, q)
	assert.Eventually(t, func() bool { return q.Len() == 2 }, 5*time.Second, 5*time.Millisecond)
	var got []types.NamespacedName
	for q.Len() > 0 {
		req, _ := q.Get()
		got = append(got, req.NamespacedName)
		q.Done(req)
	}
	assert.ElementsMatch(t, []types.NamespacedName{{Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "b"}}, got)
}

// A new group is reconciled after the delay, once for many creations (a restart lists every
// group); its other changes are not this handler's.
func TestACreatedGroupIsReconciledAfterTheDelay(t *testing.T) {
	ctx := context.Background()
	newQueue := func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		return q
	}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	later := newQueue()
	createdBatched(time.Hour).Create(ctx, event.TypedCreateEvent[client.Object]{Object: group}, later)
	assert.Zero(t, later.Len(), "nothing before the delay")

	q := newQueue()
	h := createdBatched(10 * time.Millisecond)
	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: group}, q)
	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: group}, q)
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: group, ObjectNew: group}, q)
	assert.Eventually(t, func() bool { return q.Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	req, _ := q.Get()
	assert.Equal(t, types.NamespacedName{Namespace: "ns", Name: "g"}, req.NamespacedName)
	q.Done(req)
	assert.Zero(t, q.Len(), "one request for both creations, none for the update")
}
