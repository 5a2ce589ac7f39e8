package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tephra-dev/tephra/test/localcluster"
)

// nodeShape is every simulated node's: room for about 65 of the benchmark's pods (100m CPU,
// 500Mi), and for one never-fitting gang member (scenarios.go) beside them.
var nodeShape = localcluster.NodeShape{CPU: "8", Memory: "32Gi", Pods: 110}

const nodePrefix = "bench-node"

// UnavailableError says that a configuration cannot run with this build of Kubernetes, and why.
// The benchmark reports the configuration as unavailable instead of failing.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "unavailable: " + e.Reason }

func unavailable(format string, args ...any) error {
	return &UnavailableError{Reason: fmt.Sprintf(format, args...)}
}

// benchCluster is a fresh local control plane for one configuration: etcd, kube-apiserver and
// the simulated nodes; the scheduler is started for each scenario (run.go). There is no
// kube-controller-manager (no node lifecycle traffic) and no tephra-controllers, and kwok is
// stopped once the nodes are Ready, so nothing but the scheduler and the benchmark's driver talks
// to the apiserver while a scenario runs. Bound pods therefore stay Pending: the benchmark
// measures scheduling up to the bind.
type benchCluster struct {
	*localcluster.Cluster
	config *Configuration
	nodes  []string
	// fast is the driver's client: protobuf and no client-side rate limit.
	fast kubernetes.Interface
	// qps and burst are the schedulers' client limits, which L's binder uses too.
	qps   float32
	burst int
}

// startCluster starts a cluster for a configuration in dir with the given number of Ready nodes.
func startCluster(ctx context.Context, root string, bins *localcluster.Binaries, config *Configuration, dir string, nodes int, log io.Writer) (b *benchCluster, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	qps, burst, err := clientLimits(root)
	if err != nil {
		return nil, err
	}
	opts := localcluster.Options{
		Dir: dir, Root: root, Log: log, Binaries: bins,
		SchedulerVerbosity:       schedulerVerbosity,
		WithoutScheduler:         true, // started per scenario, once its backlog exists
		WithoutControllers:       true,
		WithoutControllerManager: true,
		FeatureGates:             config.FeatureGates,
		RuntimeConfig:            config.RuntimeConfig,
		APIServerArgs:            apiServerArgs,
	}
	if config.schedulerConfig != nil {
		if opts.SchedulerConfig, err = config.schedulerConfig(root, dir); err != nil {
			return nil, err
		}
	}
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		if cluster != nil {
			cluster.Stop()
		}
		if config.Gangs == UpstreamGangs {
			return nil, unavailable("the control plane does not start with --feature-gates=%s --runtime-config=%s: %v", config.FeatureGates, config.RuntimeConfig, err)
		}
		return nil, err
	}
	b = &benchCluster{Cluster: cluster, config: config, qps: qps, burst: burst}
	defer func() {
		if err != nil {
			b.Stop()
		}
	}()
	fastConfig := protobuf(rest.CopyConfig(cluster.Config))
	fastConfig.QPS, fastConfig.Burst = -1, 0
	if b.fast, err = kubernetes.NewForConfig(fastConfig); err != nil {
		return nil, err
	}
	if config.Gangs == UpstreamGangs {
		if err := b.checkUpstreamPodGroups(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if b.nodes, err = b.createNodes(ctx, nodes); err != nil {
		return nil, err
	}
	// With the nodes Ready and no controller manager to check their heartbeats, kwok has nothing
	// left to do but add load.
	b.StopComponent(localcluster.Kwok)
	fmt.Fprintf(log, "%-24s ready in %v\n", fmt.Sprintf("%d nodes", nodes), time.Since(start).Round(10*time.Millisecond))
	return b, nil
}

// protobuf makes a client configuration speak protobuf, as the scheduler does, which costs the
// apiserver and the driver less than JSON. Only built-in types have it, not Tephra's CRDs.
func protobuf(config *rest.Config) *rest.Config {
	config.ContentType = "application/vnd.kubernetes.protobuf"
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return config
}

// checkUpstreamPodGroups checks that the apiserver serves scheduling.k8s.io/v1beta1 PodGroups.
func (b *benchCluster) checkUpstreamPodGroups() error {
	resources, err := b.Client.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
	if err != nil {
		return unavailable("the apiserver does not serve scheduling.k8s.io/v1beta1 with --feature-gates=%s --runtime-config=%s: %v", b.config.FeatureGates, b.config.RuntimeConfig, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "podgroups" {
			return nil
		}
	}
	return unavailable("the apiserver serves scheduling.k8s.io/v1beta1 without podgroups")
}

// createNodes creates the simulated nodes, several at a time, and waits until kwok has made all
// of them Ready.
func (b *benchCluster) createNodes(ctx context.Context, count int) ([]string, error) {
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", nodePrefix, i)
	}
	err := parallel(ctx, 16, len(names), func(ctx context.Context, i int) error {
		node := localcluster.SimulatedNode(names[i], nodeShape)
		_, err := b.fast.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", names[i], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var notReady int
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.fast.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			if schedulable(&list.Items[i]) {
				ready++
			}
		}
		notReady = count - ready
		return notReady <= 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d nodes to be Ready (%d are not): %w", count, notReady, err)
	}
	return names, nil
}

func schedulable(node *corev1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// finish stops the cluster and, unless keep, removes its etcd data and certificates; its logs
// stay.
func (b *benchCluster) finish(keep bool) {
	b.Stop()
	if keep {
		return
	}
	for _, sub := range []string{"etcd", "pki"} {
		_ = os.RemoveAll(filepath.Join(b.Dir(), sub))
	}
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error, which also stops
// the rest.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(inner, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-inner.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
