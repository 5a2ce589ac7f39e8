// Package cli checks kubectl-tephra against a real control plane: each command's output is
// compared with a golden file in testdata/ (go test ./test/e2e/cli -update rewrites them), and
// `-o json` is parsed. The tests run one after another: queues and top show the whole cluster.
package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/cmd/kubectl-tephra/cli"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the commands print")

// TestMain runs the package without usage history: with it, the shares the commands print, and
// their USAGE and history notes, would depend on how long each test's pods ran.
func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{UsageHalfLife: "0s"}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// kubectlTephra runs one command as `kubectl tephra ARGS -n NS` would (no -n when ns is "").
func kubectlTephra(t *testing.T, env *framework.Env, ns string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	full := []string{"--kubeconfig", filepath.Join(env.Cluster.Dir(), "kubeconfig")}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	cmd.SetArgs(append(full, args...))
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

// mustRun runs a command that must succeed and returns what it printed.
func mustRun(t *testing.T, env *framework.Env, ns string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlTephra(t, env, ns, args...)
	require.NoError(t, err, "kubectl tephra %s: %s", strings.Join(args, " "), errOut)
	return out
}

// lastColumnAge matches an AGE at the end of a line ("5s", "2m3s", "4h").
var lastColumnAge = regexp.MustCompile(`(?m)\s+[0-9]+[smhd]([0-9]+[smh])?$`)

// normalize makes output comparable across runs: the test's namespace becomes NS, ages at the
// end of a line become AGE.
func normalize(out, ns string, ages bool) string {
	if ns != "" {
		out = strings.ReplaceAll(out, ns, "NS")
	}
	if ages {
		out = lastColumnAge.ReplaceAllString(out, "   AGE")
	}
	return out
}

// golden compares output with testdata/NAME.golden, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run go test ./test/e2e/cli -run %s -update", t.Name())
	require.Equal(t, string(want), got, "output of %s (go test -update rewrites %s)", name, path)
}

// settled checks a command's output against its golden file once the statuses it reads have
// settled: it polls until the output equals the file, or, with -update, until it has not changed
// for two seconds.
func settled(t *testing.T, env *framework.Env, ns, name string, args ...string) {
	t.Helper()
	previous, since := "", time.Now()
	deadline := time.Now().Add(45 * time.Second)
	for {
		got := normalize(mustRun(t, env, ns, args...), ns, true)
		if got != previous {
			previous, since = got, time.Now()
		}
		if *update && time.Since(since) >= 2*time.Second {
			break
		}
		if want, err := os.ReadFile(filepath.Join("testdata", name+".golden")); !*update && err == nil && string(want) == got {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	golden(t, name, previous)
}

// createQueue creates a queue and deletes it when the test ends.
func createQueue(t *testing.T, env *framework.Env, name, parent string, mutate func(*schedulingv1alpha1.QueueSpec)) {
	t.Helper()
	q := &schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: parent, Weight: 1}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	_, err := env.Tephra.SchedulingV1alpha1().Queues().Create(context.Background(), q, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// units creates count nodes offering per units of the test's own resource (and 16 CPUs), so
// that the shares of that resource involve only the test's queues.
func units(t *testing.T, env *framework.Env, res corev1.ResourceName, count int, per int64) map[string]string {
	t.Helper()
	pool := map[string]string{framework.PoolLabel: strings.ReplaceAll(string(res), "/", "-")}
	names, err := env.Cluster.CreateNodes(context.Background(), pool[framework.PoolLabel], count, localcluster.NodeShape{
		CPU: "16", Memory: "64Gi", Pods: 110, Labels: pool, Extended: map[corev1.ResourceName]int64{res: per},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, node := range names {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	return pool
}

// pod is a pod that asks for amount of res and runs until deleted.
type pod struct {
	name, queue, group string
	res                corev1.ResourceName
	amount             int64
	selector           map[string]string
	// extra is a resource the pod asks one of besides, if set.
	extra corev1.ResourceName
}

func (p pod) create(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	labels := map[string]string{}
	switch {
	case p.group != "":
		labels[schedulingv1alpha1.PodGroupLabel] = p.group
	case p.queue != "":
		labels[schedulingv1alpha1.QueueLabel] = p.queue
	}
	q := *resource.NewQuantity(p.amount, resource.DecimalSI)
	requests := corev1.ResourceList{p.res: q}
	if p.extra != "" {
		requests[p.extra] = resource.MustParse("1")
	}
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: p.selector,
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: requests, Limits: requests,
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createGroup creates a PodGroup.
func createGroup(t *testing.T, env *framework.Env, ns, name, queue string, minMember int32) {
	t.Helper()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// bound counts a namespace's pods that are bound to a node.
func bound(t *testing.T, env *framework.Env, ns string) int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// waitBound waits until a namespace has want bound pods.
func waitBound(t *testing.T, env *framework.Env, ns string, want int) {
	t.Helper()
	framework.Eventually(t, time.Minute, "pods bound", func() (bool, string) {
		n := bound(t, env, ns)
		return n == want, fmt.Sprintf("%d of %d bound", n, want)
	})
}

func resourceQuantity(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }
