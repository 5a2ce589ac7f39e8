// Package foundation checks the local control plane itself: Tephra's scheduler places pods on
// simulated nodes, simulated pods follow their run-time annotations, and the apiserver rejects
// malformed Tephra objects with messages that say what is wrong.
package foundation

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		ctx := context.Background()
		if _, err := env.Cluster.CreateNodes(ctx, "foundation", 2, localcluster.DefaultNodeShape); err != nil {
			return err
		}
		return localcluster.WaitDefaultQueues(ctx, env.Cluster.Config)
	}))
}

func simPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:  "work",
				Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("500m"),
					corev1.ResourceMemory: resource.MustParse("1Gi"),
				}},
			}},
		},
	}
}

func TestTephraSchedulerBindsAndRunsPod(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)

	_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, simPod("hello", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := env.WaitPod(t, ns, "hello", time.Minute, "Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})
	assert.True(t, strings.HasPrefix(pod.Spec.NodeName, "foundation-"), "bound to a simulated node, got %q", pod.Spec.NodeName)

	// The recorder writes the Scheduled event from a goroutine of its own after the bind.
	var scheduledBy []string
	framework.Eventually(t, 30*time.Second, "a Scheduled event", func() (bool, string) {
		events, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=hello"})
		if err != nil {
			return false, err.Error()
		}
		scheduledBy = nil
		for _, ev := range events.Items {
			if ev.Reason == "Scheduled" {
				scheduledBy = append(scheduledBy, ev.ReportingController)
			}
		}
		return len(scheduledBy) > 0, env.Events(ns, "hello")
	})
	assert.Equal(t, []string{schedulingv1alpha1.SchedulerName}, scheduledBy, "the Scheduled event comes from tephra-scheduler")
}

func TestPodOfAnotherSchedulerIsLeftAlone(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)

	pod := simPod("elsewhere", nil)
	pod.Spec.SchedulerName = "some-other-scheduler"
	_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	// The same kind of pod for tephra-scheduler binds meanwhile, so the wait is long enough.
	_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, simPod("mine", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	env.WaitPod(t, ns, "mine", time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	got, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "elsewhere", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.Spec.NodeName, "a pod for another scheduler is not bound by Tephra")
}

func TestSimulatedPodsFollowTheirAnnotations(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)

	for _, pod := range []*corev1.Pod{
		simPod("succeeds", map[string]string{"sim.tephra.dev/duration": "2s"}),
		simPod("fails", map[string]string{"sim.tephra.dev/duration": "2s", "sim.tephra.dev/exit-code": "3"}),
		simPod("exit-zero", map[string]string{"sim.tephra.dev/duration": "2s", "sim.tephra.dev/exit-code": "0"}),
		simPod("runs-on", nil),
	} {
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	started := time.Now()
	running := env.WaitPod(t, ns, "succeeds", time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	require.NotNil(t, running.Status.StartTime)

	succeeded := env.WaitPod(t, ns, "succeeds", time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	ranFor := finishedAt(t, succeeded).Sub(running.Status.StartTime.Time)
	assert.GreaterOrEqual(t, ranFor, 1500*time.Millisecond, "ran about its 2s duration")
	assert.Equal(t, int32(0), exitCode(t, succeeded))

	failed := env.WaitPod(t, ns, "fails", time.Minute, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, int32(3), exitCode(t, failed), "the exit code comes from sim.tephra.dev/exit-code")

	zero := env.WaitPod(t, ns, "exit-zero", time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	assert.Equal(t, int32(0), exitCode(t, zero))

	// Without a duration a pod runs until deleted.
	assert.GreaterOrEqual(t, time.Since(started), 2*time.Second)
	forever, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "runs-on", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, forever.Status.Phase)
}

func finishedAt(t *testing.T, pod *corev1.Pod) time.Time {
	t.Helper()
	require.Len(t, pod.Status.ContainerStatuses, 1)
	terminated := pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, terminated, "container of %s is terminated", pod.Name)
	return terminated.FinishedAt.Time
}

func exitCode(t *testing.T, pod *corev1.Pod) int32 {
	t.Helper()
	require.Len(t, pod.Status.ContainerStatuses, 1)
	terminated := pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, terminated, "container of %s is terminated", pod.Name)
	return terminated.ExitCode
}

func TestBinariesReportTheirVersion(t *testing.T) {
	env := framework.Shared(t)
	for _, bin := range []string{env.Cluster.Binaries().Scheduler, env.Cluster.Binaries().Controllers} {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Regexp(t, `^tephra-(scheduler|controllers) \S+ \(kubernetes v1\.37\.1, go`, string(out))
		assert.NotContains(t, string(out), " dev ", "the version is stamped at build time")
	}
}
