package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// orderBound is the test queue's orderBoundSeconds.
const orderBound = 20 * time.Second

// A queue ordered ShortestEstimateFirst with a bound of 20 s, on one GPU held by a blocker: a job
// of 2 minutes (its place: its creation plus the bound), then one of 5 s two seconds later, then,
// more than the bound after the first, one of 1 s. Once the GPU frees, the 5-s job runs first,
// then the first job, which the 1-s one does not pass, though shorter: it came more than the
// bound later. Each release waits out the jobs' backoffs, so that the order is the queue's and
// not the order their backoffs end.
func TestAQueueOrderedByEstimateRunsShortJobsFirstAndPassesNoneOverPastTheBound(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-order"
	pool := units(t, env, gpu, 1, 1)
	framework.CreateQueue(t, env, "order-sef", func(s *schedulingv1alpha1.QueueSpec) {
		s.Order = schedulingv1alpha1.QueueOrderShortestEstimateFirst
		s.OrderBoundSeconds = ptr.To(int32(orderBound / time.Second))
	})
	submit(t, env, ns, 1, "blocker", workPod{queue: "order-sef", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"order-sef": 1}, time.Minute)

	job := func(name string, estimate time.Duration) {
		t.Helper()
		_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 1, Queue: "order-sef", RuntimeEstimateSeconds: ptr.To(int32(estimate / time.Second))},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		submit(t, env, ns, 1, name, workPod{queue: "order-sef", group: name, res: gpu, amount: 1, pool: pool})
	}
	first := time.Now()
	job("long", 2*time.Minute)
	time.Sleep(2 * time.Second)
	job("short", 5*time.Second)
	time.Sleep(time.Until(first.Add(orderBound + 5*time.Second)))
	job("late", time.Second)

	// releaseTo deletes the pod holding the GPU once every waiting job's backoff (at most 10 s
	// for the group, and for the pod) has ended, and waits for the next pod to hold it.
	holder := "blocker-0"
	releaseTo := func(next string) {
		t.Helper()
		time.Sleep(11 * time.Second)
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, holder, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		framework.Eventually(t, time.Minute, next+" to hold the GPU", func() (bool, string) {
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			bound := ""
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					bound += p.Name + " "
				}
			}
			return bound == next+" ", "bound: " + bound
		})
		holder = next
	}
	releaseTo("short-0")
	releaseTo("long-0")
	releaseTo("late-0")
}
