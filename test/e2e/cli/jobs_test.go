package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A Volcano Job submitted with `kubectl tephra job submit` is converted (and says so), runs, is
// listed and described; suspended, it holds no pods and `why` says so; resumed, it runs again;
// deleted, it is gone. A Volcano field Tephra's Job lacks is refused by name, before anything is
// created.
func TestJobCommands(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	env.Pool(t, "cli-jobs", 2, 4)
	createQueue(t, env, "cli-jobs", "root", nil)
	jobPhase := func(want batchv1alpha1.JobPhase) {
		t.Helper()
		framework.Eventually(t, time.Minute, "job tf-dist "+string(want), func() (bool, string) {
			job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(t.Context(), "tf-dist", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return job.Status.State.Phase == want && job.Status.Running == 3, string(job.Status.State.Phase)
		})
	}

	_, errOut, err := kubectlTephra(t, env, ns, "job", "submit", "-f", "testdata/volcano-job-with-network-topology.yaml")
	require.Error(t, err)
	assert.Contains(t, errOut, `Volcano job tf-topology has fields Tephra's Job does not`)
	assert.Contains(t, errOut, `unknown field "spec.networkTopology"`)

	golden(t, "job-submit", normalize(mustRun(t, env, ns, "job", "submit", "-f", "testdata/volcano-job.yaml"), ns, false))
	jobPhase(batchv1alpha1.JobRunning)
	job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(t.Context(), "tf-dist", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "tephra-scheduler", job.Spec.SchedulerName)
	assert.Equal(t, "tephra-scheduler", job.Spec.Tasks[0].Template.Spec.SchedulerName)

	settled(t, env, ns, "jobs", "jobs")
	settled(t, env, ns, "jobs-wide", "jobs", "-o", "wide")
	all := mustRun(t, env, ns, "jobs", "-A")
	assert.Contains(t, all, "NAMESPACE")
	assert.Contains(t, all, ns+"   tf-dist")
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, env, ns, "jobs", "-o", "json")), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, map[string]any{"name": "tf-dist", "phase": "Running", "queue": "cli-jobs", "running": 3.0, "minAvailable": 3.0}, pick(rows[0], "name", "phase", "queue", "running", "minAvailable"))
	// The job's PodGroup, named by the object it stands for, as kubectl get takes it.
	settled(t, env, ns, "groups", "groups")

	// The recorder writes each event from a goroutine of its own after the status it goes with.
	var describe, head, events string
	var found bool
	framework.Eventually(t, 30*time.Second, "job describe to list the job's events", func() (bool, string) {
		describe = mustRun(t, env, ns, "job", "describe", "tf-dist")
		head, events, found = strings.Cut(describe, "Events:")
		return found && strings.Contains(events, "PhaseChanged") && strings.Contains(events, "created PodGroup tf-dist: minMember 3"), describe
	})
	require.True(t, found, "describe lists events: %s", describe)
	assert.Contains(t, events, "PhaseChanged")
	assert.Contains(t, events, "created PodGroup tf-dist: minMember 3")
	// Which node each pod lands on is the scheduler's choice among equal nodes.
	head = regexp.MustCompile(`cli-jobs-[0-9]`).ReplaceAllString(head, "cli-jobs-N")
	golden(t, "job-describe", normalize(head, ns, true))

	golden(t, "job-suspend", normalize(mustRun(t, env, ns, "job", "suspend", "tf-dist"), ns, false))
	framework.Eventually(t, time.Minute, "the suspended job's pods gone", func() (bool, string) {
		n := bound(t, env, ns)
		return n == 0, strings.Repeat("pod ", n)
	})
	golden(t, "why-suspended", normalize(mustRun(t, env, ns, "why", "job/tf-dist"), ns, false))
	golden(t, "job-resume", normalize(mustRun(t, env, ns, "job", "resume", "tf-dist"), ns, false))
	jobPhase(batchv1alpha1.JobRunning)

	golden(t, "job-delete", normalize(mustRun(t, env, ns, "job", "delete", "tf-dist"), ns, false))
	framework.Eventually(t, time.Minute, "the job gone", func() (bool, string) {
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(t.Context(), "tf-dist", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there"
	})
	_, errOut, err = kubectlTephra(t, env, ns, "jobs")
	require.NoError(t, err)
	assert.Equal(t, "No Tephra Jobs found.\n", errOut)
}

// pick keeps some keys of a map.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}
