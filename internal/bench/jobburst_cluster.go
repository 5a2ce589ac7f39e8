package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/procstat"
)

// burstNamespace holds every burst, one at a time.
const burstNamespace = "job-burst"

// burstNodePrefix names the burst's simulated nodes.
const burstNodePrefix = "burst-node"

// burstCluster is the one control plane every burst runs on: Tephra installed as `make up`
// installs it (localcluster's defaults: kube-controller-manager with all its controllers, kwok,
// tephra-scheduler and tephra-controllers as their ServiceAccounts, with the shipped manifests),
// unlike the matrix's, which leaves out everything but the scheduler under test. Both kinds of
// Job need their controllers, and the same cluster for both keeps the comparison to them.
type burstCluster struct {
	// benchCluster lends its namespace creation and apiserver request counts; no configuration
	// of the matrix runs here, so its config is nil.
	*benchCluster
	// jobs and tephraJobs create the Jobs: as many requests at once as there are workers, with no
	// client-side rate limit to speak of. Both speak JSON (Tephra's CRDs have no protobuf), so
	// that neither kind is submitted faster for its encoding.
	jobs       kubernetes.Interface
	tephraJobs versioned.Interface
}

// startBurstCluster starts the control plane in dir with nodes simulated nodes, and waits until
// tephra-controllers has created the default queue that Tephra Jobs are submitted to.
func startBurstCluster(ctx context.Context, root string, bins *localcluster.Binaries, dir string, nodes int, qps float32, log io.Writer) (c *burstCluster, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, Root: root, Log: log, Binaries: bins})
	if err != nil {
		if cluster != nil {
			cluster.Stop()
		}
		return nil, err
	}
	c = &burstCluster{benchCluster: &benchCluster{Cluster: cluster}}
	defer func() {
		if err != nil {
			cluster.Stop()
		}
	}()
	// The recorder's informer and the cleanup: protobuf, no client-side limit.
	fastConfig := protobuf(rest.CopyConfig(cluster.Config))
	fastConfig.QPS, fastConfig.Burst = -1, 0
	if c.fast, err = kubernetes.NewForConfig(fastConfig); err != nil {
		return nil, err
	}
	submitConfig := rest.CopyConfig(cluster.Config)
	submitConfig.QPS, submitConfig.Burst = qps, int(qps)
	if c.jobs, err = kubernetes.NewForConfig(submitConfig); err != nil {
		return nil, err
	}
	if c.tephraJobs, err = versioned.NewForConfig(submitConfig); err != nil {
		return nil, err
	}
	shape := localcluster.NodeShape{CPU: "8", Memory: "32Gi", Pods: 110}
	if c.nodes, err = cluster.CreateNodes(ctx, burstNodePrefix, nodes, shape); err != nil {
		return nil, err
	}
	if err := localcluster.WaitDefaultQueues(ctx, cluster.Config); err != nil {
		return nil, err
	}
	return c, c.createNamespace(ctx, burstNamespace)
}

// submit creates a burst's Jobs of one kind from workers goroutines, and returns when each
// Job's create call was made (by index) and when the last one was answered.
func (c *burstCluster) submit(ctx context.Context, kind string, sh *JobShape, jobs, workers int) (calls []time.Time, answered time.Time, err error) {
	calls = make([]time.Time, jobs)
	done := make([]time.Time, jobs)
	create := func(ctx context.Context, i int) error {
		calls[i] = time.Now()
		var err error
		switch kind {
		case TephraJobKind:
			_, err = c.tephraJobs.BatchV1alpha1().Jobs(burstNamespace).Create(ctx, tephraBurstJob(sh, burstNamespace, i), metav1.CreateOptions{})
		case BatchJobKind:
			_, err = c.jobs.BatchV1().Jobs(burstNamespace).Create(ctx, batchBurstJob(sh, burstNamespace, i), metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unknown kind of Job %q", kind)
		}
		done[i] = time.Now()
		if err != nil {
			return fmt.Errorf("creating %s Job %s: %w", kind, sh.jobName(i), err)
		}
		return nil
	}
	if err := parallel(ctx, workers, jobs, create); err != nil {
		return calls, answered, err
	}
	for _, t := range done {
		if t.After(answered) {
			answered = t
		}
	}
	return calls, answered, nil
}

// controllerCPU is the user+system CPU time so far of the process whose controller turns a
// kind's Jobs into pods: tephra-controllers (all its replicas) or kube-controller-manager.
func (c *burstCluster) controllerCPU(kind string) (float64, error) {
	names := []string{localcluster.ControllerManager}
	if kind == TephraJobKind {
		names = c.ReplicaNames(localcluster.Controllers)
	}
	var sum float64
	for _, name := range names {
		pid := c.Pid(name)
		if pid == 0 {
			return 0, fmt.Errorf("%s is not running", name)
		}
		stats, err := procstat.Read(pid)
		if err != nil {
			return 0, err
		}
		sum += stats.CPUSeconds
	}
	return sum, nil
}

// clusterCPU is the user+system CPU time so far of the kube-apiserver and of every process of
// the control plane (etcd, both controller processes, the scheduler and kwok with it): on a
// machine of 2 cores a burst is as fast as the CPU it costs them all.
func (c *burstCluster) clusterCPU() (apiserver, all float64, err error) {
	names := []string{localcluster.APIServer, localcluster.Etcd, localcluster.ControllerManager, localcluster.Scheduler, localcluster.Kwok}
	names = append(names, c.ReplicaNames(localcluster.Controllers)...)
	for _, name := range names {
		pid := c.Pid(name)
		if pid == 0 {
			return 0, 0, fmt.Errorf("%s is not running", name)
		}
		stats, err := procstat.Read(pid)
		if err != nil {
			return 0, 0, err
		}
		if name == localcluster.APIServer {
			apiserver = stats.CPUSeconds
		}
		all += stats.CPUSeconds
	}
	return apiserver, all, nil
}

// quietAfterEmpty is how long the driver waits once the namespace is empty: the garbage
// collector, the Job controllers and the scheduler are still working off the deletions' events,
// which must not overlap the next burst.
const quietAfterEmpty = 2 * time.Second

// empty deletes every Job, PodGroup, pod and event of the burst's namespace and waits until it
// holds none. The Jobs go first, so that no controller replaces the pods deleted next; the pods
// are force-deleted (no kubelet needs to confirm) rather than left to the garbage collector.
func (c *burstCluster) empty(ctx context.Context) error {
	all := metav1.ListOptions{}
	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if err := c.Tephra.BatchV1alpha1().Jobs(burstNamespace).DeleteCollection(ctx, background, all); err != nil {
		return fmt.Errorf("deleting the Tephra Jobs: %w", err)
	}
	if err := c.fast.BatchV1().Jobs(burstNamespace).DeleteCollection(ctx, background, all); err != nil {
		return fmt.Errorf("deleting the batch/v1 Jobs: %w", err)
	}
	if err := c.waitNone(ctx, "Jobs", c.jobsLeft); err != nil {
		return err
	}
	force := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if err := c.fast.CoreV1().Pods(burstNamespace).DeleteCollection(ctx, force, all); err != nil {
		return fmt.Errorf("deleting the pods: %w", err)
	}
	if err := c.Tephra.SchedulingV1alpha1().PodGroups(burstNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the PodGroups: %w", err)
	}
	if err := c.fast.CoreV1().Events(burstNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the events: %w", err)
	}
	if err := c.waitNone(ctx, "pods and PodGroups", c.podsLeft); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(quietAfterEmpty):
		return nil
	}
}

// jobsLeft counts (up to one of each) the Jobs of either kind left in the namespace.
func (c *burstCluster) jobsLeft(ctx context.Context) (int, error) {
	one := metav1.ListOptions{Limit: 1}
	tephra, err := c.Tephra.BatchV1alpha1().Jobs(burstNamespace).List(ctx, one)
	if err != nil {
		return 0, err
	}
	batch, err := c.fast.BatchV1().Jobs(burstNamespace).List(ctx, one)
	if err != nil {
		return 0, err
	}
	return len(tephra.Items) + len(batch.Items), nil
}

// podsLeft counts (up to one of each) the pods and PodGroups left in the namespace.
func (c *burstCluster) podsLeft(ctx context.Context) (int, error) {
	one := metav1.ListOptions{Limit: 1}
	pods, err := c.fast.CoreV1().Pods(burstNamespace).List(ctx, one)
	if err != nil {
		return 0, err
	}
	groups, err := c.Tephra.SchedulingV1alpha1().PodGroups(burstNamespace).List(ctx, one)
	if err != nil {
		return 0, err
	}
	return len(pods.Items) + len(groups.Items), nil
}

// waitNone polls left until it counts nothing.
func (c *burstCluster) waitNone(ctx context.Context, what string, left func(context.Context) (int, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := left(ctx)
		last = err
		return err == nil && n == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the %s of %s to be gone: %w", what, burstNamespace, errors.Join(err, last))
	}
	return nil
}

// shutdown stops the control plane and, unless keep, removes its etcd data and certificates
// (the logs stay).
func (c *burstCluster) shutdown(keep bool) {
	c.Stop()
	if keep {
		return
	}
	for _, sub := range []string{"etcd", "pki"} {
		_ = os.RemoveAll(filepath.Join(c.Dir(), sub))
	}
}
