package gang

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A gang of 8 one-CPU pods on 7 free CPUs binds none; a node added binds all 8, and the
// PodGroup's status and the scheduler's metrics say so.
func TestGangBindsNoneUntilAllFit(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "none-until-all", 1, 7)

	createPodGroup(t, env, ns, "train", 8, nil)
	for i := range 8 {
		createPod(t, env, newPod(ns, podSpec{name: fmt.Sprintf("train-%d", i), group: "train", cpu: "1", pool: nodes}))
	}
	// The group is refused and says why; no member is bound meanwhile.
	framework.Eventually(t, time.Minute, "the PodGroup to be Unschedulable for lack of resources", func() (bool, string) {
		assert.Equal(t, 0, boundPods(t, env, ns), "no member of an incomplete gang is bound")
		return unschedulableForResources(ctx, env, ns, "train")
	})
	for range 8 {
		require.Equal(t, 0, boundPods(t, env, ns), "no member of an incomplete gang is bound")
		time.Sleep(250 * time.Millisecond)
	}

	addNode(t, env, nodes, "none-until-all-extra", 2)
	framework.Eventually(t, time.Minute, "all 8 members to run", func() (bool, string) {
		jobs, err := sampleJobs(ctx, env, ns)
		if err != nil {
			return false, err.Error()
		}
		return jobs["train"].running == 8, describe(jobs)
	})
	framework.Eventually(t, 30*time.Second, "the PodGroup to be Running with 8 pods", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		scheduled := apimeta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1alpha1.PodGroupScheduled)
		unschedulable := apimeta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && pg.Status.Running == 8 && scheduled && !unschedulable,
			fmt.Sprintf("phase %s, running %d, conditions %v", pg.Status.Phase, pg.Status.Running, pg.Status.Conditions)
	})

	metrics, err := env.Cluster.SchedulerMetrics(ctx)
	require.NoError(t, err)
	count := regexp.MustCompile(`(?m)^tephra_gang_time_to_full_seconds_count (\d+)`).FindStringSubmatch(metrics)
	require.NotNil(t, count, "the scheduler exports tephra_gang_time_to_full_seconds")
	n, _ := strconv.Atoi(count[1])
	assert.GreaterOrEqual(t, n, 1, "the gang's time to full was measured")
	assert.Contains(t, metrics, "tephra_gang_waiting_pods")
}

// A gang of 100 (TephraGang's pilotedFromStart) is tried by one member, its pilot, while its
// minimum does not fit: the other 99 wait at PreEnqueue, with no scheduling cycle, status write or
// FailedScheduling event of their own (each used to get one, 2002 of them for make bench GI's two
// gangs of 1001). Once a node makes room, the pilot brings them and all 100 bind.
func TestBigGangIsTriedByItsPilotAlone(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "big-gang", 3, 32)

	// The members exist before their group, as a Job's pods may: the group's creation sends all
	// 100 to the active queue at once.
	for i := range 100 {
		createPod(t, env, newPod(ns, podSpec{name: fmt.Sprintf("big-%d", i), group: "big", cpu: "1", pool: nodes}))
	}
	createPodGroup(t, env, ns, "big", 100, nil)
	framework.Eventually(t, time.Minute, "the PodGroup to be Unschedulable for lack of resources", func() (bool, string) {
		return unschedulableForResources(ctx, env, ns, "big")
	})
	// Time for members that were tried to show it: the pilot's retries come with events.
	time.Sleep(3 * time.Second)
	refused := refusedMembers(t, env, ns)
	require.Equal(t, 1, len(refused), "one member, the pilot, is tried and refused")
	for pilot, msg := range refused {
		assert.Contains(t, msg, "NotEnoughResources", "the pilot %s says why", pilot)
	}
	// The pilot's event is written from a goroutine of its own after its status: wait for it.
	var failed map[string]bool
	framework.Eventually(t, 30*time.Second, "a FailedScheduling event", func() (bool, string) {
		events, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false, err.Error()
		}
		failed = map[string]bool{}
		for _, e := range events.Items {
			failed[e.Regarding.Name] = true
		}
		return len(failed) >= 1, fmt.Sprint(failed)
	})
	assert.Equal(t, 1, len(failed), "FailedScheduling events for the pilot alone")
	assert.Equal(t, 0, boundPods(t, env, ns))

	addNode(t, env, nodes, "big-gang-extra", 8)
	framework.Eventually(t, time.Minute, "all 100 members to be bound", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == 100, fmt.Sprintf("%d bound", n)
	})
}

// A gang of 3 members that each take 5 of a node's 8 "wide" slots: two nodes hold 16 slots, more
// than the 15 asked, but one member each. The scheduler places none of them (it used to place two,
// hold them at Permit and release them after every backoff) and says why; a third node lets all
// three run.
func TestGangWhoseMembersDoNotFitNodeByNodeIsNotPlaced(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	const wide corev1.ResourceName = "e2e.tephra.dev/wide-slots"
	selector := map[string]string{poolLabel: "wide"}
	shape := localcluster.NodeShape{CPU: "8", Memory: "64Gi", Pods: 110, Labels: selector, Extended: map[corev1.ResourceName]int64{wide: 8}}
	_, err := env.Cluster.CreateNodes(ctx, "wide", 2, shape)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, name := range []string{"wide-0", "wide-1", "wide-extra"} {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})

	createPodGroup(t, env, ns, "wide", 3, nil)
	for i := range 3 {
		pod := newPod(ns, podSpec{name: fmt.Sprintf("wide-%d", i), group: "wide", cpu: "100m", pool: selector})
		pod.Spec.Containers[0].Resources.Requests[wide] = resource.MustParse("5")
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{wide: resource.MustParse("5")}
		createPod(t, env, pod)
	}
	// Both PostFilter plugins' reasons reach the members: TephraQueue's (nothing it may evict, so
	// no dry run) and the gang's capacity check.
	framework.Eventually(t, time.Minute, "a member to say that the nodes hold 2 of the 3, and that nothing may be evicted for it", func() (bool, string) {
		assert.Equal(t, 0, boundPods(t, env, ns), "no member is bound")
		refused := refusedMembers(t, env, ns)
		if len(refused) == 0 {
			return false, "no PodScheduled condition yet"
		}
		var msg string
		for _, m := range refused {
			msg = m
		}
		return strings.Contains(msg, "the nodes' free capacity holds at most 2 of them") &&
			strings.Contains(msg, "reclaim: no pod may be evicted for it"), msg
	})
	for range 8 {
		require.Equal(t, 0, boundPods(t, env, ns), "no member is bound")
		time.Sleep(250 * time.Millisecond)
	}
	// Tried for the first time, the group goes on whole: its first member's PreFilter finds it
	// unfit, and the members already past PreEnqueue are refused with that verdict, once each;
	// the others wait for a pilot (later tries are the pilot's alone: plugins/gang's unit tests).
	// How many were past PreEnqueue depends on when each was created and queued.
	refused := refusedMembers(t, env, ns)
	assert.NotEmpty(t, refused)
	for name, msg := range refused {
		assert.Contains(t, msg, "the nodes' free capacity holds at most 2 of them", name)
	}

	_, err = env.Kube.CoreV1().Nodes().Create(ctx, localcluster.SimulatedNode("wide-extra", shape), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, env.Cluster.WaitNodesReady(ctx, "wide-extra"))
	framework.Eventually(t, time.Minute, "all 3 members to be bound", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == 3, fmt.Sprintf("%d bound", n)
	})
}

// Five jobs of 2 ps + 4 workers on 12 CPUs, their pods created interleaved. A job's pods do their
// 20 s of work only once all 6 run, as at a training rendezvous, so the test ends a job 20 s
// after its last pod started. The vanilla profile places pods one by one and deadlocks: no job
// ever has all its pods. Tephra runs every job to the end, and no job is ever partially bound
// for longer than its schedule timeout.
func TestGangsNeverDeadlock(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	const jobs, work, timeout = 5, 20 * time.Second, 15 * time.Second

	setup := func(scheduler string) string {
		ns := env.Namespace(t)
		nodes := env.Pool(t, "deadlock-"+scheduler[:6], 2, 6)
		gang := scheduler == schedulingv1alpha1.SchedulerName
		for j := range jobs {
			if gang {
				createPodGroup(t, env, ns, fmt.Sprintf("job-%d", j), 6, func(pg *schedulingv1alpha1.PodGroup) {
					pg.Spec.MinTaskMember = map[string]int32{"ps": 2, "worker": 4}
					pg.Spec.ScheduleTimeoutSeconds = ptr.To(int32(timeout.Seconds()))
				})
			}
		}
		tasks := []string{"ps", "ps", "worker", "worker", "worker", "worker"}
		for i, task := range tasks {
			for j := range jobs {
				pod := newPod(ns, podSpec{name: fmt.Sprintf("job-%d-%d", j, i), task: task, scheduler: scheduler, cpu: "1", pool: nodes})
				pod.Labels["e2e.tephra.dev/job"] = fmt.Sprintf("job-%d", j)
				if gang {
					pod.Labels[schedulingv1alpha1.PodGroupLabel] = fmt.Sprintf("job-%d", j)
				}
				createPod(t, env, pod)
			}
		}
		return ns
	}
	// drive plays the jobs' work and watches for partial gangs, until every job is done or the
	// deadline passes. It runs in its own goroutine: it reports with t.Errorf only.
	drive := func(ns string, deadline time.Time) (completed int, partialTooLong []string, final map[string]jobState) {
		started := map[string]time.Time{}
		partialSince := map[string]time.Time{}
		done := map[string]bool{}
		for time.Now().Before(deadline) && len(done) < jobs {
			state, err := sampleJobs(ctx, env, ns)
			if err != nil {
				t.Errorf("listing pods: %v", err)
				return
			}
			final = state
			now := time.Now()
			for job, s := range state {
				if done[job] {
					continue
				}
				if s.bound > 0 && s.bound < 6 {
					if partialSince[job].IsZero() {
						partialSince[job] = now
					}
					if now.Sub(partialSince[job]) > timeout {
						partialTooLong = append(partialTooLong, fmt.Sprintf("%s: %d of 6 bound for %v", job, s.bound, now.Sub(partialSince[job]).Round(time.Second)))
					}
				} else {
					delete(partialSince, job)
				}
				if s.running == 6 && started[job].IsZero() {
					started[job] = now
				}
				if !started[job].IsZero() && now.Sub(started[job]) >= work {
					// The job's work is done: its pods end, freeing their CPUs.
					if err := env.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
						metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=" + job}); err != nil {
						t.Errorf("ending %s: %v", job, err)
					}
					done[job] = true
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		return len(done), partialTooLong, final
	}

	vanillaNS := setup(vanillaScheduler)
	tephraNS := setup(schedulingv1alpha1.SchedulerName)
	var wg sync.WaitGroup
	var vanillaCompleted int
	var vanillaFinal map[string]jobState
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Long enough for two rounds of work, had any job got all its pods.
		vanillaCompleted, _, vanillaFinal = drive(vanillaNS, time.Now().Add(45*time.Second))
	}()
	completed, partialTooLong, final := drive(tephraNS, time.Now().Add(3*time.Minute))
	wg.Wait()

	assert.Equal(t, 0, vanillaCompleted, "the vanilla profile deadlocks: %s", describe(vanillaFinal))
	vanillaBound, vanillaFull := 0, 0
	for _, s := range vanillaFinal {
		vanillaBound += s.bound
		if s.running == 6 {
			vanillaFull++
		}
	}
	assert.Equal(t, 12, vanillaBound, "the vanilla profile fills all 12 CPUs with parts of jobs")
	assert.Equal(t, 0, vanillaFull, "no job has all 6 pods under the vanilla profile")

	assert.Equal(t, jobs, completed, "with Tephra every job completes: %s", describe(final))
	assert.Empty(t, partialTooLong, "no gang is partially bound for longer than its timeout")
}

// 50 gangs of 2 to 32 one-CPU pods, submitted at once on a cluster that fits about a third of
// them, all finish, each all-or-nothing.
func TestManyMixedGangsAllFinish(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 10*time.Minute)
	ns := env.Namespace(t)
	rng := rand.New(rand.NewSource(42))
	sizes := make([]int, 50)
	total := 0
	for i := range sizes {
		sizes[i] = 2 + rng.Intn(31)
		total += sizes[i]
	}
	cpus := (total + 2) / 3
	nodeCount := (cpus + 7) / 8
	nodes := env.Pool(t, "mixed", nodeCount, 8)
	t.Logf("%d gangs, %d pods, %d CPUs on %d nodes", len(sizes), total, nodeCount*8, nodeCount)

	for g, size := range sizes {
		name := fmt.Sprintf("g%02d", g)
		createPodGroup(t, env, ns, name, int32(size), nil)
	}
	for g, size := range sizes {
		for i := range size {
			createPod(t, env, newPod(ns, podSpec{
				name: fmt.Sprintf("g%02d-%d", g, i), group: fmt.Sprintf("g%02d", g), cpu: "1", pool: nodes,
				annotations: map[string]string{"sim.tephra.dev/duration": "4s"},
			}))
		}
	}
	partialSince := map[string]time.Time{}
	var violations []string
	framework.Eventually(t, 8*time.Minute, "every gang to finish", func() (bool, string) {
		state, err := sampleJobs(ctx, env, ns)
		if err != nil {
			return false, err.Error()
		}
		finished := 0
		now := time.Now()
		for job, s := range state {
			if s.succeeded == s.total {
				finished++
			}
			if s.bound > 0 && s.bound < s.total {
				if partialSince[job].IsZero() {
					partialSince[job] = now
				} else if now.Sub(partialSince[job]) > 15*time.Second {
					violations = append(violations, fmt.Sprintf("%s: %d of %d bound", job, s.bound, s.total))
				}
			} else {
				delete(partialSince, job)
			}
		}
		return finished == len(sizes), fmt.Sprintf("%d of %d gangs finished", finished, len(sizes))
	})
	assert.Empty(t, violations, "every gang is bound all at once")

	// Each PodGroup ends Completed with all its pods counted as succeeded.
	framework.Eventually(t, time.Minute, "every PodGroup to be Completed", func() (bool, string) {
		groups, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var wrong []string
		for _, pg := range groups.Items {
			if pg.Status.Phase != schedulingv1alpha1.PodGroupCompleted || pg.Status.Succeeded != pg.Spec.MinMember || pg.Status.Running != 0 {
				wrong = append(wrong, fmt.Sprintf("%s: %s %d/%d succeeded", pg.Name, pg.Status.Phase, pg.Status.Succeeded, pg.Spec.MinMember))
			}
		}
		return len(groups.Items) == len(sizes) && len(wrong) == 0, fmt.Sprint(wrong)
	})
}

// Members of a gang wait at Permit for a member held back by a scheduling gate. The scheduler is
// killed meanwhile and started again: no member was bound, and once the gate is lifted the whole
// gang runs.
func TestSchedulerRestartLeavesNoPartialGang(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "restart", 1, 8)

	createPodGroup(t, env, ns, "held", 4, func(pg *schedulingv1alpha1.PodGroup) {
		pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](60)
	})
	for i := range 3 {
		createPod(t, env, newPod(ns, podSpec{name: fmt.Sprintf("held-%d", i), group: "held", cpu: "1", pool: nodes}))
	}
	createPod(t, env, newPod(ns, podSpec{name: "held-3", group: "held", cpu: "1", pool: nodes, gates: []string{"e2e.tephra.dev/hold"}}))

	// Wait until the three ungated members are placed and waiting at Permit.
	framework.Eventually(t, time.Minute, "3 members waiting at Permit", func() (bool, string) {
		metrics, err := env.Cluster.SchedulerMetrics(ctx)
		if err != nil {
			return false, err.Error()
		}
		m := regexp.MustCompile(`(?m)^tephra_gang_waiting_pods (\S+)`).FindStringSubmatch(metrics)
		return m != nil && m[1] == "3", fmt.Sprint(m)
	})
	assert.Equal(t, 0, boundPods(t, env, ns))

	env.Cluster.KillComponent("tephra-scheduler")
	require.NoError(t, env.Cluster.StartComponent(ctx, "tephra-scheduler"))
	// The new scheduler takes over once the old one's lease expires; members must not be bound
	// in the meantime, nor after.
	for range 20 {
		require.Equal(t, 0, boundPods(t, env, ns), "no member of the gang is bound while one is held back")
		time.Sleep(time.Second)
	}

	pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "held-3", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Spec.SchedulingGates = nil
	_, err = env.Kube.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the whole gang to run after the restart", func() (bool, string) {
		jobs, err := sampleJobs(ctx, env, ns)
		if err != nil {
			return false, err.Error()
		}
		return jobs["held"].running == 4, describe(jobs)
	})
}

// A pod that names a PodGroup that does not exist waits, with an event that says so, instead of
// running alone; it runs once the group is created. The labels of scheduler-plugins and Volcano's
// annotation link pods to groups too.
func TestMissingPodGroupAndForeignLinks(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "links", 1, 8)

	a := newPod(ns, podSpec{name: "tephra-label", group: "later", cpu: "1", pool: nodes})
	b := newPod(ns, podSpec{name: "coscheduling-label", cpu: "1", pool: nodes})
	b.Labels[schedulingv1alpha1.CoschedulingPodGroupLabel] = "later"
	b.Labels["e2e.tephra.dev/job"] = "later"
	c := newPod(ns, podSpec{name: "volcano-annotation", cpu: "1", pool: nodes})
	c.Annotations = map[string]string{schedulingv1alpha1.VolcanoGroupNameAnnotation: "later"}
	c.Labels["e2e.tephra.dev/job"] = "later"
	for _, pod := range []*corev1.Pod{a, b, c} {
		createPod(t, env, pod)
	}
	framework.Eventually(t, time.Minute, "a PodGroupNotFound event on the pod", func() (bool, string) {
		events := env.Events(ns, "tephra-label")
		return regexp.MustCompile(`PodGroupNotFound: pod group "later" does not exist`).MatchString(events), events
	})
	time.Sleep(2 * time.Second)
	assert.Equal(t, 0, boundPods(t, env, ns), "pods of a missing group do not run alone")

	createPodGroup(t, env, ns, "later", 3, nil)
	framework.Eventually(t, time.Minute, "the three linked pods to run together", func() (bool, string) {
		jobs, err := sampleJobs(ctx, env, ns)
		if err != nil {
			return false, err.Error()
		}
		return jobs["later"].running == 3, describe(jobs)
	})
}

// unschedulableForResources says whether a PodGroup's Unschedulable condition is true for lack of
// resources, and what its status shows.
func unschedulableForResources(ctx context.Context, env *framework.Env, ns, name string) (bool, string) {
	pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == schedulingv1alpha1.ReasonNotEnoughResources,
		fmt.Sprintf("phase %s, conditions %v", pg.Status.Phase, pg.Status.Conditions)
}

// refusedMembers maps each pod of the namespace that the scheduler refused (PodScheduled False) to
// the condition's message.
func refusedMembers(t *testing.T, env *framework.Env, ns string) map[string]string {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, pod := range pods.Items {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				out[pod.Name] = c.Message
			}
		}
	}
	return out
}
