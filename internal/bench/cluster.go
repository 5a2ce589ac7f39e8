package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// nodeShape is every simulated node's: room for about 65 of the benchmark's pods (100m CPU,
// 500Mi), and for one never-fitting gang member (scenarios.go) beside them.
var nodeShape = localcluster.NodeShape{CPU: "8", Memory: "32Gi", Pods: 110}

// Q's GPU pool: every gpuNodeEvery-th node (bench-node-0, -40, -80, ...) also offers gpusPerNode
// GPUs and carries gpuNodeLabel, so that Q's simulated kubelet (kwok) manages only those nodes.
// Other scenarios' pods ask for no GPU and use these nodes like any other.
const (
	gpuNodeEvery = 40
	gpusPerNode  = 4
	gpuNodeLabel = "bench.tephra.dev/gpu"
)

const nodePrefix = "bench-node"

// UnavailableError says that a configuration cannot run with this build of Kubernetes, and why.
// The benchmark reports the configuration as unavailable instead of failing.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "unavailable: " + e.Reason }

func unavailable(format string, args ...any) error {
	return &UnavailableError{Reason: fmt.Sprintf(format, args...)}
}

// benchCluster is a fresh local control plane for one run of one configuration: etcd and
// kube-apiserver with the simulated nodes. The scheduler is started once the run's backlog
// exists (run.go). There is no kube-controller-manager (but while G8-DRA's backlog is created, for
// its claims: devices.go) and, but for CU and CG (whose upstream PodGroups' status
// tephra-controllers writes), no tephra-controllers, and the nodes are created
// Ready, with no kubelet or kwok to keep them so: nothing but the scheduler (and CU's
// controllers) and the benchmark's driver talks to the apiserver while a scenario runs, and
// bound pods stay Pending.
// Only scenario Q, whose pods must run and end, starts a kwok for the GPU nodes' pods (kwok.go).
//
// A control plane with 1000 Ready nodes starts in 5–7 s on 2 cores, while emptying it of a
// scenario's 5000 pods (and their events) takes 15–20 s, so every run gets a new one rather than
// a cleaned one. Smoke runs, whose few hundred pods go in a second, keep one control plane per
// configuration instead and empty it between scenarios (clean).
type benchCluster struct {
	*localcluster.Cluster
	config *Configuration
	// nodes are the simulated nodes' names, gpuNodes those that offer GPUs.
	nodes, gpuNodes []string
	// fast is the driver's client: protobuf and no client-side rate limit.
	fast kubernetes.Interface
	// qps and burst are the schedulers' client limits, which L's binder uses too.
	qps   float32
	burst int
	// kwokConfig is the pod stages of manifests/kwok/stages.yaml, for Q's kwok.
	kwokConfig string
	// devicesPublished says the nodes' ResourceSlices exist (devices.go).
	devicesPublished bool
}

// startCluster starts a control plane for a configuration in dir, without nodes or queues
// (prepare adds them).
func startCluster(ctx context.Context, root string, bins *localcluster.Binaries, config *Configuration, dir string, log io.Writer) (b *benchCluster, err error) {
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
		WithoutScheduler:         true, // started for each run, once its backlog exists
		WithoutControllers:       !config.Controllers,
		WithoutControllerManager: true, // but for the claims of scenarios with devices (devices.go)
		ControllerManagerArgs:    claimControllerArgs,
		FeatureGates:             config.FeatureGates,
		RuntimeConfig:            config.RuntimeConfig,

		TephraSchedulerWithoutFeatureGates: config.SchedulerWithoutFeatureGates,
		SchedulerWithUpstreamFeatureGates:  config.UpstreamFeatureGates,
		APIServerArgs:                      apiServerArgs,
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
	// localcluster always starts kwok for its nodes; the benchmark's nodes need none (they are
	// created Ready), and Q starts its own for the GPU nodes' pods.
	cluster.KillComponent(localcluster.Kwok)
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
	if b.kwokConfig, err = writeKwokPodStages(root, dir); err != nil {
		return nil, err
	}
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

// prepareTephraObjects creates what tephra-controllers would (the root and default queues, which
// Tephra's profile needs for pods that name no queue) and Q's queues, and lists the other CRDs
// C's scheduler reads (PodGroups, NodeResourceTopologies) once: the apiserver builds a CRD's
// storage and compiles its validation rules on the first request, which in a running cluster
// happened long ago, so that C's scheduler would otherwise pay a second per CRD at its start.
// Every configuration's control plane gets the same, although only C's scheduler reads them: the
// first use of a CRD costs the apiserver CPU, and the configurations must run on control planes
// prepared alike.
func (b *benchCluster) prepareTephraObjects(ctx context.Context) error {
	queues := []*schedulingv1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.RootQueue}},
		{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultQueue}, Spec: schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue}},
	}
	for _, q := range benchQueues {
		queues = append(queues, &schedulingv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: q.Name},
			Spec:       schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue, Weight: int32(q.Weight)},
		})
	}
	for _, q := range queues {
		if _, err := b.Tephra.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating queue %s: %w", q.Name, err)
		}
	}
	one := metav1.ListOptions{Limit: 1}
	if _, err := b.Tephra.SchedulingV1alpha1().PodGroups("").List(ctx, one); err != nil {
		return fmt.Errorf("listing PodGroups: %w", err)
	}
	if _, err := b.Tephra.TopologyV1alpha2().NodeResourceTopologies().List(ctx, one); err != nil {
		return fmt.Errorf("listing NodeResourceTopologies: %w", err)
	}
	return nil
}

// benchNode is the i-th simulated node, Ready from its creation: the apiserver keeps the status
// a node is created with (kubelet registers nodes that way), so no kubelet or kwok is needed to
// initialise it, and none keeps it alive afterwards.
func benchNode(i int) *corev1.Node {
	shape := nodeShape
	shape.Labels = map[string]string{rackLabel: fmt.Sprintf("r%03d", i/rackSize)}
	if i%gpuNodeEvery == 0 {
		shape.GPUs = gpusPerNode
		shape.Labels[gpuNodeLabel] = "true"
	}
	node := localcluster.SimulatedNode(fmt.Sprintf("%s-%d", nodePrefix, i), shape)
	now := metav1.Now()
	condition := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	node.Status.Conditions = []corev1.NodeCondition{
		condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
		condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
		condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
		condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
	}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 64+i/65536, i/256%256, i%256)},
		{Type: corev1.NodeHostName, Address: node.Name},
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "simulated", OperatingSystem: "linux", Architecture: "amd64"}
	return node
}

// prepare creates the simulated nodes and, meanwhile, Tephra's queues (prepareTephraObjects),
// and waits until the apiserver lists every node Ready.
func (b *benchCluster) prepare(ctx context.Context, nodes int, log io.Writer) error {
	tephra := make(chan error, 1)
	go func() { tephra <- b.prepareTephraObjects(ctx) }()
	err := b.ensureNodes(ctx, nodes, log)
	if terr := <-tephra; err == nil {
		err = terr
	}
	return err
}

// ensureNodes creates the simulated nodes up to count and waits until the apiserver lists all of
// them Ready.
func (b *benchCluster) ensureNodes(ctx context.Context, count int, log io.Writer) error {
	have := len(b.nodes)
	if count <= have {
		return nil
	}
	start := time.Now()
	err := parallel(ctx, 16, count-have, func(ctx context.Context, i int) error {
		node := benchNode(have + i)
		_, err := b.fast.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var ready int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.fast.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		ready = 0
		for i := range list.Items {
			if schedulable(&list.Items[i]) {
				ready++
			}
		}
		return ready >= count, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d nodes to be Ready (%d are): %w", count, ready, err)
	}
	b.nodes, b.gpuNodes = b.nodes[:0], b.gpuNodes[:0]
	for i := range count {
		name := fmt.Sprintf("%s-%d", nodePrefix, i)
		b.nodes = append(b.nodes, name)
		if i%gpuNodeEvery == 0 {
			b.gpuNodes = append(b.gpuNodes, name)
		}
	}
	fmt.Fprintf(log, "%-24s ready in %v\n", fmt.Sprintf("%d nodes", count), time.Since(start).Round(10*time.Millisecond))
	return nil
}

// gpus is the size of Q's GPU pool.
func (b *benchCluster) gpus() int { return len(b.gpuNodes) * gpusPerNode }

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

// signalGroup signals a component's process group (each runs in its own; see localcluster).
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// finish kills the cluster (its etcd data is thrown away) and, unless keep, removes its etcd
// data and certificates; its logs stay.
func (b *benchCluster) finish(keep bool) {
	for _, name := range append(b.ReplicaNames(localcluster.Controllers), localcluster.Scheduler, localcluster.ControllerManager, localcluster.APIServer, localcluster.Etcd) {
		b.KillComponent(name)
	}
	b.Stop()
	if keep {
		return
	}
	for _, sub := range []string{"etcd", "pki"} {
		_ = os.RemoveAll(filepath.Join(b.Dir(), sub))
	}
}

// createNamespace creates a run's namespace.
func (b *benchCluster) createNamespace(ctx context.Context, ns string) error {
	_, err := b.fast.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// clean empties a namespace for the next run on the same control plane (smoke runs): its pods
// (force-deleted: no kubelet needs to confirm), PodGroups, events and, with devices, claims,
// templates and the nodes' ResourceSlices, each with one delete-collection request, which the
// apiserver carries out with several workers.
func (b *benchCluster) clean(ctx context.Context, ns string, devices bool) error {
	force := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	all := metav1.ListOptions{}
	if err := b.fast.CoreV1().Pods(ns).DeleteCollection(ctx, force, all); err != nil {
		return fmt.Errorf("deleting the pods of %s: %w", ns, err)
	}
	var err error
	switch b.config.Gangs {
	case TephraGangs:
		err = b.Tephra.SchedulingV1alpha1().PodGroups(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
	case UpstreamGangs:
		err = b.fast.SchedulingV1beta1().PodGroups(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
	case NoGangs:
	}
	if err != nil {
		return fmt.Errorf("deleting the PodGroups of %s: %w", ns, err)
	}
	if err := b.fast.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		return fmt.Errorf("deleting the events of %s: %w", ns, err)
	}
	if devices {
		if err := b.cleanDevices(ctx, ns); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.fast.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeUnbound writes, after a drain that did not complete, why each pod of a namespace still
// waits (its PodScheduled condition, its claims' state and the last events about it) to
// unbound.txt in the cluster's folder, and says where.
func (b *benchCluster) writeUnbound(ctx context.Context, ns string) string {
	pods, err := b.fast.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		return fmt.Sprintf("listing the unbound pods: %v", err)
	}
	events, _ := b.fast.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	claims, _ := b.fast.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	var out strings.Builder
	for i := range pods.Items {
		pod := &pods.Items[i]
		fmt.Fprintf(&out, "%s:\n", pod.Name)
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				fmt.Fprintf(&out, "  PodScheduled=%s %s: %s\n", c.Status, c.Reason, c.Message)
			}
		}
		if claims != nil {
			for j := range claims.Items {
				claim := &claims.Items[j]
				if owner := metav1.GetControllerOf(claim); owner != nil && owner.UID == pod.UID {
					fmt.Fprintf(&out, "  claim %s: allocated %v, reserved for %d, deleting %v\n", claim.Name,
						claim.Status.Allocation != nil, len(claim.Status.ReservedFor), claim.DeletionTimestamp != nil)
				}
			}
		}
		if events != nil {
			var last []string
			for _, e := range events.Items {
				if e.InvolvedObject.UID == pod.UID {
					last = append(last, fmt.Sprintf("  event %s %s (x%d): %s", e.Type, e.Reason, max(e.Count, 1), e.Message))
				}
			}
			for _, line := range last[max(len(last)-3, 0):] {
				fmt.Fprintln(&out, line)
			}
		}
	}
	path := filepath.Join(b.Dir(), "unbound.txt")
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d pods unbound; why: %s; %s", len(pods.Items), path, b.writeSchedulerGoroutines(ctx))
}

// writeSchedulerGoroutines writes the scheduler's goroutines (with their stacks and how long each
// has waited) to scheduler-goroutines.txt in the cluster's folder, and says where: a drain that
// binds nothing and leaves no PodScheduled condition means a scheduler that stopped trying, and
// its stacks say where it stopped.
func (b *benchCluster) writeSchedulerGoroutines(ctx context.Context) string {
	client, err := b.schedulerClient(30 * time.Second)
	if err != nil {
		return fmt.Sprintf("the scheduler's goroutines: %v", err)
	}
	data, err := client.Get().AbsPath("/debug/pprof/goroutine").Param("debug", "2").DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("the scheduler's goroutines: %v", err)
	}
	path := filepath.Join(b.Dir(), "scheduler-goroutines.txt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err.Error()
	}
	return "the scheduler's goroutines: " + path
}
