// Package flow checks end to end, on a real control plane with simulated nodes, what runs Jobs
// for users beyond one Job: JobFlows (dependencies, cleanup branches, a controller killed in the
// middle, cycles refused), CronJobs (Forbid over three minutes), task topology (ps next to its
// workers, workers spread) and the ray plugin on Volcano's example.
package flow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Simulation annotations of manifests/kwok/stages.yaml.
const (
	simDuration = "sim.tephra.dev/duration"
	simExitCode = "sim.tephra.dev/exit-code"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		ctx := context.Background()
		if err := localcluster.WaitDefaultQueues(ctx, env.Cluster.Config); err != nil {
			return err
		}
		// Room for the flows' and CronJobs' pods; topology tests make pools of their own.
		_, err := env.Cluster.CreateNodes(ctx, "flow-node", 3, localcluster.NodeShape{CPU: "32", Memory: "128Gi", Pods: 110})
		return err
	}))
}

// simSpec is a Job spec of one task of replicas pods asking for 100m CPU, that run for duration
// and end with exitCode, with no retry (a failed pod fails the Job).
func simSpec(replicas int32, duration string, exitCode int) batchv1alpha1.JobSpec {
	annotations := map[string]string{simDuration: duration}
	if exitCode != 0 {
		annotations[simExitCode] = fmt.Sprint(exitCode)
	}
	return batchv1alpha1.JobSpec{
		MaxRetry: 0,
		Tasks: []batchv1alpha1.TaskSpec{{
			Name: "main", Replicas: replicas,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "busybox",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					}},
				},
			},
		}},
	}
}

func createTemplate(t *testing.T, env *framework.Env, ns, name string, spec batchv1alpha1.JobSpec) {
	t.Helper()
	_, err := env.Tephra.BatchV1alpha1().JobTemplates(ns).Create(context.Background(), &batchv1alpha1.JobTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func getFlow(t *testing.T, env *framework.Env, ns, name string) *batchv1alpha1.JobFlow {
	t.Helper()
	jf, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return jf
}

// waitFlow waits until the JobFlow reaches phase, and returns it.
func waitFlow(t *testing.T, env *framework.Env, ns, name string, timeout time.Duration, phase batchv1alpha1.JobFlowPhase) *batchv1alpha1.JobFlow {
	t.Helper()
	var jf *batchv1alpha1.JobFlow
	framework.Eventually(t, timeout, fmt.Sprintf("jobflow %s %s", name, phase), func() (bool, string) {
		var err error
		jf, err = env.Tephra.BatchV1alpha1().JobFlows(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return jf.Status.State.Phase == phase, describeFlow(jf) + " events: " + env.Events(ns, name)
	})
	return jf
}

func describeFlow(jf *batchv1alpha1.JobFlow) string {
	var parts []string
	for _, e := range jf.Status.JobStatusList {
		parts = append(parts, e.Flow+"="+e.State)
	}
	return fmt.Sprintf("%s (%s) [%s]", jf.Status.State.Phase, jf.Status.State.Message, strings.Join(parts, " "))
}

// flowJobs maps flow names to the Jobs labelled with the JobFlow's name.
func flowJobs(t *testing.T, env *framework.Env, ns, jobflow string) map[string]batchv1alpha1.Job {
	t.Helper()
	list, err := env.Tephra.BatchV1alpha1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobFlowLabel + "=" + jobflow})
	require.NoError(t, err)
	out := map[string]batchv1alpha1.Job{}
	for _, j := range list.Items {
		out[j.Labels[batchv1alpha1.FlowLabel]] = j
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// eventNotes lists the notes of the events of a reason on an object.
func eventNotes(t *testing.T, env *framework.Env, ns, name, reason string) []string {
	t.Helper()
	list, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason,
	})
	require.NoError(t, err)
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Message)
	}
	sort.Strings(out)
	return out
}

// waitEventNotes lists the notes of the events of a reason on an object once there are n of
// them, or once 30 s have passed; the caller asserts them. A recorder writes each event from a
// goroutine of its own after the status or creation it goes with, so a test that saw the status
// may list the events before the last of them is there.
func waitEventNotes(t *testing.T, env *framework.Env, ns, name, reason string, n int) []string {
	t.Helper()
	var notes []string
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		notes = eventNotes(t, env, ns, name, reason)
		return len(notes) >= n, nil
	})
	return notes
}

// loadExample reads the documents of an example of manifests/examples.
func loadExample(t *testing.T, file string) []string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "manifests", "examples", file))
	require.NoError(t, err)
	return strings.Split(string(data), "\n---\n")
}

func decode[T any](t *testing.T, doc string) *T {
	t.Helper()
	out := new(T)
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), out))
	return out
}

// waitMetric waits until the controllers' /metrics match pattern.
func waitMetric(t *testing.T, env *framework.Env, pattern string) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	framework.Eventually(t, 30*time.Second, "the controllers' metric "+pattern, func() (bool, string) {
		metrics, err := env.Cluster.ControllersMetrics(context.Background(), localcluster.Controllers)
		if err != nil {
			return false, err.Error()
		}
		return re.MatchString(metrics), "not matched"
	})
}
