package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A JobFlow whose middle step fails is listed by `kubectl tephra flows` (Failed, what completed,
// failed and was skipped) and described by `kubectl tephra flow describe`: each flow, what it
// runs after, its Job and state, and why the flow after the failure was skipped.
func TestFlowCommands(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := env.Pool(t, "cli-flows", 1, 4)
	step := func(exitCode string) batchv1alpha1.JobSpec {
		return batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{
			Name: "main", Replicas: 1,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sim.tephra.dev/duration": "1s", "sim.tephra.dev/exit-code": exitCode}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
					Containers: []corev1.Container{{Name: "main", Image: "busybox",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
				},
			},
		}}}
	}
	for name, code := range map[string]string{"prepare": "0", "train": "2", "report": "0", "cleanup": "0"} {
		_, err := env.Tephra.BatchV1alpha1().JobTemplates(ns).Create(t.Context(), &batchv1alpha1.JobTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: step(code),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Create(t.Context(), &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1alpha1.JobFlowSpec{JobRetainPolicy: batchv1alpha1.DeleteJobs, Flows: []batchv1alpha1.Flow{
			{Name: "prepare"},
			{Name: "train", DependsOn: &batchv1alpha1.FlowDependsOn{Targets: []string{"prepare"}}},
			{Name: "report", DependsOn: &batchv1alpha1.FlowDependsOn{Targets: []string{"train"}}},
			{Name: "cleanup", DependsOn: &batchv1alpha1.FlowDependsOn{Targets: []string{"train"}, Condition: batchv1alpha1.FlowOnFailed}},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the jobflow Failed", func() (bool, string) {
		jf, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Get(t.Context(), "nightly", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return jf.Status.State.Phase == batchv1alpha1.FlowFailed, string(jf.Status.State.Phase)
	})

	settled(t, env, ns, "flows", "flows")
	settled(t, env, ns, "flows-wide", "flows", "-o", "wide")
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, env, ns, "flows", "-o", "json")), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, map[string]any{"name": "nightly", "phase": "Failed", "flows": 4.0, "completed": 2.0, "failed": 1.0, "skipped": 1.0},
		pick(rows[0], "name", "phase", "flows", "completed", "failed", "skipped"))

	// The recorder writes each event from a goroutine of its own after the creation it goes with.
	var describe, before, events string
	var found bool
	framework.Eventually(t, 30*time.Second, "flow describe to list the CreatedJob events", func() (bool, string) {
		describe = normalize(mustRun(t, env, ns, "flow", "describe", "nightly"), ns, false)
		before, events, found = strings.Cut(describe, "Events:")
		return found && strings.Contains(events, "CreatedJob"), describe
	})
	require.True(t, found, describe)
	golden(t, "flow-describe", before)
	assert.Contains(t, events, "CreatedJob")

	_, errOut, err := kubectlTephra(t, env, ns, "flow", "describe", "missing")
	require.Error(t, err)
	assert.Contains(t, errOut, `jobflows.batch.tephra.dev "missing" not found`)

	// Gone with its Jobs (jobRetainPolicy delete) before the next test lists every namespace.
	require.NoError(t, env.Tephra.BatchV1alpha1().JobFlows(ns).Delete(t.Context(), "nightly", metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the jobflow's jobs gone", func() (bool, string) {
		jobs, err := env.Tephra.BatchV1alpha1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(jobs.Items) == 0, fmt.Sprint(err)
	})
}
