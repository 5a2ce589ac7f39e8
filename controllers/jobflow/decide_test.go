package jobflow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

func flow(name string, condition batchv1alpha1.FlowCondition, targets ...string) batchv1alpha1.Flow {
	f := batchv1alpha1.Flow{Name: name}
	if len(targets) > 0 {
		f.DependsOn = &batchv1alpha1.FlowDependsOn{Targets: targets, Condition: condition}
	}
	return f
}

// diamond is a → (b, c) → d, with cleanup when b fails.
func diamond() *batchv1alpha1.JobFlow {
	return &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "pipe", Namespace: "ml"},
		Spec: batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{
			flow("a", ""), flow("b", "", "a"), flow("c", "", "a"), flow("d", "", "b", "c"), flow("cleanup", batchv1alpha1.FlowOnFailed, "b"),
		}},
	}
}

// step runs Decide, and then plays the Reconciler: the status is written, and the Jobs it asked
// for exist.
type run struct {
	t    *testing.T
	jf   *batchv1alpha1.JobFlow
	jobs map[string]*batchv1alpha1.Job
	now  time.Time
}

func newRun(t *testing.T, jf *batchv1alpha1.JobFlow) *run {
	return &run{t: t, jf: jf, jobs: map[string]*batchv1alpha1.Job{}, now: time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)}
}

func (r *run) step() []string {
	r.now = r.now.Add(time.Second)
	d := Decide(Observed{Flow: r.jf, Jobs: r.jobs, Now: metav1.NewTime(r.now)})
	for _, name := range d.Create {
		require.NotContains(r.t, r.jobs, name, "flow %s created twice", name)
		r.jobs[name] = &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: JobName(r.jf.Name, name), CreationTimestamp: metav1.NewTime(r.now)}}
	}
	r.jf.Status = d.Status
	return d.Create
}

func (r *run) set(flow string, phase batchv1alpha1.JobPhase) {
	r.jobs[flow].Status.State.Phase = phase
}

func (r *run) states() map[string]string {
	out := map[string]string{}
	for _, e := range r.jf.Status.JobStatusList {
		out[e.Flow] = e.State
	}
	return out
}

func TestDiamondRunsInOrder(t *testing.T) {
	r := newRun(t, diamond())
	assert.Equal(t, []string{"a"}, r.step())
	assert.Equal(t, batchv1alpha1.FlowRunning, r.jf.Status.State.Phase)
	assert.Empty(t, r.step(), "a is pending")
	assert.Equal(t, map[string]string{"a": "Pending", "b": "Waiting", "c": "Waiting", "d": "Waiting", "cleanup": "Waiting"}, r.states())
	r.set("a", batchv1alpha1.JobRunning)
	assert.Empty(t, r.step())
	r.set("a", batchv1alpha1.JobCompleted)
	assert.Equal(t, []string{"b", "c"}, r.step())
	r.set("b", batchv1alpha1.JobCompleted)
	assert.Empty(t, r.step(), "d waits for c too")
	e := r.jf.Status.JobStatusList[3]
	assert.Equal(t, "waits for the jobs of c to be Completed", e.Message)
	assert.Equal(t, "Skipped", r.states()["cleanup"], "b completed: the cleanup will never run")
	r.set("c", batchv1alpha1.JobCompleted)
	assert.Equal(t, []string{"d"}, r.step())
	r.set("d", batchv1alpha1.JobCompleted)
	r.step()
	assert.Equal(t, batchv1alpha1.FlowSucceed, r.jf.Status.State.Phase, r.jf.Status.State.Message)
	assert.Equal(t, int32(4), r.jf.Status.Completed)
	assert.Equal(t, []string{"pipe-a", "pipe-b", "pipe-c", "pipe-d"}, r.jf.Status.CompletedJobs)
	assert.NotNil(t, r.jf.Status.JobStatusList[0].StartTimestamp)
	assert.NotNil(t, r.jf.Status.JobStatusList[0].EndTimestamp)
}

func TestAFailureRunsTheCleanupBranchInstead(t *testing.T) {
	r := newRun(t, diamond())
	r.step()
	r.set("a", batchv1alpha1.JobCompleted)
	r.step()
	r.set("c", batchv1alpha1.JobCompleted)
	r.set("b", batchv1alpha1.JobFailed)
	assert.Equal(t, []string{"cleanup"}, r.step())
	assert.Equal(t, "Skipped", r.states()["d"])
	assert.Equal(t, "flow b's job is Failed, not Completed", r.jf.Status.JobStatusList[3].Message)
	assert.Equal(t, batchv1alpha1.FlowRunning, r.jf.Status.State.Phase, "the cleanup runs")
	r.set("cleanup", batchv1alpha1.JobCompleted)
	r.step()
	assert.Equal(t, batchv1alpha1.FlowFailed, r.jf.Status.State.Phase)
	assert.Equal(t, "nothing more will start, and jobs did not complete: pipe-b (Failed)", r.jf.Status.State.Message)
	assert.Equal(t, []string{"pipe-b"}, r.jf.Status.FailedJobs)
}

func TestRunningConditionAndSkipsThatPropagate(t *testing.T) {
	jf := &batchv1alpha1.JobFlow{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{
		flow("server", ""), flow("client", batchv1alpha1.FlowOnRunning, "server"), flow("after", "", "client"), flow("report", "", "server"),
	}}}
	r := newRun(t, jf)
	r.step()
	r.set("server", batchv1alpha1.JobRunning)
	assert.Equal(t, []string{"client"}, r.step())
	// The server fails after it ran: the client started anyway, report never will.
	r.set("server", batchv1alpha1.JobFailed)
	r.set("client", batchv1alpha1.JobTerminated)
	r.step()
	assert.Equal(t, map[string]string{"server": "Failed", "client": "Terminated", "after": "Skipped", "report": "Skipped"}, r.states())
	assert.Equal(t, batchv1alpha1.FlowFailed, r.jf.Status.State.Phase)
	assert.Equal(t, []string{"p-client"}, r.jf.Status.TerminatedJobs)

	// A target that finished before it was seen Running still counts as having run if it completed.
	jf2 := &batchv1alpha1.JobFlow{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{
		flow("x", ""), flow("y", batchv1alpha1.FlowOnRunning, "x"),
	}}}
	r = newRun(t, jf2)
	r.step()
	r.set("x", batchv1alpha1.JobCompleted)
	assert.Equal(t, []string{"y"}, r.step())
}

func TestADeletedJobIsNotCreatedAgain(t *testing.T) {
	r := newRun(t, diamond())
	r.step()
	r.set("a", batchv1alpha1.JobRunning)
	r.step()
	delete(r.jobs, "a")
	assert.Empty(t, r.step())
	assert.Equal(t, "Deleted", r.states()["a"])
	assert.Equal(t, "Skipped", r.states()["d"])
	assert.Equal(t, batchv1alpha1.FlowFailed, r.jf.Status.State.Phase)

	// A job that finished and was deleted after (its TTL) keeps its last state.
	r = newRun(t, diamond())
	r.step()
	r.set("a", batchv1alpha1.JobCompleted)
	assert.Equal(t, []string{"b", "c"}, r.step())
	delete(r.jobs, "a")
	assert.Empty(t, r.step())
	assert.Equal(t, "Completed", r.states()["a"])
}

func TestPhasesBeforeAnyJobAndWhileDeleting(t *testing.T) {
	jf := diamond()
	d := Decide(Observed{Flow: jf, Jobs: nil, Now: metav1.Now()})
	assert.Equal(t, []string{"a"}, d.Create)
	jf.Status = d.Status
	jf.Status.JobStatusList[0].State, jf.Status.JobStatusList[0].CreationTimestamp = "Waiting", nil // its template was missing
	jf.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	jf.Spec.JobRetainPolicy = batchv1alpha1.DeleteJobs
	s := summarize(jf, entriesOf(jf.Status))
	assert.Equal(t, batchv1alpha1.FlowTerminating, s.State.Phase)
	assert.Equal(t, "the jobflow is being deleted; its jobs are deleted", s.State.Message)
	jf.DeletionTimestamp = nil
	assert.Equal(t, batchv1alpha1.FlowPending, summarize(jf, entriesOf(jf.Status)).State.Phase)
}

func TestCyclesDoNotHang(t *testing.T) {
	// The CRD refuses cycles; Decide must still end on one that got through.
	jf := &batchv1alpha1.JobFlow{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{
		flow("x", "", "y"), flow("y", "", "x"), flow("z", "", "missing"),
	}}}
	d := Decide(Observed{Flow: jf, Now: metav1.Now()})
	assert.Empty(t, d.Create)
	assert.Equal(t, "dependsOn names flow missing, which the jobflow does not have", d.Status.JobStatusList[2].Message)
}

// A flow's end is when its Job ended, not when a decision first saw it: a status write lost to a
// conflict must not date the end after the dependent Job was created on it.
func TestEndTimestampIsTheJobsOwn(t *testing.T) {
	r := newRun(t, diamond())
	require.Equal(t, []string{"a"}, r.step())
	ended := metav1.NewTime(r.now.Add(500 * time.Millisecond))
	r.set("a", batchv1alpha1.JobCompleted)
	r.jobs["a"].Status.State.LastTransitionTime = ended
	r.now = r.now.Add(time.Minute) // the decision that sees it comes late
	r.step()
	e := r.jf.Status.JobStatusList[0]
	require.NotNil(t, e.EndTimestamp)
	assert.Equal(t, ended, *e.EndTimestamp)
}
