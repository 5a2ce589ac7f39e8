// Package multikueue checks Tephra Jobs across clusters on Kueue's MultiKueue, end to end: a
// manager and two workers, each its own local control plane with a real Kueue
// (localcluster.KueueVersion) and Tephra installed with the components docs/kueue.md names, set
// up with manifests/examples/multikueue/. A Tephra Job submitted to the manager runs on a worker
// through Kueue's generic adapter for custom jobs.
//
// The tests share the clusters and run in order: the last one stops a worker's control plane.
package multikueue

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/kueue"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const (
	ns          = metav1.NamespaceDefault // where the example's LocalQueues are, on every cluster
	localQueue  = "team"
	simDuration = "sim.tephra.dev/duration"
	// workerLostTimeout is how long the manager keeps a job on a worker it lost touch with.
	workerLostTimeout = 20 * time.Second
)

var (
	setup *localcluster.MultiKueueSetup
	// envs are the clusters by name: "manager", "worker-1", "worker-2".
	envs = map[string]*framework.Env{}
	dyns = map[string]dynamic.Interface{}

	workloads     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	clusterQueues = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "tephra-e2e-multikueue-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Tephra as docs/kueue.md tells a user to install it on a manager and on a worker (the
	// manifests StartMultiKueue defaults to).
	setup, err = localcluster.StartMultiKueue(ctx, localcluster.MultiKueueOptions{
		Dir: dir, Log: os.Stderr,
		// The manager's tephra-controllers' requests are audited: its webhook's reads of Kueue's
		// queues (TestAJobThatEndsOnItsWorkerEndsOnTheManager).
		Manager:           localcluster.Options{AuditTephra: true},
		WorkerLostTimeout: workerLostTimeout,
	})
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the clusters:", err)
	} else if err = prepare(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the clusters:", err)
	} else {
		code = m.Run()
	}
	if setup != nil {
		setup.Stop()
		for _, c := range append([]*localcluster.Cluster{setup.Manager}, setup.Workers["worker-1"], setup.Workers["worker-2"]) {
			if c == nil {
				continue
			}
			if code == 0 {
				code = framework.CheckRBAC(c)
			}
			if code != 0 {
				framework.DumpLogs(c.Dir())
			}
		}
	}
	if code == 0 && os.Getenv("TEPHRA_E2E_KEEP") == "" {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "cluster state and logs kept in", dir)
	}
	return code
}

// prepare applies the example's Kueue setup (manifests/examples/multikueue/) and keeps clients
// for each cluster.
func prepare(ctx context.Context) error {
	if err := setup.ApplyExample(ctx); err != nil {
		return err
	}
	clusters := map[string]*localcluster.Cluster{"manager": setup.Manager}
	for name, c := range setup.Workers {
		clusters[name] = c
	}
	for name, c := range clusters {
		envs[name] = &framework.Env{Cluster: c, Kube: c.Client, Tephra: c.Tephra}
		var err error
		if dyns[name], err = dynamic.NewForConfig(c.Config); err != nil {
			return err
		}
	}
	return nil
}

// clusters skips a test under -short: it needs the local control planes.
func clusters(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e test: needs the local control planes (run without -short)")
	}
}

// exampleJob is manifests/examples/multikueue/job.yaml, named name, its pods running for
// duration.
func exampleJob(t *testing.T, name, duration string) *batchv1alpha1.Job {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, localcluster.MultiKueueExampleJob))
	require.NoError(t, err)
	job := &batchv1alpha1.Job{}
	require.NoError(t, yaml.UnmarshalStrict(data, job))
	require.Equal(t, batchv1alpha1.MultiKueueManager, ptr.Deref(job.Spec.ManagedBy, ""), "the example leaves the Job to MultiKueue")
	require.Equal(t, localQueue, job.Labels[kueue.QueueNameLabel])
	job.Name = name
	for i := range job.Spec.Tasks {
		job.Spec.Tasks[i].Template.Annotations[simDuration] = duration
	}
	return job
}

// fill runs a Job of pods pods of a CPU on a worker, in its own LocalQueue (not dispatched),
// until deleted.
func fill(t *testing.T, worker, name string, pods int32) {
	t.Helper()
	env := envs[worker]
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kueue.QueueNameLabel: localQueue}},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{
			Name: "worker", Replicas: pods,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				}}},
			}},
		}}},
	}
	env.CreateJob(t, ns, job)
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s's own job %s to run its %d pods", worker, name, pods), func() (bool, string) {
		running := env.GetJob(t, ns, name).Status.Running
		return running == pods, fmt.Sprintf("%d running; events: %s", running, env.Events(ns, name))
	})
}

// unfill deletes a Job on a worker.
func unfill(t *testing.T, worker, name string) {
	t.Helper()
	err := envs[worker].Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	if !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
}

// jobOn returns a Job on a cluster, or nil if there is none.
func jobOn(t *testing.T, cluster, name string) *batchv1alpha1.Job {
	t.Helper()
	job, err := envs[cluster].Tephra.BatchV1alpha1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return job
}

// podsOf counts the pods of a Job on a cluster that are not being deleted.
func podsOf(t *testing.T, cluster, job string) int {
	t.Helper()
	pods, err := envs[cluster].Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && owner.Name == job && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// managerWorkload returns the manager's Workload of a Job.
func managerWorkload(t *testing.T, job *batchv1alpha1.Job) (*unstructured.Unstructured, error) {
	t.Helper()
	return dyns["manager"].Resource(workloads).Namespace(ns).Get(context.Background(), kueue.WorkloadName(job), metav1.GetOptions{})
}

// statusLine is what `kubectl get tjob` shows of a Job's status.
func statusLine(job *batchv1alpha1.Job) string {
	if job == nil {
		return "(none)"
	}
	s := job.Status
	return fmt.Sprintf("phase %s, %d pending, %d running, %d succeeded", s.State.Phase, s.Pending, s.Running, s.Succeeded)
}

// waitRunsOn waits until a Job submitted to the manager runs whole on worker, while the clusters
// notOn never get it, and the manager's copy shows the worker's status.
func waitRunsOn(t *testing.T, name, worker string, pods int32, timeout time.Duration, notOn ...string) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("job %s to run its %d pods on %s, and the manager to show it", name, pods, worker), func() (bool, string) {
		for _, other := range notOn {
			require.Nil(t, jobOn(t, other, name), "MultiKueue creates the job only on the worker that admits it, not on %s", other)
		}
		there, here := jobOn(t, worker, name), jobOn(t, "manager", name)
		ok := there != nil && here != nil && there.Status.Running == pods &&
			statusLine(here) == statusLine(there) && here.Status.State.Phase == batchv1alpha1.JobRunning
		return ok, fmt.Sprintf("on %s: %s; on the manager: %s; manager's events: %s", worker, statusLine(there), statusLine(here), envs["manager"].Events(ns, name))
	})
}

// A Tephra Job submitted to the manager runs on the worker with room and not on the full one;
// the manager shows the worker's status and runs none of its pods; deleting it on the manager
// removes it, and its pods, from the worker.
func TestAJobRunsOnTheWorkerWithRoomAndGoesWithTheManagersCopy(t *testing.T) {
	clusters(t)
	fill(t, "worker-1", "filler-1", 8) // worker-1's whole ClusterQueue and nodes
	t.Cleanup(func() { unfill(t, "worker-1", "filler-1") })

	job, err := envs["manager"].Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), exampleJob(t, "train", "10m"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitRunsOn(t, "train", "worker-2", 4, 3*time.Minute, "worker-1")

	require.Zero(t, podsOf(t, "manager", "train"), "no pod of a Job MultiKueue runs is made on the manager")
	remote := jobOn(t, "worker-2", "train")
	require.Nil(t, remote.Spec.ManagedBy, "the worker's copy is Tephra's to run")
	require.NotEmpty(t, remote.Labels[kueue.PrebuiltWorkloadLabel])
	wl, err := managerWorkload(t, job)
	require.NoError(t, err)
	cluster, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
	require.Equal(t, "worker-2", cluster)
	// The event is written after the status it goes with.
	framework.WaitEventOnAny(t, envs["manager"], ns, []string{"train"}, "runs the job on worker cluster worker-2")
	framework.Eventually(t, time.Minute, "the worker's Workload to be the worker's job's", func() (bool, string) {
		remoteWl, err := dyns["worker-2"].Resource(workloads).Namespace(ns).Get(context.Background(), wl.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		owner := metav1.GetControllerOf(remoteWl)
		return owner != nil && owner.UID == remote.UID, fmt.Sprintf("controller %v", owner)
	})

	require.NoError(t, envs["manager"].Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), "train", metav1.DeleteOptions{}))
	framework.Eventually(t, 2*time.Minute, "the worker's copy and its pods to go with the manager's job", func() (bool, string) {
		there, pods := jobOn(t, "worker-2", "train"), podsOf(t, "worker-2", "train")
		_, err := managerWorkload(t, job)
		return there == nil && pods == 0 && apierrors.IsNotFound(err),
			fmt.Sprintf("on worker-2: %s, %d pods; manager's Workload: %v", statusLine(there), pods, err)
	})
}

// A job that ends on its worker ends on the manager: the manager's copy completes with the
// worker's status, its Workload finishes and its quota comes back to the manager's ClusterQueue.
// The job names no manager: tephra-controllers' webhook leaves it to MultiKueue, since its queue
// dispatches to the workers.
func TestAJobThatEndsOnItsWorkerEndsOnTheManager(t *testing.T) {
	clusters(t)
	fill(t, "worker-1", "filler-2", 8)
	t.Cleanup(func() { unfill(t, "worker-1", "filler-2") })

	short := exampleJob(t, "short", "3s")
	short.Spec.ManagedBy = nil
	job, err := envs["manager"].Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), short, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, batchv1alpha1.MultiKueueManager, ptr.Deref(job.Spec.ManagedBy, ""), "a Job of a MultiKueue queue is MultiKueue's")
	requests, err := setup.Manager.AuditedRequests()
	require.NoError(t, err)
	read := map[string]bool{}
	for _, r := range requests {
		// client-go's informers list within their watch where the apiserver allows.
		if r.User == "system:serviceaccount:tephra-system:tephra-controllers" && r.APIGroup == "kueue.x-k8s.io" && r.Code != 403 && r.Verb == "watch" {
			read[r.Resource] = true
		}
	}
	for _, res := range []string{"localqueues", "clusterqueues", "admissionchecks"} {
		require.True(t, read[res], "the webhook reads %s from its cache (tephra-controllers-kueue's rule); watched: %v", res, read)
	}
	t.Cleanup(func() {
		_ = envs["manager"].Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), "short", metav1.DeleteOptions{})
	})
	framework.Eventually(t, 3*time.Minute, "the job to complete on the manager, its Workload to finish and its quota to return", func() (bool, string) {
		here := jobOn(t, "manager", "short")
		wl, err := managerWorkload(t, job)
		if err != nil {
			return false, err.Error()
		}
		finished, reason, _ := framework.Condition(wl, "Finished")
		cq, err := dyns["manager"].Resource(clusterQueues).Get(context.Background(), localQueue, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		admitted, _, _ := unstructured.NestedInt64(cq.Object, "status", "admittedWorkloads")
		return here.Status.State.Phase == batchv1alpha1.JobCompleted && here.Status.Succeeded == 4 && finished == "True" && admitted == 0,
			fmt.Sprintf("manager: %s; Workload finished %q (%s); ClusterQueue admitted %d; events: %s",
				statusLine(here), finished, reason, admitted, envs["manager"].Events(ns, "short"))
	})
	require.Zero(t, podsOf(t, "worker-1", "short"), "the full worker never ran it")
}

// With the control plane of the worker that runs a job stopped, the manager gives up on it after
// workerLostTimeout and dispatches the job again: it runs on the other worker. Last: the worker
// stays down.
func TestAJobOfALostWorkerRunsOnTheOther(t *testing.T) {
	clusters(t)
	fill(t, "worker-1", "filler-3", 8)
	_, err := envs["manager"].Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), exampleJob(t, "resilient", "10m"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitRunsOn(t, "resilient", "worker-2", 4, 3*time.Minute, "worker-1")

	unfill(t, "worker-1", "filler-3")
	framework.Eventually(t, time.Minute, "worker-1 to have room", func() (bool, string) {
		pods := podsOf(t, "worker-1", "filler-3")
		return pods == 0, fmt.Sprintf("%d filler pods", pods)
	})
	setup.Workers["worker-2"].KillComponent(localcluster.APIServer)
	lost := time.Now()

	waitRunsOn(t, "resilient", "worker-1", 4, workerLostTimeout+3*time.Minute)
	t.Logf("ran again on worker-1 %v after worker-2's apiserver stopped (workerLostTimeout %v)", time.Since(lost).Round(time.Second), workerLostTimeout)
	// Kueue's event is written after the eviction it goes with.
	framework.WaitEventOnAny(t, envs["manager"], ns, []string{"resilient"}, "Kueue evicted Workload")
	wl, err := managerWorkload(t, jobOn(t, "manager", "resilient"))
	require.NoError(t, err)
	cluster, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
	require.Equal(t, "worker-1", cluster)
}
