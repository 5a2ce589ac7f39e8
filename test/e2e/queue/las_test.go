package queue

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// lasBound is the test queue's orderBoundSeconds.
const lasBound = 30 * time.Second

// lasUnits is what the test's node offers of its accelerator, and what each of its pods takes:
// 40 000 units for 10 s are 111 accelerator-hours, past the top level (100).
const lasUnits = 40000

// A queue ordered LeastAttainedService with a bound of 30 s, on one node of 40 000 units of an
// accelerator: a gang, "veteran", runs on all of them for 10 s, 111 accelerator-hours, the top
// level; then its pod is deleted, as reclaim or a preemption would, and a blocker takes the units.
// The veteran's pod comes again, as its Job would make it; 2 s later a new gang, "newcomer",
// comes; and more than the bound after the veteran came back, a new gang "late". Once the
// blocker goes, the newcomer runs first, though it came after the veteran (which was created
// long before it); then the veteran, which "late" does not pass though it never ran: it came more
// than the bound after the veteran. Ordered by submission, the veteran would run first. Each
// release waits out the pods' backoffs, so that the order is the queue's and not the order their
// backoffs end, and checks the PodScheduled condition of the pods still waiting.
func TestAQueueOrderedByAttainedServiceRunsNewWorkBeforeWorkThatRanLongAndPassesNoneOverPastTheBound(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-las"
	pool := units(t, env, gpu, 1, lasUnits)
	framework.CreateQueue(t, env, "order-las", func(s *schedulingv1alpha1.QueueSpec) {
		s.Order = schedulingv1alpha1.QueueOrderLeastAttainedService
		s.OrderBoundSeconds = ptr.To(int32(lasBound / time.Second))
	})
	group := func(name string) {
		t.Helper()
		_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 1, Queue: "order-las"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	member := func(prefix, group string) {
		t.Helper()
		submit(t, env, ns, 1, prefix, workPod{queue: "order-las", group: group, res: gpu, amount: lasUnits, pool: pool})
	}
	holders := func() string {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		bound := ""
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				bound += p.Name + " "
			}
		}
		return bound
	}
	waitHolder := func(next string) {
		t.Helper()
		framework.Eventually(t, time.Minute, next+" to hold the accelerator", func() (bool, string) {
			bound := holders()
			return bound == next+" ", "bound: " + bound
		})
	}

	group("veteran")
	member("veteran", "veteran")
	env.WaitPod(t, ns, "veteran-0", time.Minute, "running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.StartTime != nil
	})
	time.Sleep(10 * time.Second)
	submit(t, env, ns, 1, "blocker", workPod{queue: "order-las", res: gpu, amount: lasUnits, pool: pool})
	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, "veteran-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	waitHolder("blocker-0")

	back := time.Now()
	member("veteran-again", "veteran")
	time.Sleep(2 * time.Second)
	group("newcomer")
	member("newcomer", "newcomer")
	time.Sleep(time.Until(back.Add(lasBound + 5*time.Second)))
	group("late")
	member("late", "late")

	// releaseTo deletes the pod holding the accelerator once every waiting pod's backoff (at most
	// 10 s for the group, and for the pod) has ended, and waits for the next pod to hold it; the
	// others still wait, unscheduled.
	holder := "blocker-0"
	waiting := []string{"veteran-again-0", "newcomer-0", "late-0"}
	releaseTo := func(next string) {
		t.Helper()
		time.Sleep(11 * time.Second)
		for _, name := range waiting {
			pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Empty(t, pod.Spec.NodeName, "%s waits while %s holds the accelerator", name, holder)
			require.True(t, unscheduled(pod), "%s says it is not scheduled: %v", name, pod.Status.Conditions)
		}
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, holder, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		waitHolder(next)
		holder = next
		waiting = slices.DeleteFunc(waiting, func(name string) bool { return name == next })
	}
	releaseTo("newcomer-0")
	releaseTo("veteran-again-0")
	releaseTo("late-0")
}

// unscheduled says whether a pod's PodScheduled condition is False.
func unscheduled(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}
