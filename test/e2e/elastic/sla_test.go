package elastic

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// 6. Starvation: on 8 GPUs, a stream of one-GPU jobs (20 s each, a new one every 2 s) keeps the
// cluster busy. An 8-GPU gang waits as long as we watch without an SLA; with
// sla-waiting-time 30s it starts within 30 s plus the longest small job, and the small jobs
// resume afterwards.
func TestSLAEndsStarvation(t *testing.T) {
	c := newClusterOf(t, "sla", 4)
	ctx, cancel := context.WithCancel(context.Background())
	var stream sync.WaitGroup
	stream.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			c.smallJob(ctx, t, fmt.Sprintf("small-%d", i))
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		stream.Wait()
	})
	c.waitBound(t, map[string]int{"small": 8}, time.Minute)

	// Without an SLA the gang starves: watched for 35 s, longer than the SLA below, it never runs.
	c.gang(t, "starved", "", "60s")
	for deadline := time.Now().Add(35 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		got, err := c.bound(context.Background())
		require.NoError(t, err)
		require.Zero(t, got["starved"], "the gang without an SLA got GPUs while small jobs stream in")
	}
	require.NoError(t, c.env.Kube.CoreV1().Pods(c.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=starved"}))
	require.NoError(t, c.env.Tephra.SchedulingV1alpha1().PodGroups(c.ns).Delete(context.Background(), "starved", metav1.DeleteOptions{}))

	// With an SLA of 30 s it starts within 30 s plus the longest small job (20 s), with a few
	// seconds for the simulated pods to start and end.
	created := time.Now()
	c.gang(t, "urgent", "30s", "10s")
	c.waitBound(t, map[string]int{"urgent": 8}, 30*time.Second+20*time.Second+10*time.Second)
	started := time.Since(created)
	t.Logf("the gang with an SLA of 30s started after %v", started.Round(100*time.Millisecond))
	assert.Greater(t, started, 25*time.Second, "the gang started before its SLA ran out: the stream did not keep the cluster busy")
	assert.Less(t, started, 55*time.Second, "the SLA (30 s) plus the longest small job (20 s), and a few seconds for simulated pods to end and start")

	// An event says which nodes were reserved; the recorder writes it after the reservation.
	framework.WaitEventOnAny(t, c.env, c.ns, []string{"urgent"}, "Reserved: the group has waited")
	metrics, err := c.env.Cluster.SchedulerMetrics(context.Background())
	require.NoError(t, err)
	assert.Contains(t, metrics, "tephra_gang_reservations")

	// The reservation ends with the gang placed: small jobs get GPUs again once it is done.
	resumedAfter := time.Now()
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.env.Kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=small"})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.CreationTimestamp.After(resumedAfter) {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "small jobs resume after the gang")
}

// The PodGroup says when it waits past its SLA.
func TestSLAConditionOnPodGroup(t *testing.T) {
	c := newClusterOf(t, "slacond", 1)
	c.gang(t, "waits", "3s", "")
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := c.env.Tephra.SchedulingV1alpha1().PodGroups(c.ns).Get(ctx, "waits", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupSLAExceeded)
		return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "SLA waiting time of 3s"), nil
	})
	require.NoError(t, err, "the group shows SLAExceeded once it waits past 3s")
}

// Two groups past their SLA reserve disjoint nodes: on 4 nodes of 2 GPUs, all busy, two gangs of
// 4 GPUs each reserve 2 nodes, none of them the other's; once the small jobs are gone both run,
// each on its own nodes.
func TestSLAReservationsAreDisjoint(t *testing.T) {
	c := newClusterOf(t, "sladisjoint", 4)
	ctx := context.Background()
	for i := range 8 {
		c.smallJob(ctx, t, fmt.Sprintf("small-%d", i))
	}
	c.waitBound(t, map[string]int{"small": 8}, time.Minute)
	// Small jobs run 20 s: remove them by hand instead, once both gangs hold their nodes.
	c.gangOf(t, "first", 4, "3s", "")
	c.gangOf(t, "second", 4, "3s", "")

	reserved := map[string][]string{}
	for _, gang := range []string{"first", "second"} {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			events := c.env.Events(c.ns, gang)
			_, nodes, found := strings.Cut(events, ": nodes ")
			if !found {
				return false, nil
			}
			nodes, _, _ = strings.Cut(nodes, " are reserved")
			reserved[gang] = strings.Split(nodes, ", ")
			return true, nil
		})
		require.NoError(t, err, "group %s reserves nodes once past its SLA; events: %s", gang, c.env.Events(c.ns, gang))
	}
	require.Len(t, reserved["first"], 2, "4 GPUs on nodes of 2")
	require.Len(t, reserved["second"], 2, "4 GPUs on nodes of 2")
	for _, node := range reserved["first"] {
		assert.NotContains(t, reserved["second"], node, "both groups reserved node %s", node)
	}

	require.NoError(t, c.env.Kube.CoreV1().Pods(c.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=small"}))
	c.waitBound(t, map[string]int{"first": 4, "second": 4}, time.Minute)
	for gang, nodes := range reserved {
		pods, err := c.env.Kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=" + gang})
		require.NoError(t, err)
		for _, pod := range pods.Items {
			assert.Contains(t, nodes, pod.Spec.NodeName, "pod %s runs on its group's reserved nodes", pod.Name)
		}
	}
}

// smallJob is a one-GPU pod that runs 20 s.
func (c *cluster) smallJob(ctx context.Context, t *testing.T, name string) {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns,
			Labels:      map[string]string{schedulingv1alpha1.QueueLabel: c.q1, "e2e.tephra.dev/job": "small"},
			Annotations: map[string]string{"sim.tephra.dev/duration": "20s"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: c.pool,
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{c.gpu: one}, Limits: corev1.ResourceList{c.gpu: one},
			}}},
		},
	}
	if _, err := c.env.Kube.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
		t.Errorf("creating %s: %v", name, err)
	}
}

// gang submits an 8-GPU gang (8 one-GPU pods, minMember 8) with an SLA waiting time ("" for
// none) whose pods run for duration.
func (c *cluster) gang(t *testing.T, name, sla, duration string) {
	t.Helper()
	c.gangOf(t, name, 8, sla, duration)
}

// gangOf submits a gang of size one-GPU pods, all of them its minimum.
func (c *cluster) gangOf(t *testing.T, name string, size int, sla, duration string) {
	t.Helper()
	pg := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(size), Queue: c.q1, ScheduleTimeoutSeconds: new(int32(10)),
			MinResources: corev1.ResourceList{c.gpu: *resource.NewQuantity(int64(size), resource.DecimalSI)}},
	}
	if sla != "" {
		pg.Annotations = map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: sla}
	}
	_, err := c.env.Tephra.SchedulingV1alpha1().PodGroups(c.ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
	one := *resource.NewQuantity(1, resource.DecimalSI)
	for i := range size {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: c.ns,
				Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: name, "e2e.tephra.dev/job": name}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: c.pool,
				Containers: []corev1.Container{{Name: "train", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{c.gpu: one}, Limits: corev1.ResourceList{c.gpu: one},
				}}},
			},
		}
		if duration != "" {
			pod.Annotations = map[string]string{"sim.tephra.dev/duration": duration}
		}
		_, err := c.env.Kube.CoreV1().Pods(c.ns).Create(context.Background(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}
