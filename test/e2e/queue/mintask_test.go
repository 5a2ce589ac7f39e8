package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A job's only master is part of its minimum even while the job runs more workers than its
// minMember: another gang's minimum preempts the extra workers, never the master, though the
// master is the least important pod on the nodes (lower priority).
func TestElasticPreemptionNeverTakesATaskBelowItsMinimum(t *testing.T) {
	env := framework.Shared(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-mintask"
	pool := units(t, env, gpu, 4, 1)
	framework.CreateQueue(t, env, "mintask", nil)
	for name, value := range map[string]int32{"e2e-mintask-low": 10, "e2e-mintask-high": 20} {
		_, err := env.Kube.SchedulingV1().PriorityClasses().Create(ctx, &schedulingapi.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Kube.SchedulingV1().PriorityClasses().Delete(ctx, name, metav1.DeleteOptions{}) })
	}

	// The job: minMember 2 with one master required; it runs the master and three workers.
	job := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2, Queue: "mintask",
			MinTaskMember: map[string]int32{"master": 1}},
	}
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	member := func(name, task, priorityClass string) {
		pod := workPod{name: name, group: "job", queue: "mintask", res: gpu, amount: 1, pool: pool, priorityClass: priorityClass}.build(ns)
		pod.Labels[schedulingv1alpha1.TaskLabel] = task
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	member("master", "master", "e2e-mintask-low")
	for _, name := range []string{"worker-0", "worker-1", "worker-2"} {
		member(name, "worker", "e2e-mintask-high")
	}
	framework.WaitBound(t, env, ns, map[string]int{"mintask": 4}, time.Minute)

	// Another gang of the queue needs two GPUs for its minimum.
	createGroup(t, env, ns, "other", "mintask", 2, nil)
	submit(t, env, ns, 2, "other", workPod{group: "other", queue: "mintask", res: gpu, amount: 1, pool: pool, priorityClass: "e2e-mintask-high"})
	waitGroupPhase(t, env, ns, "other", schedulingv1alpha1.PodGroupRunning)

	master, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "master", metav1.GetOptions{})
	require.NoError(t, err, "the master was evicted")
	require.Nil(t, master.DeletionTimestamp, "the master is being evicted")
	require.NotEmpty(t, master.Spec.NodeName)
	framework.Eventually(t, 30*time.Second, "two workers preempted, one left", func() (bool, string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedulingv1alpha1.TaskLabel + "=worker"})
		if err != nil {
			return false, err.Error()
		}
		live := 0
		for _, pod := range list.Items {
			if pod.DeletionTimestamp == nil {
				live++
			}
		}
		return live == 1, env.Events(ns, "master")
	})
}
