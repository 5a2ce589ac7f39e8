// Package replacedefault checks Tephra installed as the cluster's default scheduler
// (manifests/overlays/replace-default) end to end: pods that name no scheduler count in the
// queues for the scheduler and for Queue status alike, the default queue's capability holds plain
// pods, a plain high-priority pod preempts lower-priority plain pods, and system pods (kube-system,
// system-cluster-critical) run whatever the default queue's state and preempt as under
// kube-scheduler.
//
// Each test offers an extended resource of its own on its own nodes, so that what the default
// queue allocates of it involves only the test's pods.
package replacedefault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// TestMain installs the overlay as it is shipped: its scheduler configuration, and
// tephra-controllers with its --scheduler-names, run as their ServiceAccounts.
func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		Manifests: localcluster.KustomizeManifests(filepath.Join("manifests", "overlays", "replace-default")),
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// units creates count nodes offering per units each of the test's own resource, and removes
// them when the test ends. Its pods select them by the pool label.
func units(t *testing.T, env *framework.Env, res corev1.ResourceName, count int, per int64) map[string]string {
	t.Helper()
	name := strings.ReplaceAll(string(res), "/", "-")
	pool := map[string]string{"e2e.tephra.dev/pool": name}
	_, err := env.Cluster.CreateNodes(context.Background(), name, count, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: pool, Extended: map[corev1.ResourceName]int64{res: per},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		for i := range count {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%d", name, i), metav1.DeleteOptions{})
		}
	})
	return pool
}

// plainPod is a pod as users write it for the default scheduler: no schedulerName, no Tephra
// label unless queue is set.
type plainPod struct {
	name, queue, priorityClass string
	res                        corev1.ResourceName
	amount                     int64
	pool                       map[string]string
}

func (p plainPod) build(ns string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: map[string]string{"e2e.tephra.dev/test": "replace-default"}},
		Spec: corev1.PodSpec{
			RestartPolicy:     corev1.RestartPolicyNever,
			NodeSelector:      p.pool,
			PriorityClassName: p.priorityClass,
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{p.res: *resource.NewQuantity(p.amount, resource.DecimalSI)},
					Limits:   corev1.ResourceList{p.res: *resource.NewQuantity(p.amount, resource.DecimalSI)},
				},
			}},
		},
	}
	if p.queue != "" {
		pod.Labels[schedulingv1alpha1.QueueLabel] = p.queue
	}
	return pod
}

// create creates the pod and deletes it when the test ends (pods in kube-system outlive the
// test's namespace otherwise).
func create(t *testing.T, env *framework.Env, ns string, p plainPod) *corev1.Pod {
	t.Helper()
	pod, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), p.build(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		zero := int64(0)
		_ = env.Kube.CoreV1().Pods(ns).Delete(context.Background(), p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return pod
}

func waitBound(t *testing.T, env *framework.Env, ns, name string) *corev1.Pod {
	t.Helper()
	return env.WaitPod(t, ns, name, time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
}

// waitHeld waits until an event about the pod gives reason (FailedScheduling, or the event of a
// queue that holds the pod before it is tried), and checks that it is still not bound.
func waitHeld(t *testing.T, env *framework.Env, ns, name, reason string) {
	t.Helper()
	var events string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		events = env.Events(ns, name)
		return strings.Contains(events, reason), nil
	})
	require.NoError(t, err, "pod %s/%s: no event saying %s; events: %s", ns, name, reason, events)
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, pod.Spec.NodeName, "pod %s/%s is bound although it should wait", ns, name)
}

// waitGone waits until the pod no longer exists.
func waitGone(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	require.NoError(t, err, "pod %s/%s was not evicted; events: %s", ns, name, env.Events(ns, name))
}

// waitAllocated waits until the queue's status shows want units of res allocated.
func waitAllocated(t *testing.T, env *framework.Env, queue string, res corev1.ResourceName, want int64) {
	t.Helper()
	var last corev1.ResourceList
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(ctx, queue, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = q.Status.Allocated
		got := last[res]
		return got.Value() == want, nil
	})
	require.NoError(t, err, "queue %s: want %d %s allocated; status.allocated %v", queue, want, res, last)
}

// waitAllocatedStays waits until a queue shows want of res allocated and checks that it still
// does 3 s later: the Queue controller recomputes within a second of any pod change, so a pod
// bound before the call that it counted wrongly would show by then. It proves what a queue does
// not count, which a wait alone could see before the count.
func waitAllocatedStays(t *testing.T, env *framework.Env, queue string, res corev1.ResourceName, want int64) {
	t.Helper()
	waitAllocated(t, env, queue, res, want)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(context.Background(), queue, metav1.GetOptions{})
		require.NoError(t, err)
		got := q.Status.Allocated[res]
		require.Equal(t, want, got.Value(), "queue %s: %s allocated changed to %v", queue, res, q.Status.Allocated)
		time.Sleep(250 * time.Millisecond)
	}
}

// createQueue creates a leaf queue under root and deletes it when the test ends.
func createQueue(t *testing.T, env *framework.Env, name string, mutate func(*schedulingv1alpha1.QueueSpec)) {
	t.Helper()
	q := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue, Weight: 1}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	_, err := env.Tephra.SchedulingV1alpha1().Queues().Create(context.Background(), q, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// changeDefaultQueue changes the default queue's spec and restores it when the test ends.
func changeDefaultQueue(t *testing.T, env *framework.Env, mutate func(*schedulingv1alpha1.QueueSpec)) {
	t.Helper()
	queues := env.Tephra.SchedulingV1alpha1().Queues()
	q, err := queues.Get(context.Background(), schedulingv1alpha1.DefaultQueue, metav1.GetOptions{})
	require.NoError(t, err)
	saved := q.Spec.DeepCopy()
	mutate(&q.Spec)
	_, err = queues.Update(context.Background(), q, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			q, err := queues.Get(ctx, schedulingv1alpha1.DefaultQueue, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			q.Spec = *saved
			_, err = queues.Update(ctx, q, metav1.UpdateOptions{})
			return err == nil, nil
		})
	})
}

func resourceQuantity(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }
