// Package elastic checks elastic jobs end to end: pods above a group's minimum run only on
// capacity no minimum can use, are placed after every pending minimum, and are the first to go
// when a minimum or a queue below its share needs room; preemption evicts no more than needed and
// never loops.
//
// A job here is what the Tephra Job controller makes of one: a PodGroup with minMember =
// minAvailable and one pod per replica. Like the Job controller, the test recreates a job's pods
// that were evicted, so a job keeps its replica count and grows back when capacity frees up.
package elastic

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// TestMain runs the package as shipped, usage history included: minutes of one queue running alone
// weigh nothing against its week-long half-life, so shares stay by weight (docs/queues.md).
func TestMain(m *testing.M) {
	// A preemptor binds soon after its victims go, never at the periodic flush (issue #38).
	framework.CheckPreemptorsInEveryTest()
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// cluster is one test's 10 GPUs (5 nodes of 2) of a resource of its own, and queues q1, q2.
type cluster struct {
	env  *framework.Env
	ns   string
	gpu  corev1.ResourceName
	pool map[string]string
	q1   string
	q2   string
	// priority names the PriorityClass of a job's pods (none if absent).
	priority map[string]string
}

func newCluster(t *testing.T, name string) *cluster {
	t.Helper()
	return newClusterOf(t, name, 5)
}

// newClusterOf is newCluster with nodes nodes of 2 GPUs.
func newClusterOf(t *testing.T, name string, nodes int) *cluster {
	t.Helper()
	env := framework.Shared(t)
	c := &cluster{env: env, ns: env.Namespace(t), gpu: corev1.ResourceName("e2e.tephra.dev/gpu-" + name),
		pool: map[string]string{"e2e.tephra.dev/pool": name}, q1: name + "-q1", q2: name + "-q2"}
	_, err := env.Cluster.CreateNodes(context.Background(), name, nodes, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: c.pool, Extended: map[corev1.ResourceName]int64{c.gpu: 2},
	})
	require.NoError(t, err)
	for _, q := range []string{c.q1, c.q2} {
		_, err := env.Tephra.SchedulingV1alpha1().Queues().Create(context.Background(), &schedulingv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: q}, Spec: schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for i := range nodes {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%d", name, i), metav1.DeleteOptions{})
		}
		for _, q := range []string{c.q1, c.q2} {
			_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), q, metav1.DeleteOptions{})
		}
	})
	return c
}

// jobSpec is a job of replicas one-GPU pods with a minimum of minAvailable in a queue.
type jobSpec struct {
	name, queue            string
	minAvailable, replicas int
}

// job submits one job and keeps its replicas (see jobs).
func (c *cluster) job(t *testing.T, name, queue string, minAvailable, replicas int) (stop func()) {
	t.Helper()
	return c.jobs(t, jobSpec{name, queue, minAvailable, replicas})[0]
}

// jobs submits jobs together, their pods created interleaved as concurrent submissions would,
// and keeps each job's replicas (recreating evicted pods) until the test ends or its stop is
// called.
func (c *cluster) jobs(t *testing.T, specs ...jobSpec) (stops []func()) {
	t.Helper()
	for _, j := range specs {
		_, err := c.env.Tephra.SchedulingV1alpha1().PodGroups(c.ns).Create(context.Background(), &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: c.ns},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(j.minAvailable), Queue: j.queue,
				MinResources: corev1.ResourceList{c.gpu: *resource.NewQuantity(int64(j.minAvailable), resource.DecimalSI)}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	most := 0
	for _, j := range specs {
		most = max(most, j.replicas)
	}
	for i := range most {
		for _, j := range specs {
			if i < j.replicas {
				c.createPod(context.Background(), t, j.name, i)
			}
		}
	}
	for _, j := range specs {
		stops = append(stops, c.keep(t, j))
	}
	return stops
}

func (c *cluster) createPod(ctx context.Context, t *testing.T, job string, i int) {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", job, i), Namespace: c.ns,
			Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: job, "e2e.tephra.dev/job": job}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: c.pool,
			PriorityClassName: c.priority[job],
			Containers: []corev1.Container{{Name: "train", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{c.gpu: one}, Limits: corev1.ResourceList{c.gpu: one},
			}}},
		},
	}
	if _, err := c.env.Kube.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
		t.Errorf("creating pod %s: %v", pod.Name, err)
	}
}

// keep recreates the job's deleted pods, as the Job controller does, until stopped.
func (c *cluster) keep(t *testing.T, j jobSpec) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(300 * time.Millisecond)
			pods, err := c.env.Kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=" + j.name})
			if err != nil {
				continue
			}
			exists := map[string]bool{}
			for _, p := range pods.Items {
				exists[p.Name] = true
			}
			for i := range j.replicas {
				if !exists[fmt.Sprintf("%s-%d", j.name, i)] {
					c.createPod(ctx, t, j.name, i)
				}
			}
		}
	})
	stop = func() {
		cancel()
		done.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// finish ends a job: its keeper stops and its pods are deleted.
func (c *cluster) finish(t *testing.T, name string, stop func()) {
	t.Helper()
	stop()
	require.NoError(t, c.env.Kube.CoreV1().Pods(c.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e.tephra.dev/job=" + name}))
}

// bound counts each job's live pods bound to a node.
func (c *cluster) bound(ctx context.Context) (map[string]int, error) {
	pods, err := c.env.Kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out[p.Labels["e2e.tephra.dev/job"]]++
		}
	}
	return out, nil
}

func (c *cluster) waitBound(t *testing.T, want map[string]int, timeout time.Duration) {
	t.Helper()
	var last map[string]int
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := c.bound(ctx)
		if err != nil {
			return false, nil
		}
		last = got
		for job, n := range want {
			if got[job] != n {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "bound pods per job: want %v, last %v", want, last)
}

func (c *cluster) holdBound(t *testing.T, want map[string]int, during time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(during); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		got, err := c.bound(context.Background())
		require.NoError(t, err)
		for job, n := range want {
			require.Equal(t, n, got[job], "job %s changed after settling (all: %v)", job, got)
		}
	}
}

// evictions counts the Preempted and Reclaimed events in the namespace.
func (c *cluster) evictions(t *testing.T) int {
	t.Helper()
	events, err := c.env.Kube.EventsV1().Events(c.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, e := range events.Items {
		if e.Reason == "Preempted" || e.Reason == "Reclaimed" {
			n++
		}
	}
	return n
}

// waitEvictions counts the Preempted and Reclaimed events in the namespace once there are n of
// them, or once 30 s have passed, failing the test then with those there are; the caller asserts
// the count. The recorder writes each event from a goroutine of its own after the eviction it goes
// with, so a test that saw the pods go may list the events before the last of them is there.
func (c *cluster) waitEvictions(t *testing.T, n int) int {
	t.Helper()
	got := 0
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := c.env.Kube.EventsV1().Events(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got, seen = 0, nil
		for _, e := range events.Items {
			if e.Reason == "Preempted" || e.Reason == "Reclaimed" {
				got++
				seen = append(seen, fmt.Sprintf("%s %s: %s", e.Regarding.Name, e.Reason, e.Note))
			}
		}
		return got >= n, nil
	})
	if err != nil {
		t.Errorf("waited 30s for %d Preempted or Reclaimed events, saw %d: %v", n, got, seen)
	}
	return got
}

// watchMinimum samples the jobs' bound pods until stopped and records the lowest count of each.
func (c *cluster) watchMinimum(jobs ...string) (stop func() map[string]int) {
	ctx, cancel := context.WithCancel(context.Background())
	lowest := map[string]int{}
	var mu sync.Mutex
	var done sync.WaitGroup
	done.Go(func() {
		for ctx.Err() == nil {
			if got, err := c.bound(ctx); err == nil {
				mu.Lock()
				for _, j := range jobs {
					if v, ok := lowest[j]; !ok || got[j] < v {
						lowest[j] = got[j]
					}
				}
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return func() map[string]int {
		cancel()
		done.Wait()
		return lowest
	}
}

// 1. Alone, a job grows into all idle GPUs: 10 pods for a minimum of 5.
// 5. When the job that took its elastic GPUs finishes, it grows back to 10.
func TestElasticJobGrowsIntoIdleCapacity(t *testing.T) {
	c := newCluster(t, "grow")
	c.job(t, "j1", c.q1, 5, 10)
	c.waitBound(t, map[string]int{"j1": 10}, time.Minute)
	assert.Equal(t, 0, c.evictions(t))
}

// 2. Two such jobs submitted together both run their minimum first; no elastic pod runs while
// a minimum is pending.
func TestMinimumsBeforeElasticPods(t *testing.T) {
	c := newCluster(t, "together")
	var violations []string
	ctx, cancel := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for ctx.Err() == nil {
			if got, err := c.bound(ctx); err == nil {
				if (got["j1"] > 5 && got["j2"] < 5) || (got["j2"] > 5 && got["j1"] < 5) {
					violations = append(violations, fmt.Sprint(got))
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	c.jobs(t, jobSpec{"j1", c.q1, 5, 10}, jobSpec{"j2", c.q1, 5, 10})
	c.waitBound(t, map[string]int{"j1": 5, "j2": 5}, time.Minute)
	c.holdBound(t, map[string]int{"j1": 5, "j2": 5}, 5*time.Second)
	cancel()
	sampler.Wait()
	assert.Empty(t, violations, "an elastic pod ran while the other job's minimum was pending")
	assert.Equal(t, 0, c.evictions(t), "nothing had to be evicted")
}

// 3. j1 runs 10; j2 arrives in the same queue: exactly 5 of j1's elastic pods are preempted, j2
// runs its minimum, j1's minimum is never touched.
// 5. When j2 finishes, j1 grows back to 10.
// 7. No more evictions than needed, and no loop.
func TestMinimumPreemptsElasticPodsInQueue(t *testing.T) {
	c := newCluster(t, "inqueue")
	c.job(t, "j1", c.q1, 5, 10)
	c.waitBound(t, map[string]int{"j1": 10}, time.Minute)
	lowest := c.watchMinimum("j1")
	stopJ2 := c.job(t, "j2", c.q1, 5, 5)
	c.waitBound(t, map[string]int{"j1": 5, "j2": 5}, time.Minute)
	c.holdBound(t, map[string]int{"j1": 5, "j2": 5}, 5*time.Second)
	assert.Equal(t, 5, c.waitEvictions(t, 5), "exactly the 5 GPUs j2's minimum needs were freed")
	assert.GreaterOrEqual(t, lowest()["j1"], 5, "j1's minimum was never touched")

	c.finish(t, "j2", stopJ2)
	c.waitBound(t, map[string]int{"j1": 10}, time.Minute)
	assert.Equal(t, 5, c.evictions(t), "growing back evicts nobody")
}

// 4. j1 runs 10 in q1; j3 arrives in q2: j1's elastic pods are reclaimed until q2 has its
// deserved 5, and no further.
// 5. When j3 finishes, j1 grows back to 10.
func TestReclaimTakesElasticPodsFirst(t *testing.T) {
	c := newCluster(t, "reclaim")
	c.job(t, "j1", c.q1, 5, 10)
	c.waitBound(t, map[string]int{"j1": 10}, time.Minute)
	lowest := c.watchMinimum("j1")
	stopJ3 := c.job(t, "j3", c.q2, 5, 5)
	c.waitBound(t, map[string]int{"j1": 5, "j3": 5}, time.Minute)
	c.holdBound(t, map[string]int{"j1": 5, "j3": 5}, 5*time.Second)
	assert.Equal(t, 5, c.waitEvictions(t, 5), "q2 reclaimed exactly its deserved 5")
	assert.GreaterOrEqual(t, lowest()["j1"], 5, "j1's minimum was never touched")

	c.finish(t, "j3", stopJ3)
	c.waitBound(t, map[string]int{"j1": 10}, time.Minute)
}
