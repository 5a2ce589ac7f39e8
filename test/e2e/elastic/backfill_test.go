package elastic

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Backfill around a reservation, on 2 nodes of 2 GPUs: a job of 2 GPUs estimated at 45 s runs;
// a 4-GPU gang waits past its SLA (3 s), so both nodes are reserved for it and it may start when
// that job ends. A pod whose activeDeadlineSeconds (20 s) ends before then runs in the hole; a
// pod without an estimate waits, though a GPU is free. The gang starts once the estimated job has
// ended, with the backfilled pod already gone.
func TestShortEstimatedJobsBackfillAReservation(t *testing.T) {
	c := newClusterOf(t, "backfill", 2)
	backfillAReservation(t, c, "3s", "Reserved: the group has waited")
}

// The same with queueHeadReservations on (scheduler restarted with it, off again after the test)
// and no SLA: the 4-GPU gang at the head of its queue, which cannot fit, reserves both nodes at
// once. The pod without an estimate, which would otherwise run on the free GPU at once, waits.
func TestTheHeadOfAQueueReservesWithoutAnSLA(t *testing.T) {
	c := newClusterOf(t, "headres", 2)
	framework.WithSchedulerPluginArgs(t, c.env, "TephraGang", map[string]any{"queueHeadReservations": true})
	backfillAReservation(t, c, "", fmt.Sprintf("Reserved: the group heads queue %q and its minimum cannot fit now", c.q1))
}

// backfillAReservation is the scenario of both tests above: the gang has an SLA (none when
// sla is "") and reserves the nodes with the event reserved.
func backfillAReservation(t *testing.T, c *cluster, sla, reserved string) {
	t.Helper()
	ctx := context.Background()

	_, err := c.env.Tephra.SchedulingV1alpha1().PodGroups(c.ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: c.ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2, Queue: c.q1, RuntimeEstimateSeconds: new(int32(45))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 2 {
		c.onePod(t, fmt.Sprintf("train-%d", i), "train", "35s", nil)
	}
	c.waitBound(t, map[string]int{"train": 2}, time.Minute)

	c.gangOf(t, "big", 4, sla, "10s")
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(c.env.Events(c.ns, "big"), reserved), nil
	})
	require.NoError(t, err, "the gang reserves both nodes; events: %s", c.env.Events(c.ns, "big"))

	c.onePod(t, "short", "", "10s", new(int64(20)))
	c.onePod(t, "unestimated", "", "5s", nil)
	c.waitBound(t, map[string]int{"short": 1, "big": 0}, 30*time.Second)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := c.env.Kube.CoreV1().Pods(c.ns).Get(ctx, "unestimated", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && strings.Contains(cond.Message, "the pod has no runtime estimate, so it does not backfill the reservation") {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the pod without an estimate says why it waits beside a free GPU")
	// The gang's events name the pod in its hole; the recorder writes the event after the bind.
	framework.WaitEventOnAny(t, c.env, c.ns, []string{"big"}, fmt.Sprintf("Backfilled: pod %s/short runs on reserved node", c.ns))

	c.waitBound(t, map[string]int{"big": 4}, 2*time.Minute)
	pods, err := c.env.Kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var trainEnded, shortEnded, bigStarted, unestimatedStarted time.Time
	for _, pod := range pods.Items {
		switch job := pod.Labels["e2e.tephra.dev/job"]; job {
		case "train", "short":
			end := finishedAt(t, &pod)
			if job == "short" {
				shortEnded = end
			} else if end.After(trainEnded) {
				trainEnded = end
			}
		case "big", "unestimated":
			if at := scheduledAt(&pod); job == "unestimated" {
				unestimatedStarted = at
			} else if bigStarted.IsZero() || at.Before(bigStarted) {
				bigStarted = at
			}
		}
	}
	t.Logf("train ended at %v, short at %v; big started at %v", trainEnded, shortEnded, bigStarted)
	assert.False(t, shortEnded.After(trainEnded), "the backfilled pod ended before the job the gang waited for")
	assert.False(t, bigStarted.Before(trainEnded), "the gang could not start before the estimated job ended")
	assert.True(t, unestimatedStarted.IsZero() || !unestimatedStarted.Before(bigStarted), "the pod without an estimate ran only after the gang started")

	metrics, err := c.env.Cluster.SchedulerMetrics(ctx)
	require.NoError(t, err)
	assert.Regexp(t, `tephra_gang_backfilled_pods_total [1-9]`, metrics)
}

// onePod submits a one-GPU pod of job (or of a group of that name when group is set) that runs
// for duration, with an activeDeadlineSeconds when deadline is set.
func (c *cluster) onePod(t *testing.T, name, group, duration string, deadline *int64) {
	t.Helper()
	job := group
	labels := map[string]string{schedulingv1alpha1.QueueLabel: c.q1}
	if group != "" {
		labels[schedulingv1alpha1.PodGroupLabel] = group
	} else {
		job = name
	}
	labels["e2e.tephra.dev/job"] = job
	one := *resource.NewQuantity(1, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns, Labels: labels,
			Annotations: map[string]string{"sim.tephra.dev/duration": duration}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: c.pool,
			ActiveDeadlineSeconds: deadline,
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{c.gpu: one}, Limits: corev1.ResourceList{c.gpu: one},
			}}},
		},
	}
	_, err := c.env.Kube.CoreV1().Pods(c.ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// finishedAt is when the pod's container ended, as kwok reports it.
func finishedAt(t *testing.T, pod *corev1.Pod) time.Time {
	t.Helper()
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return s.State.Terminated.FinishedAt.Time
		}
	}
	t.Fatalf("pod %s has not ended: phase %s", pod.Name, pod.Status.Phase)
	return time.Time{}
}

// scheduledAt is when the pod was bound: its PodScheduled condition's transition.
func scheduledAt(pod *corev1.Pod) time.Time {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
