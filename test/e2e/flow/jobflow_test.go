package flow

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func flow(name string, condition batchv1alpha1.FlowCondition, targets ...string) batchv1alpha1.Flow {
	f := batchv1alpha1.Flow{Name: name}
	if len(targets) > 0 {
		f.DependsOn = &batchv1alpha1.FlowDependsOn{Targets: targets, Condition: condition}
	}
	return f
}

// diamond is a → (b, c) → d, with a cleanup that runs if b fails.
func diamond(name string, policy batchv1alpha1.RetainPolicy) *batchv1alpha1.JobFlow {
	return &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1alpha1.JobFlowSpec{JobRetainPolicy: policy, Flows: []batchv1alpha1.Flow{
			flow("a", ""), flow("b", "", "a"), flow("c", "", "a"), flow("d", "", "b", "c"), flow("cleanup", batchv1alpha1.FlowOnFailed, "b"),
		}},
	}
}

func createFlow(t *testing.T, env *framework.Env, ns string, jf *batchv1alpha1.JobFlow) {
	t.Helper()
	_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Create(context.Background(), jf, metav1.CreateOptions{})
	require.NoError(t, err)
}

// assertAfter checks that the Job of flow was created no earlier than the JobFlow saw each of the
// Jobs of targets finished.
func assertAfter(t *testing.T, jf *batchv1alpha1.JobFlow, jobs map[string]batchv1alpha1.Job, flow string, targets ...string) {
	t.Helper()
	created := jobs[flow].CreationTimestamp
	for _, target := range targets {
		var end *metav1.Time
		for _, e := range jf.Status.JobStatusList {
			if e.Flow == target {
				end = e.EndTimestamp
			}
		}
		require.NotNil(t, end, "flow %s ended", target)
		assert.False(t, created.Before(end), "%s created at %s, before %s ended at %s", flow, created, target, end)
	}
}

// A flow a → (b, c) → d runs in that order and succeeds; the cleanup branch on b's failure is
// skipped. Deleted with the default jobRetainPolicy, retain, the JobFlow leaves its Jobs.
func TestFlowRunsInDependencyOrder(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	for _, name := range []string{"a", "b", "c", "d", "cleanup"} {
		createTemplate(t, env, ns, name, simSpec(1, "3s", 0))
	}
	createFlow(t, env, ns, diamond("diamond", ""))

	jf := waitFlow(t, env, ns, "diamond", 2*time.Minute, batchv1alpha1.FlowSucceed)
	jobs := flowJobs(t, env, ns, "diamond")
	assert.Equal(t, []string{"a", "b", "c", "d"}, keys(jobs), "the cleanup never ran")
	assertAfter(t, jf, jobs, "b", "a")
	assertAfter(t, jf, jobs, "c", "a")
	assertAfter(t, jf, jobs, "d", "b", "c")
	for flow, j := range jobs {
		assert.Equal(t, batchv1alpha1.JobCompleted, j.Status.State.Phase, flow)
		assert.Equal(t, "diamond-"+flow, j.Name)
		assert.True(t, metav1.IsControlledBy(&j, jf), "job %s is owned by the jobflow", j.Name)
	}
	assert.Equal(t, int32(4), jf.Status.Completed)
	assert.Equal(t, int32(5), jf.Status.Flows)
	assert.Equal(t, []string{"diamond-a", "diamond-b", "diamond-c", "diamond-d"}, jf.Status.CompletedJobs)
	assert.Equal(t, "Skipped", jf.Status.JobStatusList[4].State)
	assert.Equal(t, "flow b's job is Completed, not Failed", jf.Status.JobStatusList[4].Message)
	assert.Len(t, waitEventNotes(t, env, ns, "diamond", "CreatedJob", 4), 4)
	waitMetric(t, env, `tephra_jobflows\{phase="Succeed"\} [1-9]`)

	require.NoError(t, env.Tephra.BatchV1alpha1().JobFlows(ns).Delete(context.Background(), "diamond", metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the jobflow gone, its jobs kept without it", func() (bool, string) {
		_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Get(context.Background(), "diamond", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprint("jobflow: ", err)
		}
		jobs := flowJobs(t, env, ns, "diamond")
		for _, j := range jobs {
			if len(j.OwnerReferences) > 0 {
				return false, j.Name + " still owned"
			}
		}
		return len(jobs) == 4, fmt.Sprint(keys(jobs))
	})
	time.Sleep(3 * time.Second) // the garbage collector would have deleted owned Jobs by now
	assert.Len(t, flowJobs(t, env, ns, "diamond"), 4, "retained")
}

// b fails: the cleanup branch, conditioned on b's failure, runs instead of d, and the JobFlow
// ends Failed. Deleted with jobRetainPolicy delete, it takes its Jobs with it.
func TestAFailureRunsTheCleanupBranch(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	for _, name := range []string{"a", "c", "d", "cleanup"} {
		createTemplate(t, env, ns, name, simSpec(1, "2s", 0))
	}
	createTemplate(t, env, ns, "b", simSpec(1, "2s", 3))
	createFlow(t, env, ns, diamond("broken", batchv1alpha1.DeleteJobs))

	jf := waitFlow(t, env, ns, "broken", 2*time.Minute, batchv1alpha1.FlowFailed)
	jobs := flowJobs(t, env, ns, "broken")
	assert.Equal(t, []string{"a", "b", "c", "cleanup"}, keys(jobs), "d never ran")
	assert.Equal(t, batchv1alpha1.JobFailed, jobs["b"].Status.State.Phase)
	assert.Equal(t, batchv1alpha1.JobCompleted, jobs["cleanup"].Status.State.Phase)
	assertAfter(t, jf, jobs, "cleanup", "b")
	states := map[string]batchv1alpha1.FlowJobStatus{}
	for _, e := range jf.Status.JobStatusList {
		states[e.Flow] = e
	}
	assert.Equal(t, "Skipped", states["d"].State)
	assert.Equal(t, "flow b's job is Failed, not Completed", states["d"].Message)
	assert.Equal(t, []string{"broken-b"}, jf.Status.FailedJobs)
	assert.Equal(t, "nothing more will start, and jobs did not complete: broken-b (Failed)", jf.Status.State.Message)
	// The event of the phase is written after the status that waitFlow saw.
	framework.WaitEventOnAny(t, env, ns, []string{"broken"}, "PhaseChanged: phase Failed")

	require.NoError(t, env.Tephra.BatchV1alpha1().JobFlows(ns).Delete(context.Background(), "broken", metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the jobflow and its jobs gone", func() (bool, string) {
		_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Get(context.Background(), "broken", metav1.GetOptions{})
		jobs := flowJobs(t, env, ns, "broken")
		return apierrors.IsNotFound(err) && len(jobs) == 0, fmt.Sprint(err, keys(jobs))
	})
}

// tephra-controllers killed while b runs, and b completing meanwhile: restarted, it creates c
// once, and neither a nor b again.
func TestKillingTheControllersMidFlowCreatesNoJobTwice(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	createTemplate(t, env, ns, "a", simSpec(1, "2s", 0))
	createTemplate(t, env, ns, "b", simSpec(2, "20s", 0))
	createTemplate(t, env, ns, "c", simSpec(1, "2s", 0))
	createFlow(t, env, ns, &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "chain"},
		Spec:       batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{flow("a", ""), flow("b", "", "a"), flow("c", "", "b")}},
	})
	framework.Eventually(t, time.Minute, "b's job running", func() (bool, string) {
		jobs := flowJobs(t, env, ns, "chain")
		b, ok := jobs["b"]
		return ok && b.Status.State.Phase == batchv1alpha1.JobRunning, fmt.Sprint(keys(jobs))
	})
	before := map[string]types.UID{}
	for flow, j := range flowJobs(t, env, ns, "chain") {
		before[flow] = j.UID
	}
	require.Equal(t, []string{"a", "b"}, keys(before))
	// Events are sent in the background: let the creations' be recorded before the kill.
	framework.Eventually(t, 10*time.Second, "two CreatedJob events", func() (bool, string) {
		notes := eventNotes(t, env, ns, "chain", "CreatedJob")
		return len(notes) == 2, fmt.Sprint(notes)
	})

	env.Cluster.KillComponent(localcluster.Controllers)
	t.Cleanup(func() {
		if !env.Cluster.Running(localcluster.Controllers) {
			_ = env.Cluster.StartComponent(context.Background(), localcluster.Controllers)
		}
	})
	framework.Eventually(t, time.Minute, "b's pods done while the controllers are down", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=chain-b"})
		if err != nil {
			return false, err.Error()
		}
		done := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded {
				done++
			}
		}
		return done == 2, fmt.Sprintf("%d of 2 succeeded", done)
	})
	assert.NotContains(t, flowJobs(t, env, ns, "chain"), "c", "nothing acted while the controllers were down")

	require.NoError(t, env.Cluster.StartComponent(framework.Context(t, 3*time.Minute), localcluster.Controllers))
	jf := waitFlow(t, env, ns, "chain", 2*time.Minute, batchv1alpha1.FlowSucceed)
	time.Sleep(3 * time.Second) // settled: nothing more is created
	jobs := flowJobs(t, env, ns, "chain")
	assert.Equal(t, []string{"a", "b", "c"}, keys(jobs))
	for flow, uid := range before {
		assert.Equal(t, uid, jobs[flow].UID, "job %s is the one created before the kill", flow)
	}
	assert.Equal(t, []string{"created job chain-a from JobTemplate a", "created job chain-b from JobTemplate b", "created job chain-c from JobTemplate c"},
		waitEventNotes(t, env, ns, "chain", "CreatedJob", 3))
	assertAfter(t, jf, jobs, "c", "b")
}

// A JobFlow whose dependencies form a cycle is refused, with the message naming the flows in
// it; so are a target that is not a flow, a flow waiting for itself, and Volcano's probe and
// patch, which Tephra does not support.
func TestBadJobFlowsAreRefused(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name  string
		flows []batchv1alpha1.Flow
		want  string
	}{
		{"cycle", []batchv1alpha1.Flow{flow("prepare", ""), flow("x", "", "prepare", "z"), flow("y", "", "x"), flow("z", "", "y"), flow("report", "", "z")},
			"dependsOn must not form a cycle: flows x, y, z wait for each other, so none of them would ever start"},
		{"pair", []batchv1alpha1.Flow{flow("ping", "", "pong"), flow("pong", batchv1alpha1.FlowOnRunning, "ping")},
			"dependsOn must not form a cycle: flows ping, pong wait for each other"},
		{"missing", []batchv1alpha1.Flow{flow("a", ""), flow("b", "", "a", "ghost")}, "dependsOn names a flow that is not in the jobflow"},
		{"self", []batchv1alpha1.Flow{flow("a", "", "a")}, "a flow cannot depend on itself"},
	} {
		_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Create(context.Background(), &batchv1alpha1.JobFlow{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: batchv1alpha1.JobFlowSpec{Flows: tc.flows},
		}, metav1.CreateOptions{})
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	// The largest JobFlow: 32 flows in a chain is accepted, and closed into a cycle refused,
	// within the CEL cost limits of the rule and of its message.
	chain := func(cycle bool) []batchv1alpha1.Flow {
		var flows []batchv1alpha1.Flow
		for i := range 32 {
			f := flow(fmt.Sprintf("f%02d", i), "")
			if i > 0 || cycle {
				f = flow(f.Name, "", fmt.Sprintf("f%02d", (i+31)%32))
			}
			flows = append(flows, f)
		}
		return flows
	}
	_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Create(context.Background(), &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "long"}, Spec: batchv1alpha1.JobFlowSpec{Flows: chain(false)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Tephra.BatchV1alpha1().JobFlows(ns).Create(context.Background(), &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "ring"}, Spec: batchv1alpha1.JobFlowSpec{Flows: chain(true)},
	}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dependsOn must not form a cycle: flows f00, f01, f02")
	assert.Contains(t, err.Error(), "f30, f31 wait for each other")

	probe := `{"apiVersion":"batch.tephra.dev/v1alpha1","kind":"JobFlow","metadata":{"name":"probe"},"spec":{"flows":[{"name":"a"},{"name":"b","dependsOn":{"targets":["a"],"probe":{"tcpSocketList":[{"taskName":"x","port":80}]}}}]}}`
	err = env.Tephra.BatchV1alpha1().RESTClient().Post().Namespace(ns).Resource("jobflows").Body([]byte(probe)).Do(context.Background()).Error()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "probe is not supported by Tephra")
	patch := `{"apiVersion":"batch.tephra.dev/v1alpha1","kind":"JobFlow","metadata":{"name":"patch"},"spec":{"flows":[{"name":"a","patch":{"jobSpec":{"queue":"x"}}}]}}`
	err = env.Tephra.BatchV1alpha1().RESTClient().Post().Namespace(ns).Resource("jobflows").Body([]byte(patch)).Do(context.Background()).Error()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "patch is not supported by Tephra")
}

// The three-step example runs preprocess, train and evaluate, skips its cleanup, and is deleted
// with its Jobs (its jobRetainPolicy is delete). A flow whose JobTemplate is missing waits, and
// says so, until it is created.
func TestPipelineExample(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	docs := loadExample(t, "jobflow.yaml")
	jf := decode[batchv1alpha1.JobFlow](t, docs[0])
	var evaluate *batchv1alpha1.JobTemplate
	for _, doc := range docs[1:] {
		tmpl := decode[batchv1alpha1.JobTemplate](t, doc)
		if tmpl.Name == "evaluate" {
			evaluate = tmpl
			continue
		}
		_, err := env.Tephra.BatchV1alpha1().JobTemplates(ns).Create(context.Background(), tmpl, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NotNil(t, evaluate)
	createFlow(t, env, ns, jf)

	// The status, and the event saying the same, which the recorder writes after it.
	missing := "FailedCreate: flow evaluate: JobTemplate " + ns + "/evaluate not found"
	framework.Eventually(t, 2*time.Minute, "evaluate waiting for its template, and an event saying so", func() (bool, string) {
		jf := getFlow(t, env, ns, "pipeline")
		events := env.Events(ns, "pipeline")
		for _, c := range jf.Status.Conditions {
			if c.Type == "TemplatesFound" && c.Status == metav1.ConditionFalse {
				return strings.Contains(events, missing), c.Message + "; events: " + events
			}
		}
		return false, describeFlow(jf)
	})
	waiting := getFlow(t, env, ns, "pipeline")
	assert.Equal(t, batchv1alpha1.FlowRunning, waiting.Status.State.Phase)
	assert.Contains(t, waiting.Status.JobStatusList[2].Message, "JobTemplate "+ns+"/evaluate not found")
	assert.Contains(t, env.Events(ns, "pipeline"), missing)

	_, err := env.Tephra.BatchV1alpha1().JobTemplates(ns).Create(context.Background(), evaluate, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitFlow(t, env, ns, "pipeline", 2*time.Minute, batchv1alpha1.FlowSucceed)
	assert.Equal(t, []string{"pipeline-preprocess", "pipeline-train", "pipeline-evaluate"}, done.Status.CompletedJobs)
	assert.Equal(t, "Skipped", done.Status.JobStatusList[3].State)
	jobs := flowJobs(t, env, ns, "pipeline")
	assert.Equal(t, []string{"evaluate", "preprocess", "train"}, keys(jobs))
	assertAfter(t, done, jobs, "train", "preprocess")
	assertAfter(t, done, jobs, "evaluate", "train")

	require.NoError(t, env.Tephra.BatchV1alpha1().JobFlows(ns).Delete(context.Background(), "pipeline", metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the jobflow and its jobs gone", func() (bool, string) {
		jobs := flowJobs(t, env, ns, "pipeline")
		return len(jobs) == 0, fmt.Sprint(keys(jobs))
	})
}
