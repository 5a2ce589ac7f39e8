package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// CreateQueue creates a leaf queue of weight 1 under root (mutate may change its spec) and
// deletes it when the test ends.
func CreateQueue(t *testing.T, env *Env, name string, mutate func(*schedulingv1alpha1.QueueSpec)) {
	t.Helper()
	q := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	_, err := env.Tephra.SchedulingV1alpha1().Queues().Create(context.Background(), q, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// WaitQueueStatus waits until a queue's status satisfies ok (what says what that is, for the
// failure message) and returns the queue.
func WaitQueueStatus(t *testing.T, env *Env, name string, timeout time.Duration, what string, ok func(*schedulingv1alpha1.Queue) bool) *schedulingv1alpha1.Queue {
	t.Helper()
	var last *schedulingv1alpha1.Queue
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = q
		return ok(q), nil
	})
	status := "none"
	if last != nil {
		status = fmt.Sprintf("allocated %v, deserved %v, pending %d, running %d", last.Status.Allocated, last.Status.Deserved, last.Status.Pending, last.Status.Running)
	}
	require.NoError(t, err, "queue %s: %s; last status: %s", name, what, status)
	return last
}

// AmountOf is a quantity of a list as an integer (bytes for memory), 0 when absent.
func AmountOf(list corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := list[name]
	if !ok {
		return 0
	}
	return q.Value()
}

// QueueStatuses describes every queue's allocation and deserved share, for failure messages.
func QueueStatuses(env *Env) string {
	queues, err := env.Tephra.SchedulingV1alpha1().Queues().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, q := range queues.Items {
		fmt.Fprintf(&b, "queue %s: allocated %v deserved %v\n", q.Name, q.Status.Allocated, q.Status.Deserved)
	}
	return b.String()
}

// WaitEventOnAny waits for an event containing want on any of the objects of a namespace.
func WaitEventOnAny(t *testing.T, env *Env, ns string, objects []string, want string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = ""
		for _, object := range objects {
			last += env.Events(ns, object)
		}
		return strings.Contains(last, want), nil
	})
	require.NoError(t, err, "event on one of %v containing %q; events: %s", objects, want, last)
}

// QueueLabel is the label e2e tests put their pods' queue in, to count them by queue.
const QueueLabel = "e2e.tephra.dev/queue"

// BoundByQueue counts the live pods bound to a node in a namespace, by QueueLabel.
func BoundByQueue(ctx context.Context, env *Env, ns string) (map[string]int, error) {
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			out[pod.Labels[QueueLabel]]++
		}
	}
	return out, nil
}

// WaitBound waits until the bound pods per queue are exactly want; describe adds to the
// failure message.
func WaitBound(t *testing.T, env *Env, ns string, want map[string]int, timeout time.Duration, describe ...func() string) {
	t.Helper()
	var last map[string]int
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := BoundByQueue(ctx, env, ns)
		if err != nil {
			return false, nil
		}
		last = got
		for q, n := range want {
			if got[q] != n {
				return false, nil
			}
		}
		return true, nil
	})
	more := ""
	for _, d := range describe {
		more += "\n" + d()
	}
	require.NoError(t, err, "bound pods by queue: want %v, last seen %v\n%s%s", want, last, QueueStatuses(env), more)
}

// HoldBound checks, during a while, that the bound pods per queue stay exactly want.
func HoldBound(t *testing.T, env *Env, ns string, want map[string]int, during time.Duration) {
	t.Helper()
	deadline := time.Now().Add(during)
	for time.Now().Before(deadline) {
		got, err := BoundByQueue(context.Background(), env, ns)
		require.NoError(t, err)
		for q, n := range want {
			require.Equal(t, n, got[q], "queue %s: bound pods changed after the shares settled (all: %v)\n%s", q, got, QueueStatuses(env))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// PriorityClass creates a PriorityClass and deletes it when the test ends.
func PriorityClass(t testing.TB, env *Env, name string, value int32) {
	t.Helper()
	_, err := env.Kube.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
