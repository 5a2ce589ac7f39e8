package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A queue past its deserved share is held for another queue's waiting gang only when the gang
// could use the room the hold keeps free, on the nodes as they are. On 4 nodes of 4 GPUs, queue
// hold-a (never reclaimed) runs a 3-GPU pod on each node; hold-b's gang of 2-GPU pods (minimum 2)
// deserves half the cluster and fits in it in total, but no node has 2 GPUs free. hold-a's 1-GPU
// pod, past its share, runs on a free GPU beside them. Then one of hold-a's big pods is deleted
// and kept terminating (a finalizer) on a node with nothing else: once it is gone, the gang fits
// there, so hold-a's next 1-GPU pod waits, and says for whom; the gang starts when the pod is
// gone, and the 1-GPU pod after it.
func TestASmallJobPastItsShareRunsOnlyWhenTheWaitingGangCouldNotUseTheRoom(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-hold"
	pool := units(t, env, gpu, 4, 4)
	framework.CreateQueue(t, env, "hold-a", func(s *schedulingv1alpha1.QueueSpec) { s.Reclaimable = new(false) })
	framework.CreateQueue(t, env, "hold-b", nil)

	submit(t, env, ns, 4, "big", workPod{queue: "hold-a", res: gpu, amount: 3, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"hold-a": 4}, time.Minute)
	createGroup(t, env, ns, "gang", "hold-b", 2, nil)
	submit(t, env, ns, 4, "gang", workPod{queue: "hold-b", group: "gang", res: gpu, amount: 2, pool: pool})

	submit(t, env, ns, 1, "small", workPod{queue: "hold-a", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"hold-a": 5, "hold-b": 0}, 30*time.Second)

	// A big pod on a node without the small one goes, slowly.
	small, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "small-0", metav1.GetOptions{})
	require.NoError(t, err)
	var going string
	for i := range 4 {
		big, err := env.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("big-%d", i), metav1.GetOptions{})
		require.NoError(t, err)
		if big.Spec.NodeName != small.Spec.NodeName {
			going = big.Name
			break
		}
	}
	release := deleteSlowly(t, env, ns, going)

	submit(t, env, ns, 1, "later", workPod{queue: "hold-a", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, 30*time.Second, "hold-a's later pod to name the gang it yields to", func() (bool, string) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "later-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return strings.Contains(c.Message, fmt.Sprintf(`it yields to pod group %s/gang of queue "hold-b", which could use the room`, ns)), c.Message
			}
		}
		return false, "no PodScheduled condition"
	})
	framework.HoldBound(t, env, ns, map[string]int{"hold-a": 4, "hold-b": 0}, 5*time.Second)

	// The gang's minimum takes the node; its other members, one 2-GPU pod at a time, fit nowhere
	// then, and the later pod runs on a free GPU.
	release()
	framework.WaitBound(t, env, ns, map[string]int{"hold-a": 5, "hold-b": 2}, time.Minute)
}
