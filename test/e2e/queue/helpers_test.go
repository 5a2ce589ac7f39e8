// Package queue checks Tephra's queues end to end against a real control plane: weighted and
// hierarchical shares, reclaim that settles, guarantees and non-reclaimable queues, capability
// under a burst, closed and missing queues, gang admission, in-queue preemption, and Queue status
// that equals what the pods say across restarts.
//
// Each test offers an extended resource of its own on its own nodes, so that the cluster total
// of that resource, and so every queue's share of it, involves only the test's nodes and queues.
package queue

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// packageUsageHalfLife "" runs the package with the shipped usage history (a week's half-life):
// its tests check the shares that weights, guarantees and capabilities give at the current
// demand, which minutes of use leave as they are (usage counts against a week, in whole percent
// of the parent's share; docs/queues.md). history_test.go shortens it to see history act.
const packageUsageHalfLife = ""

func TestMain(m *testing.M) {
	// A preemptor binds soon after its victims go, never at the periodic flush (issue #38).
	framework.CheckPreemptorsInEveryTest()
	os.Exit(framework.Main(m, localcluster.Options{UsageHalfLife: packageUsageHalfLife}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// units creates count nodes offering per units each of the test's own resource, and removes
// them when the test ends. Its pods select them by the pool label.
func units(t *testing.T, env *framework.Env, res corev1.ResourceName, count int, per int64) map[string]string {
	t.Helper()
	pool := map[string]string{"e2e.tephra.dev/pool": strings.ReplaceAll(string(res), "/", "-")}
	prefix := pool["e2e.tephra.dev/pool"]
	_, err := env.Cluster.CreateNodes(context.Background(), prefix, count, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: pool, Extended: map[corev1.ResourceName]int64{res: per},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		for i := range count {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{})
		}
	})
	return pool
}

// workPod is a pod of a queue that asks for amount of res and runs until deleted (or for the
// simulated duration, if set).
type workPod struct {
	name, queue, group string
	res                corev1.ResourceName
	amount             int64
	cpu                string
	pool               map[string]string
	priorityClass      string
	duration           string
}

func (w workPod) build(ns string) *corev1.Pod {
	labels := map[string]string{}
	if w.group != "" {
		labels[schedulingv1alpha1.PodGroupLabel] = w.group
	} else if w.queue != "" {
		labels[schedulingv1alpha1.QueueLabel] = w.queue
	}
	labels["e2e.tephra.dev/queue"] = w.queue
	requests := corev1.ResourceList{}
	if w.res != "" {
		requests[w.res] = *resource.NewQuantity(w.amount, resource.DecimalSI)
	}
	if w.cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(w.cpu)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:     schedulingv1alpha1.SchedulerName,
			RestartPolicy:     corev1.RestartPolicyNever,
			NodeSelector:      w.pool,
			PriorityClassName: w.priorityClass,
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limitsOf(requests)},
			}},
		},
	}
	if w.duration != "" {
		pod.Annotations = map[string]string{"sim.tephra.dev/duration": w.duration}
	}
	return pod
}

// limitsOf sets limits for extended resources, which must equal their requests.
func limitsOf(requests corev1.ResourceList) corev1.ResourceList {
	limits := corev1.ResourceList{}
	for name, q := range requests {
		if strings.Contains(string(name), "/") {
			limits[name] = q
		}
	}
	return limits
}

// submit creates count pods named prefix-0.. in a queue.
func submit(t *testing.T, env *framework.Env, ns string, count int, prefix string, w workPod) {
	t.Helper()
	for i := range count {
		w.name = fmt.Sprintf("%s-%d", prefix, i)
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), w.build(ns), metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// livePods counts the pods of a queue that exist and are not being deleted.
func livePods(t *testing.T, env *framework.Env, ns, queue string) int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e.tephra.dev/queue=" + queue})
	require.NoError(t, err)
	n := 0
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// countEvents counts the events with a reason in a namespace.
func countEvents(t *testing.T, env *framework.Env, ns, reason string) int {
	t.Helper()
	events, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, e := range events.Items {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// waitEvents counts the events with a reason in a namespace once there are n of them, or once
// 30 s have passed, failing the test then with those there are; the caller asserts the count. The
// recorder writes each event from a goroutine of its own after the eviction it goes with, so a
// test that saw the pods move may list the events before the last of them is there.
func waitEvents(t *testing.T, env *framework.Env, ns, reason string, n int) int {
	t.Helper()
	got := 0
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = countEvents(t, env, ns, reason)
		return got >= n, nil
	})
	if err != nil {
		t.Errorf("waited 30s for %d %s events, saw %d:\n%s", n, reason, got, eventsOfAll(t, env, ns, reason))
	}
	return got
}

// pendingMessage returns the PodScheduled message of a pod of the queue that is not bound (ok
// false, with what was found instead, when there is none).
func pendingMessage(env *framework.Env, ns, queue string) (msg string, ok bool) {
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e.tephra.dev/queue=" + queue})
	if err != nil {
		return err.Error(), false
	}
	why := "no pod of queue " + queue + " is pending"
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Message, true
			}
		}
		// A gang's member may not have been tried yet while another was refused (the group
		// then backs off): look on.
		why = "no PodScheduled condition on " + p.Name
	}
	return why, false
}

// deleteSlowly deletes a pod that a finalizer keeps terminating until release is called (or the
// test ends): the room it holds is on its way.
func deleteSlowly(t *testing.T, env *framework.Env, ns, name string) (release func()) {
	t.Helper()
	release = keepTerminating(t, env, ns, name)
	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
	return release
}

// keepTerminating gives a pod a finalizer, so that once deleted it stays terminating until
// release is called (or the test ends).
func keepTerminating(t *testing.T, env *framework.Env, ns, name string) (release func()) {
	t.Helper()
	ctx := context.Background()
	release = func() {
		_, _ = env.Kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	_, err := env.Kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["e2e.tephra.dev/slow-exit"]}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	t.Cleanup(release)
	return release
}

// deleteSteadily deletes the pods prefix-0, prefix-1, … at once, one every half second, for as
// long as during or until count are gone: pod deletions of a busy cluster, each an event that
// brings back the pods waiting for room.
func deleteSteadily(t *testing.T, env *framework.Env, ns, prefix string, count int, during time.Duration) {
	t.Helper()
	for i, start := 0, time.Now(); time.Since(start) < during && i < count; i++ {
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		time.Sleep(500 * time.Millisecond)
	}
}
