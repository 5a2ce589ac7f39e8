package queue

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
	schedulingapi "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A queue with a capability of 4 CPUs never has more than 4 CPUs of pods bound, sampled
// throughout a burst of 1000 short pods on nodes with room for many more.
func TestCapabilityHoldsUnderBurst(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := units(t, env, "e2e.tephra.dev/cap-pool", 4, 1)
	framework.CreateQueue(t, env, "capped", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var peak, samples int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for ctx.Err() == nil {
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				var milli int64
				for _, pod := range pods.Items {
					if pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
						milli += pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
					}
				}
				mu.Lock()
				peak, samples = max(peak, milli), samples+1
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	const burst = 1000
	var creators sync.WaitGroup
	for c := range 4 {
		creators.Go(func() {
			for i := c; i < burst; i += 4 {
				w := workPod{name: fmt.Sprintf("p-%d", i), queue: "capped", cpu: "100m", pool: pool, duration: "1s"}
				_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), w.build(ns), metav1.CreateOptions{})
				assert.NoError(t, err)
			}
		})
	}
	creators.Wait()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		done := 0
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodSucceeded {
				done++
			}
		}
		return done == burst, nil
	})
	cancel()
	sampler.Wait()
	require.NoError(t, err, "all %d pods run to completion", burst)
	t.Logf("peak CPU bound in the queue: %dm over %d samples", peak, samples)
	assert.LessOrEqual(t, peak, int64(4000), "the queue's capability was exceeded")
	assert.GreaterOrEqual(t, peak, int64(3000), "the burst never came near the capability: the test proves nothing")
	assert.Greater(t, samples, int64(50))
}

// A closed queue runs nothing new and says why; opening it lets its work run. Missing and
// non-leaf queues hold workloads back with a reason too; a missing queue created runs its pod.
func TestClosedMissingAndParentQueues(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-closed"
	pool := units(t, env, gpu, 1, 4)
	framework.CreateQueue(t, env, "closed-team", func(s *schedulingv1alpha1.QueueSpec) { s.State = schedulingv1alpha1.QueueClosed })
	framework.CreateQueue(t, env, "closed-parent", nil)
	framework.CreateQueue(t, env, "closed-child", func(s *schedulingv1alpha1.QueueSpec) { s.Parent = "closed-parent" })

	submit(t, env, ns, 1, "closed", workPod{queue: "closed-team", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 1, "missing", workPod{queue: "no-such-queue", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 1, "parent", workPod{queue: "closed-parent", res: gpu, amount: 1, pool: pool})
	createGroup(t, env, ns, "closed-gang", "closed-team", 2, nil)
	submit(t, env, ns, 2, "gang", workPod{group: "closed-gang", queue: "closed-team", res: gpu, amount: 1, pool: pool})

	for pod, want := range map[string]string{
		"closed-0":  `QueueUnavailable: queue "closed-team" is closed`,
		"missing-0": `queue "no-such-queue" does not exist`,
		"parent-0":  `queue "closed-parent" has child queues; only leaf queues hold workloads`,
	} {
		waitEvent(t, env, ns, pod, want)
	}
	waitGroupCondition(t, env, ns, "closed-gang", schedulingv1alpha1.ReasonQueueUnavailable, `queue "closed-team" is closed`)
	framework.HoldBound(t, env, ns, map[string]int{"closed-team": 0, "no-such-queue": 0, "closed-parent": 0}, 3*time.Second)

	q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(context.Background(), "closed-team", metav1.GetOptions{})
	require.NoError(t, err)
	q.Spec.State = schedulingv1alpha1.QueueOpen
	_, err = env.Tephra.SchedulingV1alpha1().Queues().Update(context.Background(), q, metav1.UpdateOptions{})
	require.NoError(t, err)
	framework.WaitBound(t, env, ns, map[string]int{"closed-team": 3}, time.Minute)
	waitGroupPhase(t, env, ns, "closed-gang", schedulingv1alpha1.PodGroupRunning)

	// The missing queue created, its pod runs.
	framework.CreateQueue(t, env, "no-such-queue", nil)
	framework.WaitBound(t, env, ns, map[string]int{"closed-team": 3, "no-such-queue": 1}, time.Minute)
}

// A queue tree closes as a tree: closing a parent holds the new workloads of every queue below
// it, a child opened meanwhile included, and says why; what runs goes on. Opening the parent lets
// them run.
func TestClosedParentHoldsItsChildren(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-tree"
	pool := units(t, env, gpu, 1, 8)
	framework.CreateQueue(t, env, "tree-parent", nil)
	framework.CreateQueue(t, env, "tree-child", func(s *schedulingv1alpha1.QueueSpec) { s.Parent = "tree-parent" })
	framework.CreateQueue(t, env, "tree-reopened", func(s *schedulingv1alpha1.QueueSpec) {
		s.Parent, s.State = "tree-parent", schedulingv1alpha1.QueueClosed
	})

	submit(t, env, ns, 1, "before", workPod{queue: "tree-child", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"tree-child": 1}, time.Minute)

	setQueueState(t, env, "tree-parent", schedulingv1alpha1.QueueClosed)
	waitQueueCondition(t, env, "tree-child", "Open", metav1.ConditionFalse, "ParentClosed", `parent queue "tree-parent" is closed`)
	setQueueState(t, env, "tree-reopened", schedulingv1alpha1.QueueOpen)
	waitQueueCondition(t, env, "tree-reopened", "Open", metav1.ConditionFalse, "ParentClosed", `parent queue "tree-parent" is closed`)

	submit(t, env, ns, 1, "after", workPod{queue: "tree-child", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 1, "reopened", workPod{queue: "tree-reopened", res: gpu, amount: 1, pool: pool})
	createGroup(t, env, ns, "tree-gang", "tree-child", 2, nil)
	submit(t, env, ns, 2, "gang", workPod{group: "tree-gang", queue: "tree-child", res: gpu, amount: 1, pool: pool})
	waitEvent(t, env, ns, "after-0", `QueueUnavailable: parent queue "tree-parent" is closed`)
	waitEvent(t, env, ns, "reopened-0", `QueueUnavailable: parent queue "tree-parent" is closed`)
	waitGroupCondition(t, env, ns, "tree-gang", schedulingv1alpha1.ReasonQueueUnavailable, `parent queue "tree-parent" is closed`)
	// What ran before goes on: one pod bound in tree-child, none new anywhere below the parent.
	framework.HoldBound(t, env, ns, map[string]int{"tree-child": 1, "tree-reopened": 0}, 3*time.Second)
	before, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "before-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, before.DeletionTimestamp, "closing the parent evicts nothing")

	setQueueState(t, env, "tree-parent", schedulingv1alpha1.QueueOpen)
	waitQueueCondition(t, env, "tree-child", "Open", metav1.ConditionTrue, "Open", "")
	framework.WaitBound(t, env, ns, map[string]int{"tree-child": 4, "tree-reopened": 1}, time.Minute)
	waitGroupPhase(t, env, ns, "tree-gang", schedulingv1alpha1.PodGroupRunning)
}

func setQueueState(t *testing.T, env *framework.Env, name string, state schedulingv1alpha1.QueueState) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.State = state
		_, err = env.Tephra.SchedulingV1alpha1().Queues().Update(context.Background(), q, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// waitQueueCondition waits until the Queue controller reports the condition on the queue.
func waitQueueCondition(t *testing.T, env *framework.Env, name, condition string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	framework.Eventually(t, time.Minute, fmt.Sprintf("queue %s: condition %s=%s (%s)", name, condition, status, reason), func() (bool, string) {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(q.Status.Conditions, condition)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == status && c.Reason == reason && strings.Contains(c.Message, message), fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
}

// A gang enters its queue only when its minimum fits under the queue's capability; one larger
// than the capability is told so and does not block the queue.
func TestGangAdmission(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-gang"
	pool := units(t, env, gpu, 4, 2)
	framework.CreateQueue(t, env, "gangs", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{gpu: resource.MustParse("4")}
	})
	submit(t, env, ns, 2, "solo", workPod{queue: "gangs", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"gangs": 2}, time.Minute)

	// Needs 3 of the 2 left under the capability: it waits whole, holding nothing.
	createGroup(t, env, ns, "fits-later", "gangs", 3, corev1.ResourceList{gpu: resource.MustParse("3")})
	submit(t, env, ns, 3, "later", workPod{group: "fits-later", queue: "gangs", res: gpu, amount: 1, pool: pool})
	// Needs 6 where the capability is 4: it can never run there.
	createGroup(t, env, ns, "too-big", "gangs", 6, corev1.ResourceList{gpu: resource.MustParse("6")})
	submit(t, env, ns, 6, "big", workPod{group: "too-big", queue: "gangs", res: gpu, amount: 1, pool: pool})

	waitGroupCondition(t, env, ns, "fits-later", schedulingv1alpha1.ReasonQueueCapability, `capability of queue "gangs"`)
	waitGroupCondition(t, env, ns, "too-big", schedulingv1alpha1.ReasonNeverFits, "it can never run there")
	// A member carries the event (each is refused once, and after that only the group's pilot is
	// tried).
	framework.WaitEventOnAny(t, env, ns, []string{"big-0", "big-1", "big-2", "big-3", "big-4", "big-5"}, "ExceedsQueueCapability")
	framework.HoldBound(t, env, ns, map[string]int{"gangs": 2}, 3*time.Second)
	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "fits-later", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, schedulingv1alpha1.PodGroupPending, group.Status.Phase)

	// The queue is not blocked: a pod that fits runs beside the waiting gangs.
	submit(t, env, ns, 1, "small", workPod{queue: "gangs", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"gangs": 3}, time.Minute)

	// Once the plain pods are gone, the gang's minimum fits and runs whole.
	for _, name := range []string{"solo-0", "solo-1", "small-0"} {
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	waitGroupPhase(t, env, ns, "fits-later", schedulingv1alpha1.PodGroupRunning)
	framework.WaitBound(t, env, ns, map[string]int{"gangs": 3}, time.Minute)
}

// A higher-priority pod preempts a lower-priority pod of its own queue, and only of its own queue,
// when its queue is at its deserved share.
func TestInQueuePreemption(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-preempt"
	pool := units(t, env, gpu, 2, 2)
	framework.CreateQueue(t, env, "prio-a", nil)
	framework.CreateQueue(t, env, "prio-b", nil)
	_, err := env.Kube.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingapi.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-queue-high"}, Value: 1000,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), "e2e-queue-high", metav1.DeleteOptions{})
	})

	submit(t, env, ns, 2, "a-low", workPod{queue: "prio-a", res: gpu, amount: 1, pool: pool})
	submit(t, env, ns, 2, "b-low", workPod{queue: "prio-b", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"prio-a": 2, "prio-b": 2}, time.Minute)
	submit(t, env, ns, 1, "a-high", workPod{queue: "prio-a", res: gpu, amount: 1, pool: pool, priorityClass: "e2e-queue-high"})
	env.WaitPod(t, ns, "a-high-0", time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	framework.WaitBound(t, env, ns, map[string]int{"prio-a": 2, "prio-b": 2}, time.Minute)
	framework.HoldBound(t, env, ns, map[string]int{"prio-a": 2, "prio-b": 2}, 5*time.Second)
	assert.Equal(t, 2, livePods(t, env, ns, "prio-b"), "no pod of the other queue was preempted")
	assert.Equal(t, 2, livePods(t, env, ns, "prio-a"), "exactly one low-priority pod of the queue was preempted")
	waitEvents(t, env, ns, "Preempted", 1)
	assert.Contains(t, eventsOfAll(t, env, ns, "Preempted"), `of higher priority in queue "prio-a"`)
}

// Killing tephra-controllers and tephra-scheduler mid-run, and changing pods while they are down,
// leaves Queue status equal to what the pods say once they are back.
func TestStatusSurvivesRestarts(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-restart"
	pool := units(t, env, gpu, 2, 4)
	framework.CreateQueue(t, env, "restart-q", nil)
	submit(t, env, ns, 5, "before", workPod{queue: "restart-q", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"restart-q": 5}, time.Minute)
	framework.WaitQueueStatus(t, env, "restart-q", 30*time.Second, "allocated 5", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, gpu) == 5
	})

	env.Cluster.KillComponent(localcluster.Controllers)
	env.Cluster.KillComponent(localcluster.Scheduler)
	for _, name := range []string{"before-0", "before-1"} {
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	submit(t, env, ns, 2, "during", workPod{queue: "restart-q", res: gpu, amount: 1, pool: pool})
	require.NoError(t, env.Cluster.StartComponent(context.Background(), localcluster.Controllers))
	require.NoError(t, env.Cluster.StartComponent(context.Background(), localcluster.Scheduler))

	framework.WaitBound(t, env, ns, map[string]int{"restart-q": 5}, time.Minute)
	q := framework.WaitQueueStatus(t, env, "restart-q", time.Minute, "allocated what the bound pods request", func(q *schedulingv1alpha1.Queue) bool {
		return framework.AmountOf(q.Status.Allocated, gpu) == 5 && q.Status.Running == 5 && q.Status.Pending == 0
	})
	assert.Equal(t, int64(5), framework.AmountOf(q.Status.Deserved, gpu))
}

func createGroup(t *testing.T, env *framework.Env, ns, name, queue string, minMember int32, minResources corev1.ResourceList) {
	t.Helper()
	pg := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue, MinResources: minResources},
	}
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

func waitEvent(t *testing.T, env *framework.Env, ns, object, want string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = env.Events(ns, object)
		return strings.Contains(last, want), nil
	})
	require.NoError(t, err, "event on %s containing %q; events: %s", object, want, last)
}

func waitGroupCondition(t *testing.T, env *framework.Env, ns, name, reason, message string) {
	t.Helper()
	var last *schedulingv1alpha1.PodGroup
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pg
		c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && strings.Contains(c.Message, message), nil
	})
	require.NoError(t, err, "pod group %s: condition %s containing %q; last status %+v", name, reason, message, last)
}

func waitGroupPhase(t *testing.T, env *framework.Env, ns, name string, phase schedulingv1alpha1.PodGroupPhase) {
	t.Helper()
	var last schedulingv1alpha1.PodGroupPhase
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pg.Status.Phase
		return last == phase, nil
	})
	require.NoError(t, err, "pod group %s: phase %s, last %s", name, phase, last)
}
