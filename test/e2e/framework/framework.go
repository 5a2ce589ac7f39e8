// Package framework runs one local control plane per e2e test package and gives tests what they
// need on it: clients, a namespace of their own, and waits on what a user would see.
package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// Env is the cluster shared by the tests of one package.
type Env struct {
	Cluster *localcluster.Cluster
	Kube    kubernetes.Interface
	Tephra  versioned.Interface
}

var shared *Env

// Main starts a cluster for the package's tests, runs setup on it, runs the tests and stops the
// cluster. With -short it runs the tests without a cluster; e2e tests then skip themselves.
// Component logs of a failed run are printed, and kept with TEPHRA_E2E_KEEP=1.
func Main(m *testing.M, opts localcluster.Options, setup func(*Env) error) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "tephra-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts.Dir = dir
	opts.Log = os.Stderr
	if GenericWorkload() {
		opts = WithGenericWorkload(opts)
		fmt.Fprintln(os.Stderr, "tephra-scheduler runs with GenericWorkload=true ("+genericWorkloadEnv+")")
	}
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local cluster:", err)
		return 1
	}
	env := &Env{Cluster: cluster, Kube: cluster.Client, Tephra: cluster.Tephra}
	if setup != nil {
		err = setup(env)
	}
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "setting up the local cluster:", err)
	} else {
		shared = env
		code = m.Run()
	}
	cluster.Stop()
	if code == 0 {
		code = CheckRBAC(cluster)
	}
	if code != 0 {
		DumpLogs(dir)
	}
	if code == 0 && os.Getenv("TEPHRA_E2E_KEEP") == "" {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "cluster state and logs kept in", dir)
	}
	return code
}

// Shared returns the package's cluster, skipping the test under -short.
func Shared(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e test: needs the local control plane (run without -short)")
	}
	if shared == nil {
		t.Fatal("no shared cluster: call framework.Main from TestMain")
	}
	return shared
}

// Context returns a context that ends with the test, or after timeout.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// Namespace creates a namespace for one test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	ns, err := e.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name, "-") + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	if checkPreemptors {
		// Registered after the namespace's deletion, so run before it.
		CheckPreemptorsWoken(t, e, ns.Name)
	}
	return ns.Name
}

// WaitPod waits until cond holds for the pod and returns it; on timeout it fails the test with
// the pod's last state and the events about it.
func (e *Env) WaitPod(t testing.TB, namespace, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pod, err := e.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		return cond(pod), nil
	})
	if err != nil {
		state := "not found"
		if last != nil {
			state = fmt.Sprintf("phase %s, node %q, conditions %v", last.Status.Phase, last.Spec.NodeName, last.Status.Conditions)
		}
		t.Fatalf("pod %s/%s: waited %v for it to be %s: %s; events: %s", namespace, name, timeout, what, state, e.Events(namespace, name))
	}
	return last
}

// Events describes the events about an object, for failure messages.
func (e *Env) Events(namespace, name string) string {
	list, err := e.Kube.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name,
	})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Message))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// CheckRBAC fails the package if Tephra's components were refused anything by the apiserver:
// they run as their ServiceAccounts with the shipped RBAC, and a missing rule often shows only as
// a logged, retried "forbidden".
func CheckRBAC(cluster *localcluster.Cluster) int {
	denials, err := cluster.RBACDenials()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading component logs:", err)
		return 1
	}
	if len(denials) == 0 {
		return 0
	}
	if len(denials) > 20 {
		denials = append(denials[:20], fmt.Sprintf("... and %d more", len(denials)-20))
	}
	fmt.Fprintf(os.Stderr, "FAIL: the apiserver refused Tephra's components (a rule is missing from manifests/rbac):\n%s\n", strings.Join(denials, "\n"))
	return 1
}

// DumpLogs prints the last lines of the logs of Tephra's components, kwok and the apiserver of
// the cluster in dir.
func DumpLogs(dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "logs", "tephra-*.log"))
	for _, component := range []string{localcluster.Kwok, localcluster.APIServer} {
		paths = append(paths, filepath.Join(dir, "logs", component+".log"))
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(os.Stderr, "--- last lines of %s:\n%s\n", path, strings.Join(lines, "\n"))
	}
}

// Eventually polls cond until it holds, failing the test after timeout with what it waited for
// and the last state cond described.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, state := cond()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waited %v for %s; last: %s", timeout, what, last)
	}
}

// PoolLabel keeps a test's pods on the test's own nodes (Pool).
const PoolLabel = "e2e.tephra.dev/pool"

// Pool creates count simulated nodes of cpus CPUs for one test, deleted when it ends, and returns
// the node selector of its pods.
func (e *Env) Pool(t testing.TB, name string, count, cpus int) map[string]string {
	t.Helper()
	selector := map[string]string{PoolLabel: name}
	names, err := e.Cluster.CreateNodes(context.Background(), name, count, localcluster.NodeShape{
		CPU: fmt.Sprint(cpus), Memory: "64Gi", Pods: 110, Labels: selector,
	})
	t.Cleanup(func() {
		for _, node := range names {
			_ = e.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	if err != nil {
		t.Fatalf("creating nodes of pool %s: %v", name, err)
	}
	return selector
}

// genericWorkloadEnv runs a package's tests with kube-scheduler's GenericWorkload feature gate on
// in tephra-scheduler too (and in the apiserver, with upstream's PodGroup API served): make test
// runs the gang, queue, elastic, topology and upstream packages both ways.
const genericWorkloadEnv = "TEPHRA_E2E_GENERIC_WORKLOAD"

// GenericWorkload says whether the package runs with tephra-scheduler's GenericWorkload gate on.
func GenericWorkload() bool { return os.Getenv(genericWorkloadEnv) == "true" }

// GateOffOnly skips a test in the run with the GenericWorkload gate on. It is for tests of what
// the gate does not touch (the Queue controller's usage history, say) that take minutes of wall
// clock: running them twice would cost CI's time and test nothing more.
func GateOffOnly(t *testing.T, why string) {
	t.Helper()
	if GenericWorkload() {
		t.Skipf("runs with the GenericWorkload gate off only: %s", why)
	}
}

// WithGenericWorkload turns the GenericWorkload gate on in every component of opts, and serves
// upstream's PodGroup API.
func WithGenericWorkload(opts localcluster.Options) localcluster.Options {
	if !strings.Contains(opts.FeatureGates, "GenericWorkload=") {
		opts.FeatureGates = strings.TrimPrefix(opts.FeatureGates+",GenericWorkload=true", ",")
	}
	if !strings.Contains(opts.RuntimeConfig, "scheduling.k8s.io/v1beta1") {
		opts.RuntimeConfig = strings.TrimPrefix(opts.RuntimeConfig+",scheduling.k8s.io/v1beta1=true", ",")
	}
	opts.TephraSchedulerWithoutFeatureGates = false
	return opts
}
