package foreign

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A scheduler-plugins PodGroup as Kubeflow Trainer v2 creates it (minMember, minResources,
// scheduleTimeoutSeconds), pods with its label and KubeRay's scheduler name: five one-CPU pods on
// four free CPUs bind none; a node added binds all five; the PodGroup's status says so.
func TestSchedulerPluginsGang(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "sp-gang", 1, 4)
	pg := &schedulerpluginsv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "test-job", Namespace: ns},
		Spec: schedulerpluginsv1alpha1.PodGroupSpec{
			MinMember: 5, MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")},
			ScheduleTimeoutSeconds: new(int32(120)),
		},
	}
	require.NoError(t, c.Create(context.Background(), pg))
	for i := range 5 {
		createPod(t, env, ns, member{name: fmt.Sprintf("test-job-node-%d", i), scheduler: "scheduler-plugins-scheduler", cpu: "1", pool: nodes,
			labels: map[string]string{schedulingv1alpha1.CoschedulingPodGroupLabel: "test-job"}})
	}
	m := mirror(t, c, ns, "test-job")
	assert.Equal(t, int32(5), m.Spec.MinMember)
	assert.Equal(t, int32(120), *m.Spec.ScheduleTimeoutSeconds)
	assert.True(t, metav1.IsControlledBy(m, pg), "the Tephra PodGroup is not owned by the scheduler-plugins PodGroup: %v", m.OwnerReferences)
	framework.Eventually(t, 30*time.Second, "the PodGroup's phase PreScheduling", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pg), pg))
		return pg.Status.Phase == schedulerpluginsv1alpha1.PodGroupPreScheduling, fmt.Sprintf("%+v", pg.Status)
	})
	neverBound(t, env, ns, 3*time.Second)

	addNode(t, env, nodes, "sp-gang-extra", 4)
	framework.Eventually(t, time.Minute, "all 5 pods bound", func() (bool, string) {
		n := bound(t, env, ns)
		return n == 5, fmt.Sprintf("%d bound", n)
	})
	framework.Eventually(t, time.Minute, "the PodGroup Running with 5 running and scheduled", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pg), pg))
		s := pg.Status
		return s.Phase == schedulerpluginsv1alpha1.PodGroupRunning && s.Running == 5 && s.Scheduled == 5, fmt.Sprintf("%+v", s)
	})
}

// The MPI operator's scheduler-plugins PodGroup has scheduleTimeoutSeconds: 0, which Tephra's
// own PodGroup refuses: it means the scheduler's default, and the gang runs.
func TestSchedulerPluginsZeroTimeout(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "sp-zero", 1, 4)
	pg := &schedulerpluginsv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: ns},
		Spec: schedulerpluginsv1alpha1.PodGroupSpec{
			MinMember: 3, ScheduleTimeoutSeconds: new(int32(0)),
			MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		},
	}
	require.NoError(t, c.Create(context.Background(), pg))
	for _, name := range []string{"pi-launcher", "pi-worker-0", "pi-worker-1"} {
		createPod(t, env, ns, member{name: name, scheduler: schedulingv1alpha1.SchedulerName, cpu: "1", pool: nodes,
			labels: map[string]string{schedulingv1alpha1.CoschedulingPodGroupLabel: "pi"}})
	}
	framework.Eventually(t, time.Minute, "all 3 pods bound", func() (bool, string) {
		n := bound(t, env, ns)
		return n == 3, fmt.Sprintf("%d bound", n)
	})
	assert.Nil(t, mirror(t, c, ns, "pi").Spec.ScheduleTimeoutSeconds, "timeout 0 must leave the scheduler's default")
}

// A Volcano PodGroup as the training-operator creates it reaches Inqueue with no pods (the
// operator creates its pods only then); its pods (schedulerName volcano, Volcano's annotations)
// bind together and its phase follows them to Completed.
func TestVolcanoPodGroupLifecycle(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "vc-life", 1, 4)
	pg := &volcanov1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "pytorch-simple", Namespace: ns},
		Spec:       volcanov1beta1.PodGroupSpec{MinMember: 2, Queue: "default"},
	}
	require.NoError(t, c.Create(context.Background(), pg))
	framework.Eventually(t, 30*time.Second, "the Volcano PodGroup Inqueue", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pg), pg))
		return pg.Status.Phase == volcanov1beta1.PodGroupInqueue, fmt.Sprintf("%+v", pg.Status)
	})
	for _, task := range []string{"master", "worker"} {
		createPod(t, env, ns, member{name: "pytorch-simple-" + task + "-0", scheduler: "volcano", cpu: "1", pool: nodes,
			annotations: map[string]string{
				schedulingv1alpha1.VolcanoGroupNameAnnotation: "pytorch-simple",
				volcanov1beta1.TaskSpecKey:                    task,
				"sim.tephra.dev/duration":                     "4s",
			}})
	}
	framework.Eventually(t, time.Minute, "both pods bound", func() (bool, string) {
		n := bound(t, env, ns)
		return n == 2, fmt.Sprintf("%d bound", n)
	})
	framework.Eventually(t, time.Minute, "the Volcano PodGroup Completed", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pg), pg))
		return pg.Status.Phase == volcanov1beta1.PodGroupCompleted && pg.Status.Succeeded == 2, fmt.Sprintf("%+v", pg.Status)
	})
}

// Two Spark applications as the Spark operator's Volcano mode creates them (PodGroup minMember 1,
// minResources = driver + executors) in a Volcano Queue with a capability of 4 CPUs: the second
// driver waits until the first application's pods end.
func TestVolcanoQueueSparkApplications(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "vc-spark", 1, 16)
	queue := &volcanov1beta1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "spark-" + ns},
		Spec: volcanov1beta1.QueueSpec{Weight: 1, Reclaimable: new(false),
			Capability: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
	}
	require.NoError(t, c.Create(context.Background(), queue))
	t.Cleanup(func() { _ = c.Delete(context.Background(), queue) })
	var tq schedulingv1alpha1.Queue
	framework.Eventually(t, 30*time.Second, "the Tephra Queue", func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Name: queue.Name}, &tq)
		return err == nil, fmt.Sprint(err)
	})
	assert.True(t, tq.Spec.Capability.Cpu().Equal(resource.MustParse("4")), "capability %v", tq.Spec.Capability)
	assert.True(t, metav1.IsControlledBy(&tq, queue), "the Tephra Queue is not owned by the Volcano Queue")

	app := func(name string, pods ...string) {
		pg := &volcanov1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "spark-" + name + "-pg", Namespace: ns},
			Spec: volcanov1beta1.PodGroupSpec{MinMember: 1, Queue: queue.Name,
				MinResources: &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
		}
		require.NoError(t, c.Create(context.Background(), pg))
		mirror(t, c, ns, pg.Name)
		for _, pod := range pods {
			createPod(t, env, ns, member{name: name + "-" + pod, scheduler: "volcano", cpu: "1", pool: nodes,
				annotations: map[string]string{schedulingv1alpha1.VolcanoGroupNameAnnotation: pg.Name, "sim.tephra.dev/duration": "8s"}})
		}
	}
	app("first", "driver", "exec-1", "exec-2")
	framework.Eventually(t, time.Minute, "the first application's pods bound", func() (bool, string) {
		n := bound(t, env, ns, "first-driver", "first-exec-1", "first-exec-2")
		return n == 3, fmt.Sprintf("%d bound", n)
	})
	framework.Eventually(t, 30*time.Second, "the queue's allocation showing the first application", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(&tq), &tq))
		return tq.Status.Allocated.Cpu().Equal(resource.MustParse("3")), fmt.Sprint(tq.Status.Allocated)
	})
	app("second", "driver")
	second := &volcanov1beta1.PodGroup{}
	framework.Eventually(t, 30*time.Second, "the second application's PodGroup Pending with its queue's reason", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "spark-second-pg"}, second))
		for _, cond := range second.Status.Conditions {
			if cond.Type == schedulingv1alpha1.PodGroupUnschedulable && cond.Reason == schedulingv1alpha1.ReasonQueueCapability {
				return second.Status.Phase == volcanov1beta1.PodGroupPending, fmt.Sprintf("%+v", second.Status)
			}
		}
		return false, fmt.Sprintf("%+v", second.Status)
	})
	neverBound(t, env, ns, 3*time.Second, "second-driver")
	framework.Eventually(t, time.Minute, "the second driver bound after the first application ended", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		var running int
		var driver *corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if strings.HasPrefix(p.Name, "first-") && p.Status.Phase != corev1.PodSucceeded {
				running++
			}
			if p.Name == "second-driver" {
				driver = p
			}
		}
		if driver.Spec.NodeName != "" {
			require.Zero(t, running, "the second driver was bound while the first application still ran")
			return true, ""
		}
		return false, fmt.Sprintf("%d pods of the first application not ended; events of the second driver: %s", running, env.Events(ns, "second-driver"))
	})
	framework.Eventually(t, 30*time.Second, "the Volcano Queue's status written", func() (bool, string) {
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(queue), queue))
		return queue.Status.State == volcanov1beta1.QueueOpen, fmt.Sprintf("%+v", queue.Status)
	})
}

// Deleting a foreign PodGroup deletes its Tephra PodGroup, and its pods, which waited for the
// gang, wait for a group again (PodGroupNotFound) instead of holding anything.
func TestDeleteForeignPodGroup(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "fg-delete", 1, 2)
	pg := &schedulerpluginsv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns},
		Spec:       schedulerpluginsv1alpha1.PodGroupSpec{MinMember: 3},
	}
	require.NoError(t, c.Create(context.Background(), pg))
	for i := range 3 {
		createPod(t, env, ns, member{name: fmt.Sprintf("gang-%d", i), scheduler: schedulingv1alpha1.SchedulerName, cpu: "1", pool: nodes,
			labels: map[string]string{schedulingv1alpha1.CoschedulingPodGroupLabel: "gang"}})
	}
	m := mirror(t, c, ns, "gang")
	neverBound(t, env, ns, 2*time.Second)
	require.NoError(t, c.Delete(context.Background(), pg))
	gone(t, c, m, "the Tephra PodGroup")
	framework.Eventually(t, time.Minute, "the members told their group is gone", func() (bool, string) {
		events := env.Events(ns, "gang-0")
		return strings.Contains(events, schedulingv1alpha1.ReasonPodGroupNotFound), events
	})
	assert.Zero(t, bound(t, env, ns), "a member was bound")
}

// A malformed foreign PodGroup gets a Warning event and no Tephra PodGroup; the adapters go on
// translating the next ones.
func TestMalformedForeignPodGroups(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	ns := env.Namespace(t)
	bad := []client.Object{
		&schedulerpluginsv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad-sp", Namespace: ns}, Spec: schedulerpluginsv1alpha1.PodGroupSpec{MinMember: -1}},
		&volcanov1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad-vc", Namespace: ns}, Spec: volcanov1beta1.PodGroupSpec{MinMember: -2}},
		&volcanov1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad-queue-name", Namespace: ns}, Spec: volcanov1beta1.PodGroupSpec{MinMember: 1, Queue: "Not_A_Name"}},
	}
	for _, obj := range bad {
		require.NoError(t, c.Create(context.Background(), obj))
	}
	for _, obj := range bad {
		framework.Eventually(t, 30*time.Second, "a Warning event on "+obj.GetName(), func() (bool, string) {
			events := env.Events(ns, obj.GetName())
			return strings.Contains(events, "Warning InvalidForTephra"), events
		})
		var pg schedulingv1alpha1.PodGroup
		err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &pg)
		assert.Error(t, err, "a Tephra PodGroup was made from malformed %s", obj.GetName())
	}
	// A Tephra PodGroup of the same name that the foreign one does not own is left as it is.
	taken := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4}}
	require.NoError(t, c.Create(context.Background(), taken))
	require.NoError(t, c.Create(context.Background(), &schedulerpluginsv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: schedulerpluginsv1alpha1.PodGroupSpec{MinMember: 2}}))
	framework.Eventually(t, 30*time.Second, "a Warning event on the scheduler-plugins PodGroup taken", func() (bool, string) {
		events := env.Events(ns, "taken")
		return strings.Contains(events, "Warning TephraObjectConflict"), events
	})
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(taken), taken))
	assert.Equal(t, int32(4), taken.Spec.MinMember, "the Tephra PodGroup was changed")
	assert.Empty(t, taken.OwnerReferences)

	good := &volcanov1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: ns}, Spec: volcanov1beta1.PodGroupSpec{MinMember: 1}}
	require.NoError(t, c.Create(context.Background(), good))
	mirror(t, c, ns, "good")
}
