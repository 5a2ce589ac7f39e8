// Package upstream checks end to end that Tephra gang-schedules upstream Kubernetes' own gang API
// (scheduling.k8s.io/v1beta1 PodGroup and Workload, pods linked by spec.schedulingGroup): the
// cluster runs with the GenericWorkload feature gate and the API enabled, both tephra-scheduler and
// tephra-controllers read each upstream PodGroup in memory as the Tephra PodGroup it translates
// into (no Tephra object is written for it), and tephra-scheduler gangs its pods once.
package upstream

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func TestMain(m *testing.M) {
	// A preemptor binds soon after its victims go, never at the periodic flush (issue #38).
	framework.CheckPreemptorsInEveryTest()
	os.Exit(framework.Main(m, localcluster.Options{
		// TopologyAwareWorkloadScheduling serves schedulingConstraints, and with the gate-on run
		// lets kube-scheduler's pod-group cycles try placements (TephraGang's, docs/topology.md).
		// CompositePodGroup serves upstream's composite groups (v1alpha3) for the gate-on run.
		FeatureGates:  "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true",
		RuntimeConfig: "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
		// As installed, tephra-scheduler runs without the gate; make test runs the package again
		// with it on (TEPHRA_E2E_GENERIC_WORKLOAD, docs/gang.md).
		TephraSchedulerWithoutFeatureGates: true,
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

func addNode(t *testing.T, env *framework.Env, pool map[string]string, name string, cpus int) {
	t.Helper()
	_, err := env.Kube.CoreV1().Nodes().Create(context.Background(), localcluster.SimulatedNode(name, localcluster.NodeShape{
		CPU: fmt.Sprint(cpus), Memory: "64Gi", Pods: 110, Labels: pool,
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	require.NoError(t, env.Cluster.WaitNodesReady(context.Background(), name))
}

// upstreamPodGroup creates a scheduling.k8s.io/v1beta1 PodGroup with a gang of minCount.
func upstreamPodGroup(t *testing.T, env *framework.Env, ns, name string, minCount int32, mutate func(*upstreamv1beta1.PodGroup)) *upstreamv1beta1.PodGroup {
	t.Helper()
	pg := &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: upstreamv1beta1.PodGroupSpec{SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{
			Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
	if mutate != nil {
		mutate(pg)
	}
	created, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// linkedPod is a one-CPU (by default) tephra-scheduler pod linked to group by spec.schedulingGroup.
func linkedPod(t *testing.T, env *framework.Env, ns, name, group, cpu string, pool map[string]string) {
	t.Helper()
	linkedPodOf(t, env, ns, name, group, cpu, pool, "")
}

func boundPods(t *testing.T, env *framework.Env, ns string) int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// An upstream gang of 7 one-CPU pods on 6 free CPUs binds none; a node added binds all 7. The
// upstream PodGroup is read as a group of minMember 7 in the queue its label names, with no Tephra
// object; its queue's status counts it waiting, then running, and its PodGroupInitiallyScheduled
// condition follows.
func TestUpstreamGangBindsNoneThenAll(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "up-gang", 1, 6)
	framework.CreateQueue(t, env, "up-gang", nil)

	up := upstreamPodGroup(t, env, ns, "train", 7, func(pg *upstreamv1beta1.PodGroup) {
		pg.Labels = map[string]string{schedulingv1alpha1.QueueLabel: "up-gang"}
	})
	for i := range 7 {
		linkedPod(t, env, ns, fmt.Sprintf("train-%d", i), "train", "1", nodes)
	}
	framework.Eventually(t, time.Minute, "the group to be Unschedulable for lack of resources", func() (bool, string) {
		assert.Equal(t, 0, boundPods(t, env, ns), "no member of an incomplete gang is bound")
		pg, err := group(ctx, env, ns, "train")
		if err != nil {
			return false, err.Error()
		}
		cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == schedulingv1alpha1.ReasonNotEnoughResources,
			fmt.Sprintf("phase %s, conditions %v", pg.Status.Phase, pg.Status.Conditions)
	})
	pg, err := group(ctx, env, ns, "train")
	require.NoError(t, err)
	assert.Equal(t, int32(7), pg.Spec.MinMember, "minMember from gang.minCount")
	assert.Equal(t, "up-gang", pg.Spec.Queue, "the queue its label names")
	assert.True(t, metav1.IsControlledBy(pg, up), "the group stands for the upstream PodGroup: %v", pg.OwnerReferences)
	noTephraObject(t, env, ns, "train")
	framework.WaitQueueStatus(t, env, "up-gang", 30*time.Second, "the waiting gang counted, nothing allocated", func(q *schedulingv1alpha1.Queue) bool {
		return q.Status.Pending+q.Status.Inqueue == 1 && q.Status.Running == 0 && framework.AmountOf(q.Status.Allocated, corev1.ResourceCPU) == 0
	})
	framework.Eventually(t, 30*time.Second, "PodGroupInitiallyScheduled=False on the upstream PodGroup", func() (bool, string) {
		got, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled)
		return c != nil && c.Status == metav1.ConditionFalse, fmt.Sprintf("%v", got.Status.Conditions)
	})
	for range 8 {
		require.Equal(t, 0, boundPods(t, env, ns), "no member of an incomplete gang is bound")
		time.Sleep(250 * time.Millisecond)
	}

	addNode(t, env, nodes, "up-gang-extra", 2)
	framework.Eventually(t, time.Minute, "all 7 members to be bound", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == 7, fmt.Sprintf("%d bound", n)
	})
	framework.WaitQueueStatus(t, env, "up-gang", 30*time.Second, "the gang counted running, its 7 CPUs allocated", func(q *schedulingv1alpha1.Queue) bool {
		return q.Status.Running == 1 && q.Status.Pending+q.Status.Inqueue == 0 && framework.AmountOf(q.Status.Allocated, corev1.ResourceCPU) == 7
	})
	noTephraObject(t, env, ns, "train")
	framework.Eventually(t, 30*time.Second, "PodGroupInitiallyScheduled=True on the upstream PodGroup", func() (bool, string) {
		got, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled), fmt.Sprintf("%v", got.Status.Conditions)
	})
}

// The queue comes from the label scheduling.tephra.dev/queue on the PodGroup, else on its Workload.
// A label that cannot name a queue gets a Warning event and no group; the controllers carry on.
func TestUpstreamQueueAndMalformed(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)

	_, err := env.Kube.SchedulingV1beta1().Workloads(ns).Create(ctx, &upstreamv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "wl", Namespace: ns, Labels: map[string]string{schedulingv1alpha1.QueueLabel: "team-w"}},
		Spec: upstreamv1beta1.WorkloadSpec{PodGroupTemplates: []upstreamv1beta1.PodGroupTemplate{{
			Name:             "workers",
			SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 2}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	upstreamPodGroup(t, env, ns, "from-workload", 2, func(pg *upstreamv1beta1.PodGroup) {
		pg.Spec.WorkloadRef = &upstreamv1beta1.WorkloadReference{WorkloadName: "wl", TemplateName: "workers"}
	})
	upstreamPodGroup(t, env, ns, "own-label", 3, func(pg *upstreamv1beta1.PodGroup) {
		pg.Labels = map[string]string{schedulingv1alpha1.QueueLabel: "team-p"}
		pg.Spec.WorkloadRef = &upstreamv1beta1.WorkloadReference{WorkloadName: "wl", TemplateName: "workers"}
	})
	upstreamPodGroup(t, env, ns, "basic", 0, func(pg *upstreamv1beta1.PodGroup) {
		pg.Spec.SchedulingPolicy = upstreamv1beta1.PodGroupSchedulingPolicy{Basic: &upstreamv1beta1.BasicSchedulingPolicy{}}
	})
	upstreamPodGroup(t, env, ns, "bad-queue", 2, func(pg *upstreamv1beta1.PodGroup) {
		pg.Labels = map[string]string{schedulingv1alpha1.QueueLabel: "Not_A_Queue"}
	})
	for name, want := range map[string]struct {
		queue string
		min   int32
	}{"from-workload": {"team-w", 2}, "own-label": {"team-p", 3}, "basic": {schedulingv1alpha1.DefaultQueue, 1}} {
		framework.Eventually(t, 30*time.Second, "the group of "+name, func() (bool, string) {
			pg, err := group(ctx, env, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return pg.Spec.Queue == want.queue && pg.Spec.MinMember == want.min, fmt.Sprintf("queue %q, minMember %d", pg.Spec.Queue, pg.Spec.MinMember)
		})
	}
	framework.Eventually(t, 30*time.Second, "a Warning InvalidForTephra event on bad-queue", func() (bool, string) {
		events := env.Events(ns, "bad-queue")
		return regexp.MustCompile(`Warning InvalidForTephra: .*Not_A_Queue`).MatchString(events), events
	})
	_, err = group(ctx, env, ns, "bad-queue")
	assert.True(t, apierrors.IsNotFound(err), "no group of a malformed PodGroup: %v", err)
	for _, name := range []string{"from-workload", "own-label", "basic", "bad-queue"} {
		noTephraObject(t, env, ns, name)
	}

	// The queue label changed on the Workload follows to the group.
	wl, err := env.Kube.SchedulingV1beta1().Workloads(ns).Get(ctx, "wl", metav1.GetOptions{})
	require.NoError(t, err)
	wl.Labels[schedulingv1alpha1.QueueLabel] = "team-x"
	_, err = env.Kube.SchedulingV1beta1().Workloads(ns).Update(ctx, wl, metav1.UpdateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 30*time.Second, "the group to follow the Workload's queue label", func() (bool, string) {
		pg, err := group(ctx, env, ns, "from-workload")
		if err != nil {
			return false, err.Error()
		}
		return pg.Spec.Queue == "team-x", pg.Spec.Queue
	})
}

// A pod linked to an upstream PodGroup that does not exist waits with PodGroupNotFound; deleting
// an upstream PodGroup ends its group and releases the members it held, whose CPUs then run
// another pod.
func TestUpstreamMissingAndDeleted(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "up-del", 1, 2)

	linkedPod(t, env, ns, "orphan", "nowhere", "1", nodes)
	framework.Eventually(t, time.Minute, "a PodGroupNotFound event on the pod", func() (bool, string) {
		events := env.Events(ns, "orphan")
		return regexp.MustCompile(`PodGroupNotFound: pod group "nowhere" does not exist`).MatchString(events), events
	})

	upstreamPodGroup(t, env, ns, "big", 3, nil)
	for i := range 3 {
		linkedPod(t, env, ns, fmt.Sprintf("big-%d", i), "big", "1", nodes)
	}
	framework.Eventually(t, time.Minute, "the group big to be Unschedulable", func() (bool, string) {
		pg, err := group(ctx, env, ns, "big")
		if err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable), fmt.Sprintf("%v", pg.Status.Conditions)
	})
	require.NoError(t, env.Kube.SchedulingV1beta1().PodGroups(ns).Delete(ctx, "big", metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the members of the deleted group to wait for their group", func() (bool, string) {
		events := env.Events(ns, "big-0")
		return strings.Contains(events, `pod group "big" does not exist`), events
	})
	assert.Equal(t, 0, boundPods(t, env, ns), "no member of a deleted group is bound")
	// The members hold nothing: a 2-CPU pod fills the node.
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: nodes,
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			}}},
		},
	}
	_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{})
	require.NoError(t, err)
	env.WaitPod(t, ns, "plain", time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
}

// An upstream gang of 3 two-CPU pods, of high priority, arrives where 8 one-CPU pods of low
// priority fill both nodes: it preempts the 6 it needs, no more, and binds whole. With
// tephra-scheduler's GenericWorkload gate on, the gang preempts in its pod-group cycle, through
// TephraQueue's PodGroupPostFilter; with it off, member by member through TephraQueue's
// PostFilter. Either way the result is the same.
func TestUpstreamGangPreemptsAndBindsWhole(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "up-preempt", 2, 4)
	framework.PriorityClass(t, env, "e2e-up-low", 0)
	framework.PriorityClass(t, env, "e2e-up-high", 1000)
	for i := range 8 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("low-%d", i), Namespace: ns},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: nodes,
				PriorityClassName: "e2e-up-low",
				Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			},
		}
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	framework.Eventually(t, time.Minute, "the 8 low-priority pods to be bound", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == 8, fmt.Sprintf("%d bound", n)
	})

	// kube-scheduler's pod-group cycle wants the group's priority to be its pods'.
	upstreamPodGroup(t, env, ns, "urgent", 3, func(pg *upstreamv1beta1.PodGroup) { pg.Spec.PriorityClassName = "e2e-up-high" })
	for i := range 3 {
		linkedPodOf(t, env, ns, fmt.Sprintf("urgent-%d", i), "urgent", "2", nodes, "e2e-up-high")
	}
	framework.Eventually(t, 2*time.Minute, "the gang to be bound whole", func() (bool, string) {
		bound := 0
		for i := range 3 {
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("urgent-%d", i), metav1.GetOptions{})
			if err == nil && p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 3, fmt.Sprintf("%d of 3 bound", bound)
	})
	// The recorder writes each victim's Preempted event from a goroutine of its own after the
	// eviction, maybe after the gang bound: wait for 6 victims' before checking them.
	var preempted map[string]bool
	var notes []string
	framework.Eventually(t, 30*time.Second, "Preempted events on 6 victims", func() (bool, string) {
		events, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		preempted, notes = map[string]bool{}, nil
		for _, e := range events.Items {
			if e.Reason == "Preempted" {
				preempted[e.Regarding.Name] = true
				notes = append(notes, e.Note)
			}
		}
		return len(preempted) >= 6, fmt.Sprint(preempted)
	})
	for _, note := range notes {
		// TephraQueue's words, not DefaultPreemption's: the queues' rules chose the victims.
		assert.Contains(t, note, `of higher priority in queue "default"`)
	}
	assert.Len(t, preempted, 6, "exactly the 6 CPUs the gang needs were freed: %v", preempted)
	for name := range preempted {
		assert.True(t, strings.HasPrefix(name, "low-"), "only low-priority pods are preempted: %s", name)
	}
}

// linkedPodOf is linkedPod with a PriorityClass.
func linkedPodOf(t *testing.T, env *framework.Env, ns, name, group, cpu string, pool map[string]string, priorityClass string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:     schedulingv1alpha1.SchedulerName,
			RestartPolicy:     corev1.RestartPolicyNever,
			NodeSelector:      pool,
			PriorityClassName: priorityClass,
			SchedulingGroup:   &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)},
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
	created, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotNil(t, created.Spec.SchedulingGroup, "the apiserver keeps spec.schedulingGroup (GenericWorkload is on)")
}

// An upstream PodGroup with schedulingConstraints.topology gets Tephra's topology choice, gate on
// or off: with both gates (GenericWorkload and TopologyAwareWorkloadScheduling) through
// TephraGang's placement plugins in kube-scheduler's pod-group cycle, without them through the
// group's required topology. Best fit: a gang of 4 CPUs goes to the rack of 4 free CPUs, not
// to the one of 8, so that a gang of 8 that follows still finds a whole rack (upstream's
// placement scorer picks either rack at random for the first, and the second then waits). A gang
// no rack holds binds nothing and says why, rack by rack.
func TestUpstreamTopologyGangTakesTheBestFit(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	const rackKey = "topology.kubernetes.io/rack"
	pool := map[string]string{framework.PoolLabel: "up-tas"}
	rackOf := map[string]string{}
	for _, n := range []struct{ name, rack string }{{"up-tas-small-0", "tas-small"}, {"up-tas-large-0", "tas-large"}, {"up-tas-large-1", "tas-large"}} {
		addNode(t, env, map[string]string{framework.PoolLabel: "up-tas", rackKey: n.rack}, n.name, 4)
		rackOf[n.name] = n.rack
	}
	inRack := func(pg *upstreamv1beta1.PodGroup) {
		pg.Spec.SchedulingConstraints = &upstreamv1beta1.PodGroupSchedulingConstraints{Topology: []upstreamv1beta1.TopologyConstraint{{Key: rackKey}}}
	}
	racksOf := func(prefix string, n int) (map[string]int, int) {
		racks, bound := map[string]int{}, 0
		for i := range n {
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("%s-%d", prefix, i), metav1.GetOptions{})
			require.NoError(t, err)
			if p.Spec.NodeName != "" {
				bound++
				racks[rackOf[p.Spec.NodeName]]++
			}
		}
		return racks, bound
	}

	// placed submits a rack gang of n one-CPU pods and returns its pods by rack once all are bound.
	placed := func(name string, n int) map[string]int {
		upstreamPodGroup(t, env, ns, name, int32(n), inRack)
		for i := range n {
			linkedPod(t, env, ns, fmt.Sprintf("%s-%d", name, i), name, "1", pool)
		}
		framework.Eventually(t, time.Minute, fmt.Sprintf("the gang of %d to be bound", n), func() (bool, string) {
			racks, bound := racksOf(name, n)
			return bound == n, fmt.Sprintf("%d bound, by rack %v", bound, racks)
		})
		racks, _ := racksOf(name, n)
		return racks
	}
	assert.Equal(t, map[string]int{"tas-small": 4}, placed("small", 4), "the gang of 4 fills the rack that fits it best")
	assert.Equal(t, map[string]int{"tas-large": 8}, placed("large", 8), "the gang of 8 finds a whole rack")

	upstreamPodGroup(t, env, ns, "none", 2, inRack)
	for i := range 2 {
		linkedPod(t, env, ns, fmt.Sprintf("none-%d", i), "none", "1", pool)
	}
	framework.WaitEventOnAny(t, env, ns, []string{"none-0", "none-1"}, "no "+rackKey+" domain holds it")
	_, bound := racksOf("none", 2)
	assert.Zero(t, bound, "no member of a gang no rack holds is bound")
}

// An upstream gang that waits past its SLA (the sla-waiting-time annotation on the upstream
// PodGroup, which its group carries) reserves nodes, gate on or off: a pod of its priority that
// comes later is kept off the room freed there, and the gang runs whole on its reserved nodes once
// they have room.
func TestUpstreamGangPastItsSLAReservesNodes(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	pool := env.Pool(t, "up-sla", 4, 2)
	plain := func(name string) {
		t.Helper()
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"e2e.tephra.dev/job": "small"}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
				Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range 8 {
		plain(fmt.Sprintf("small-%d", i))
	}
	framework.Eventually(t, time.Minute, "the 8 small pods to fill the pool", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == 8, fmt.Sprintf("%d bound", n)
	})

	upstreamPodGroup(t, env, ns, "urgent", 4, func(pg *upstreamv1beta1.PodGroup) {
		pg.Annotations = map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: "3s"}
	})
	for i := range 4 {
		linkedPod(t, env, ns, fmt.Sprintf("urgent-%d", i), "urgent", "1", pool)
	}
	var reserved []string
	framework.Eventually(t, time.Minute, "the gang to reserve nodes past its SLA", func() (bool, string) {
		events := env.Events(ns, "urgent")
		_, nodes, found := strings.Cut(events, ": nodes ")
		if !found {
			return false, events
		}
		nodes, _, _ = strings.Cut(nodes, " are reserved")
		reserved = strings.Split(nodes, ", ")
		return true, events
	})
	require.Len(t, reserved, 2, "4 CPUs on nodes of 2")

	// Room freed on a reserved node is kept for the gang: a pod of its priority that comes later
	// stays pending while every other node is full.
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=small"})
	require.NoError(t, err)
	var onFirst, rest []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == reserved[0] {
			onFirst = append(onFirst, p.Name)
		} else {
			rest = append(rest, p.Name)
		}
	}
	deleteNow := func(names []string) {
		for _, name := range names {
			require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		}
	}
	deleteNow(onFirst)
	plain("intruder")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "intruder", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, p.Spec.NodeName, "a pod of the gang's priority took room on a node reserved for it")
	}

	deleteNow(rest)
	framework.Eventually(t, time.Minute, "the gang to run whole on its reserved nodes", func() (bool, string) {
		var where []string
		for i := range 4 {
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("urgent-%d", i), metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" {
				return false, fmt.Sprintf("urgent-%d pending; bound: %v", i, where)
			}
			where = append(where, p.Spec.NodeName)
		}
		for _, n := range where {
			assert.Contains(t, reserved, n, "the gang runs on its reserved nodes")
		}
		return true, ""
	})
	framework.Eventually(t, time.Minute, "the later pod to run once the gang's reservation ended", func() (bool, string) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "intruder", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", "pending"
	})
}

// An upstream gang of 331 on a pool with room for 330 pods never fits. With the gate on,
// kube-scheduler tries it in one pod-group cycle that reserves 330 members before it finds no
// room for the last; TephraBackpressure (256 binds in flight, as shipped) must not make the
// members past the 256th wait for binds that only that cycle's end could send, or the scheduler
// stands a second per member and the plain pods beside the gang wait minutes (measured: nothing
// bound in 90 s of `make bench` CG GI). Plain pods created after the gang bind while it waits.
func TestPlainPodsBindBesideAnUpstreamGangThatNeverFits(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "up-never", 3, 4) // 330 pods' room
	const members = 331
	upstreamPodGroup(t, env, ns, "never", members, nil)
	for i := range members {
		linkedPod(t, env, ns, fmt.Sprintf("never-%03d", i), "never", "10m", nodes)
	}
	framework.Eventually(t, 70*time.Second, "the gang to be found Unschedulable", func() (bool, string) {
		pg, err := group(ctx, env, ns, "never")
		if err != nil {
			return false, err.Error()
		}
		cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		return cond != nil && cond.Status == metav1.ConditionTrue, fmt.Sprintf("phase %s, conditions %v", pg.Status.Phase, pg.Status.Conditions)
	})

	const plain = 10
	for i := range plain {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%d", i), Namespace: ns},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName,
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  nodes,
				Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
				}}},
			},
		}
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// A cycle of the gang with the members past the 256th waiting a second each takes 75 s (the
	// wait for Unschedulable above would not have ended): the plain pods queued behind it would
	// not bind in 60. Without that wait, a failed cycle costs kube-scheduler a status write per
	// member (331), seconds on a loaded machine.
	framework.Eventually(t, 60*time.Second, "the plain pods to bind beside the gang", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == plain, fmt.Sprintf("%d of %d bound", n, plain)
	})
	for range 4 {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "never-") {
				require.Empty(t, p.Spec.NodeName, "no member of a gang that cannot be whole is bound")
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// An upstream gang whose queue holds it (closed) counts as Pending in the queue's status, as a
// PodGroup object that its queue holds does: nobody writes the upstream group's status, and its
// members alone would make it Inqueue.
func TestUpstreamGangItsQueueHoldsCountsPending(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "up-held", 1, 4)
	framework.CreateQueue(t, env, "up-held", func(s *schedulingv1alpha1.QueueSpec) { s.State = schedulingv1alpha1.QueueClosed })

	upstreamPodGroup(t, env, ns, "held", 2, func(pg *upstreamv1beta1.PodGroup) {
		pg.Labels = map[string]string{schedulingv1alpha1.QueueLabel: "up-held"}
	})
	for i := range 2 {
		linkedPod(t, env, ns, fmt.Sprintf("held-%d", i), "held", "1", nodes)
	}
	framework.WaitQueueStatus(t, env, "up-held", 30*time.Second, "the held gang counted Pending, not Inqueue", func(q *schedulingv1alpha1.Queue) bool {
		return q.Status.Pending == 1 && q.Status.Inqueue == 0 && q.Status.Running == 0
	})
	assert.Equal(t, 0, boundPods(t, env, ns), "a closed queue runs nothing")
	noTephraObject(t, env, ns, "held")
}
