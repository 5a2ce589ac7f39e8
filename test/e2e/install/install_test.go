// Package install checks the shipped install end to end: two replicas of each component run from
// manifests/ as their ServiceAccounts, a killed leader's standby takes over with nothing lost,
// double-created or left partly bound, and the controllers' metrics are only for authorized callers.
package install

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		Manifests:   localcluster.KustomizeManifests("test/e2e/install/testdata/ha"),
		AuditTephra: true,
		// Upstream's gang API and composite groups (which need TopologyAwareWorkloadScheduling), so
		// that the upstream PodGroup and composite adapters run and their RBAC is audited.
		FeatureGates:  "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true",
		RuntimeConfig: "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
		// As installed, tephra-scheduler runs without the gate: no upstream pod-group cycle,
		// which would hold pods of a missing PodGroup without a word (docs/gang.md).
		TephraSchedulerWithoutFeatureGates: true,
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

const poolLabel = "e2e.tephra.dev/pool"

// Kill the leading scheduler and controllers (SIGKILL) while gangs and Jobs are in flight: the
// standbys take over within the lease duration, every gang ends whole, every Job completes, and
// no pod or PodGroup is created twice.
func TestLeaderFailover(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	ns := env.Namespace(t)
	require.Equal(t, 2, env.Cluster.Replicas(localcluster.Scheduler), "the HA install runs two schedulers")
	require.Equal(t, 2, env.Cluster.Replicas(localcluster.Controllers), "the HA install runs two controller managers")

	pool := map[string]string{poolLabel: "failover"}
	_, err := env.Cluster.CreateNodes(ctx, "failover", 4, localcluster.NodeShape{CPU: "8", Memory: "32Gi", Labels: pool})
	require.NoError(t, err)

	schedulerLeader := waitLeader(t, env, localcluster.Scheduler)
	controllersLeader := waitLeader(t, env, localcluster.Controllers)

	// Every pod created in the namespace, counted from a watch that starts before any exists.
	added := watchPodAdditions(t, env, ns)

	const gangs, gangSize = 6, 4
	for g := range gangs / 2 {
		createGang(t, env, ns, fmt.Sprintf("gang-%d", g), gangSize, pool)
	}
	// Once the first member is bound, the leaders die mid-flight.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, pod := range pods.Items {
			if pod.Spec.NodeName != "" {
				return true, nil
			}
		}
		return false, nil
	}), "a first gang member is bound")
	if pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		bound := 0
		for _, pod := range pods.Items {
			if pod.Spec.NodeName != "" {
				bound++
			}
		}
		t.Logf("killing the leaders %s and %s with %d of %d gang pods bound", schedulerLeader, controllersLeader, bound, len(pods.Items))
	}
	env.Cluster.KillComponent(schedulerLeader)
	env.Cluster.KillComponent(controllersLeader)
	killed := time.Now()
	t.Cleanup(func() {
		// The package ends with both replicas again, as a Deployment would restart them.
		for _, name := range []string{schedulerLeader, controllersLeader} {
			if !env.Cluster.Running(name) {
				assert.NoError(t, env.Cluster.StartComponent(context.Background(), name))
			}
		}
	})

	// More work while no leader acts: the rest of the gangs and two Jobs.
	for g := gangs / 2; g < gangs; g++ {
		createGang(t, env, ns, fmt.Sprintf("gang-%d", g), gangSize, pool)
	}
	jobs := []string{"train-a", "train-b"}
	for _, name := range jobs {
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, simJob(name, 3, pool), metav1.CreateOptions{})
		require.NoError(t, err)
	}

	for _, lease := range []struct {
		component, namespace, name string
	}{
		{localcluster.Scheduler, "kube-system", "tephra-scheduler"},
		{localcluster.Controllers, "tephra-system", "tephra-controllers"},
	} {
		standby := waitLeader(t, env, lease.component) // the killed leader runs no more
		l, err := env.Kube.CoordinationV1().Leases(lease.namespace).Get(ctx, lease.name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, l.Spec.AcquireTime)
		require.NotNil(t, l.Spec.LeaseDurationSeconds)
		// The standby deems the lease expired its duration after it last saw the dead leader
		// renew, and it looks every 2 s jittered by up to 120 % (4.4 s): that look may come late
		// once for the last renewal and once for the expiry.
		limit := time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second + 9*time.Second
		t.Logf("%s: %s took over %v after %s was killed", lease.component, standby,
			l.Spec.AcquireTime.Sub(killed).Round(100*time.Millisecond), killedName(lease.component, schedulerLeader, controllersLeader))
		assert.LessOrEqual(t, l.Spec.AcquireTime.Sub(killed), limit,
			"%s: the standby %s took over %v after the leader was killed (lease %ds)", lease.component, standby,
			l.Spec.AcquireTime.Sub(killed).Round(time.Second), *l.Spec.LeaseDurationSeconds)
	}

	// Every gang whole, every Job Completed.
	for g := range gangs {
		waitGangBound(t, env, ns, fmt.Sprintf("gang-%d", g), gangSize)
	}
	for _, name := range jobs {
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && job.Status.State.Phase == batchv1alpha1.JobCompleted, nil
		}), "job %s completes", name)
		job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(0), job.Status.RetryCount, "job %s was not restarted by the failover", name)
		assert.Equal(t, int32(3), job.Status.Succeeded, "job %s: each pod succeeded once", name)
	}

	// Nothing created twice: no pod was deleted and created again (each name added once; names are
	// fixed, so a second create of a live pod fails), and each Job has one PodGroup.
	for name, n := range added() {
		assert.Equal(t, 1, n, "pod %s was created %d times", name, n)
	}
	assert.Len(t, added(), gangs*gangSize+len(jobs)*3, "every pod of the gangs and Jobs, once")
	groups, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, groups.Items, gangs+len(jobs), "one PodGroup per gang and per Job")
}

// The controllers' /metrics answer only callers the apiserver authenticates and authorizes: a
// scraper bound to the shipped tephra-metrics-reader reads them; an account without it and an
// anonymous caller do not.
func TestControllersMetricsNeedAuthorization(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	leader := waitLeader(t, env, localcluster.Controllers)

	// A leader just elected exports the queue metrics once it has accounted the queues.
	framework.Eventually(t, time.Minute, "the leader exports the queue metrics", func() (bool, string) {
		metrics, err := env.Cluster.ControllersMetrics(ctx, leader)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(metrics, "tephra_queue_"), "no tephra_queue_ series"
	})

	var refused *localcluster.MetricsError
	_, err := env.Cluster.ControllersMetricsAs(ctx, leader, "")
	require.ErrorAs(t, err, &refused, "anonymous callers are refused")
	assert.Equal(t, 401, refused.Status)

	token, err := env.Cluster.ServiceAccountToken(ctx, "default", "not-a-scraper", "")
	require.NoError(t, err)
	_, err = env.Cluster.ControllersMetricsAs(ctx, leader, token)
	require.ErrorAs(t, err, &refused, "an account without tephra-metrics-reader is refused")
	assert.Equal(t, 403, refused.Status)
}

// killedName is the leader of a component that the test killed.
func killedName(component, scheduler, controllers string) string {
	if component == localcluster.Scheduler {
		return scheduler
	}
	return controllers
}

// waitLeader waits until a replica of the component leads and returns its name.
func waitLeader(t *testing.T, env *framework.Env, component string) string {
	t.Helper()
	var leader string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var err error
		leader, err = env.Cluster.Leader(component)
		return leader != "", err
	})
	require.NoError(t, err, "waiting for a %s replica to lead", component)
	return leader
}

// watchPodAdditions counts ADDED events per pod name in a namespace until the test ends.
func watchPodAdditions(t *testing.T, env *framework.Env, ns string) func() map[string]int {
	t.Helper()
	w, err := env.Kube.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var mu sync.Mutex
	added := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				mu.Lock()
				added[pod.Name]++
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(added))
		for k, v := range added {
			out[k] = v
		}
		return out
	}
}

func createGang(t *testing.T, env *framework.Env, ns, name string, size int, pool map[string]string) {
	t.Helper()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: int32(size)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range size {
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns,
				Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: name},
			},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName,
				NodeSelector:  pool,
				Containers: []corev1.Container{{
					Name: "work", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// waitGangBound waits until all of a gang's pods are bound; a gang left partly bound fails the
// test with how many were.
func waitGangBound(t *testing.T, env *framework.Env, ns, name string, size int) {
	t.Helper()
	var bound int
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedulingv1alpha1.PodGroupLabel + "=" + name})
		if err != nil {
			return false, nil
		}
		bound = 0
		for _, pod := range pods.Items {
			if pod.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == size, nil
	})
	if err != nil {
		t.Fatalf("gang %s: %d of %d pods bound after the failover; events of its first pod: %s", name, bound, size, env.Events(ns, name+"-0"))
	}
}

// simJob is a Tephra Job of one task whose simulated pods succeed after 5 s.
func simJob(name string, replicas int32, pool map[string]string) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1alpha1.JobSpec{
			MinAvailable: ptr.To(replicas),
			MaxRetry:     3,
			Tasks: []batchv1alpha1.TaskSpec{{
				Name:     "worker",
				Replicas: replicas,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sim.tephra.dev/duration": "5s"}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						NodeSelector:  pool,
						Containers: []corev1.Container{{
							Name: "main", Image: "busybox",
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
						}},
					},
				},
			}},
		},
	}
}
