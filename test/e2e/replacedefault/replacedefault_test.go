package replacedefault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// systemClusterCritical is the built-in PriorityClass of cluster add-ons (2000000000).
const systemClusterCritical = "system-cluster-critical"

// Pods that name no scheduler are placed by Tephra and count in the default queue (or the queue
// their label names), as do tephra-scheduler's; Queue status shows them. A kube-system pod is
// placed and counts nowhere.
func TestDefaultSchedulerPodsCountInQueues(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/rd-count"
	pool := units(t, env, res, 2, 4)
	createQueue(t, env, "rd-team", nil)

	for _, name := range []string{"plain-0", "plain-1", "plain-2"} {
		pod := create(t, env, ns, plainPod{name: name, res: res, amount: 1, pool: pool})
		assert.Equal(t, "default-scheduler", pod.Spec.SchedulerName, "the apiserver defaults the scheduler name")
	}
	create(t, env, ns, plainPod{name: "team-0", queue: "rd-team", res: res, amount: 2, pool: pool})
	tephra := plainPod{name: "tephra-0", res: res, amount: 1, pool: pool}.build(ns)
	tephra.Spec.SchedulerName = schedulingv1alpha1.SchedulerName
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), tephra, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, env, metav1.NamespaceSystem, plainPod{name: "rd-count-addon", res: res, amount: 1, pool: pool})

	for _, name := range []string{"plain-0", "plain-1", "plain-2", "team-0", "tephra-0"} {
		waitBound(t, env, ns, name)
	}
	waitBound(t, env, metav1.NamespaceSystem, "rd-count-addon")
	waitAllocated(t, env, schedulingv1alpha1.DefaultQueue, res, 4) // three plain pods and tephra-scheduler's
	waitAllocated(t, env, "rd-team", res, 2)
	waitAllocatedStays(t, env, schedulingv1alpha1.RootQueue, res, 6) // not the kube-system pod
}

// The default queue's capability holds plain pods back as it does Tephra's; system pods go past
// it and do not count in it.
func TestDefaultQueueCapabilityHoldsPlainPods(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/rd-capability"
	pool := units(t, env, res, 1, 8)
	changeDefaultQueue(t, env, func(spec *schedulingv1alpha1.QueueSpec) {
		spec.Capability = corev1.ResourceList{res: *resourceQuantity(2)}
	})

	for _, name := range []string{"plain-0", "plain-1"} {
		create(t, env, ns, plainPod{name: name, res: res, amount: 1, pool: pool})
		waitBound(t, env, ns, name)
	}
	create(t, env, ns, plainPod{name: "plain-2", res: res, amount: 1, pool: pool})
	waitHeld(t, env, ns, "plain-2", schedulingv1alpha1.ReasonQueueCapability)
	waitAllocated(t, env, schedulingv1alpha1.DefaultQueue, res, 2)

	create(t, env, metav1.NamespaceSystem, plainPod{name: "rd-capability-addon", res: res, amount: 1, pool: pool})
	create(t, env, ns, plainPod{name: "critical", res: res, amount: 1, pool: pool, priorityClass: systemClusterCritical})
	waitBound(t, env, metav1.NamespaceSystem, "rd-capability-addon")
	waitBound(t, env, ns, "critical")
	waitAllocatedStays(t, env, schedulingv1alpha1.DefaultQueue, res, 2)
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "plain-2", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "the plain pod is still held at the default queue's capability")
}

// While the default queue is closed, and while it does not exist, plain pods wait and system pods
// are placed.
func TestSystemPodsRunWhileTheDefaultQueueIsUnavailable(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/rd-closed"
	pool := units(t, env, res, 1, 8)
	changeDefaultQueue(t, env, func(spec *schedulingv1alpha1.QueueSpec) { spec.State = schedulingv1alpha1.QueueClosed })

	create(t, env, ns, plainPod{name: "plain", res: res, amount: 1, pool: pool})
	waitHeld(t, env, ns, "plain", schedulingv1alpha1.ReasonQueueUnavailable)
	create(t, env, metav1.NamespaceSystem, plainPod{name: "rd-closed-addon", res: res, amount: 1, pool: pool})
	create(t, env, ns, plainPod{name: "critical", res: res, amount: 1, pool: pool, priorityClass: systemClusterCritical})
	waitBound(t, env, metav1.NamespaceSystem, "rd-closed-addon")
	waitBound(t, env, ns, "critical")

	// Gone altogether (the controllers create it only when they start): the same.
	queues := env.Tephra.SchedulingV1alpha1().Queues()
	saved, err := queues.Get(context.Background(), schedulingv1alpha1.DefaultQueue, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, queues.Delete(context.Background(), schedulingv1alpha1.DefaultQueue, metav1.DeleteOptions{}))
	t.Cleanup(func() {
		restored := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels}, Spec: saved.Spec}
		restored.Spec.State = schedulingv1alpha1.QueueOpen
		_, _ = queues.Create(context.Background(), restored, metav1.CreateOptions{})
	})
	create(t, env, metav1.NamespaceSystem, plainPod{name: "rd-missing-addon", res: res, amount: 1, pool: pool})
	waitBound(t, env, metav1.NamespaceSystem, "rd-missing-addon")
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "plain", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "the plain pod waits for its queue")
}

// A plain pod of higher priority evicts lower-priority plain pods when nothing else fits, as
// under kube-scheduler; pods of equal priority stay.
func TestPlainPodPreemptsLowerPriority(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/rd-preempt"
	pool := units(t, env, res, 1, 2)
	framework.PriorityClass(t, env, "e2e-rd-low", 100)
	framework.PriorityClass(t, env, "e2e-rd-high", 1000)

	create(t, env, ns, plainPod{name: "low-0", res: res, amount: 1, pool: pool, priorityClass: "e2e-rd-low"})
	create(t, env, ns, plainPod{name: "low-1", res: res, amount: 1, pool: pool, priorityClass: "e2e-rd-low"})
	waitBound(t, env, ns, "low-0")
	waitBound(t, env, ns, "low-1")
	create(t, env, ns, plainPod{name: "equal", res: res, amount: 1, pool: pool, priorityClass: "e2e-rd-low"})
	waitHeld(t, env, ns, "equal", "Insufficient "+string(res))

	create(t, env, ns, plainPod{name: "high", res: res, amount: 2, pool: pool, priorityClass: "e2e-rd-high"})
	waitGone(t, env, ns, "low-0")
	waitGone(t, env, ns, "low-1")
	waitBound(t, env, ns, "high")
	// The recorder writes each victim's Preempted event from a goroutine of its own after the
	// eviction, maybe after the victims are gone: wait for both before checking them.
	var victims map[string]bool
	framework.Eventually(t, 30*time.Second, "Preempted events on 2 victims", func() (bool, string) {
		events, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Preempted"})
		if err != nil {
			return false, err.Error()
		}
		victims = map[string]bool{}
		for _, e := range events.Items {
			victims[e.InvolvedObject.Name] = true
		}
		return len(victims) >= 2, fmt.Sprint(victims)
	})
	assert.Equal(t, map[string]bool{"low-0": true, "low-1": true}, victims, "each victim, and only they, are told they were preempted")
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "equal", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "the pod of equal priority neither preempted nor took the room")
}

// A system-cluster-critical pod that fits nowhere evicts a lower-priority pod of another queue,
// as kube-scheduler's DefaultPreemption would; Tephra's own preemption stays within a queue, and
// the queue is not reclaimable, so no reclaim could take the pod either.
func TestSystemPodPreemptsAcrossQueues(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/rd-system"
	pool := units(t, env, res, 1, 2)
	createQueue(t, env, "rd-batch", func(spec *schedulingv1alpha1.QueueSpec) { spec.Reclaimable = new(false) })

	create(t, env, ns, plainPod{name: "batch", queue: "rd-batch", res: res, amount: 2, pool: pool})
	waitBound(t, env, ns, "batch")
	waitAllocated(t, env, "rd-batch", res, 2)

	create(t, env, ns, plainPod{name: "critical", res: res, amount: 2, pool: pool, priorityClass: systemClusterCritical})
	waitGone(t, env, ns, "batch")
	waitBound(t, env, ns, "critical")
	waitAllocated(t, env, "rd-batch", res, 0)
	waitAllocatedStays(t, env, schedulingv1alpha1.DefaultQueue, res, 0)
}
