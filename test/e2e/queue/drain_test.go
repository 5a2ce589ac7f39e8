package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// drainHogRan is how long the hog's pods run before the whole-node pod comes. Patience then
// keeps that pod from reclaiming the two pods of a node until it has waited drainHogRan, and the
// one left there after the other ends until it has waited half of it: the test's steps in
// between must fit in that half.
const drainHogRan = 40 * time.Second

// With TephraQueue's reclaimDrain (the scheduler restarted with it, and without it after the
// test), four 1-unit pods of one queue hold both 2-unit nodes of two equal queues, and a 2-unit
// pod of the other queue comes drainHogRan later. Patience keeps it from reclaiming, so it holds
// a node instead, evicting nobody, and says so. A hog pod there ends, and another of the hog's
// queue, submitted then, does not take the unit it left (without the hold it would). When patience
// runs out the pod reclaims the one pod left on its node, not two.
func TestReclaimDrainHoldsTheNodeWhilePatienceWaits(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	framework.WithSchedulerPluginArgs(t, env, "TephraQueue", map[string]any{"reclaimPatience": true, "reclaimDrain": true})
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-drain"
	pool := units(t, env, gpu, 2, 2)
	framework.CreateQueue(t, env, "drain-hog", nil)
	framework.CreateQueue(t, env, "drain-waiting", nil)

	submit(t, env, ns, 4, "hog", workPod{queue: "drain-hog", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"drain-hog": 4}, time.Minute)
	time.Sleep(drainHogRan)
	submit(t, env, ns, 1, "whole", workPod{queue: "drain-waiting", res: gpu, amount: 2, pool: pool})

	var node string
	framework.Eventually(t, drainHogRan/6, "the whole-node pod to hold a node", func() (bool, string) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "whole-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = pod.Status.NominatedNodeName
		msg := scheduledMessage(pod)
		return node != "" && strings.Contains(msg, "node "+node+" is held for the pod while it drains"), "nominated " + node + ": " + msg
	})
	assert.Zero(t, countEvents(t, env, ns, "Reclaimed"), "holding a node evicts nobody")

	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e.tephra.dev/queue=drain-hog"})
	require.NoError(t, err)
	ended := ""
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			ended = p.Name
			break
		}
	}
	require.NotEmpty(t, ended, "a hog pod on node %s", node)
	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), ended, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	submit(t, env, ns, 1, "hog-more", workPod{queue: "drain-hog", res: gpu, amount: 1, pool: pool})
	framework.HoldBound(t, env, ns, map[string]int{"drain-hog": 3, "drain-waiting": 0}, 4*time.Second)

	framework.WaitBound(t, env, ns, map[string]int{"drain-hog": 2, "drain-waiting": 1}, drainHogRan+30*time.Second)
	whole, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "whole-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, node, whole.Spec.NodeName, "the pod runs on the node it held")
	assert.Equal(t, 1, waitEvents(t, env, ns, "Reclaimed", 1), "only the pod left on the held node is reclaimed")
}

// scheduledMessage is a pod's PodScheduled message.
func scheduledMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}
