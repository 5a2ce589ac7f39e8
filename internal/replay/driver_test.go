package replay

import (
	"fmt"
	"io"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/replay/trace"
)

// pod is a replay pod of job in the given phase, bound when node is set.
func pod(job, name, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{jobLabel: job, indexLabel: "0"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func drain(d *driver) []string {
	var out []string
	for {
		select {
		case a := <-d.actions:
			out = append(out, a.what)
		default:
			return out
		}
	}
}

func testDriver(config *Configuration, jobs ...trace.Job) *driver {
	d := newDriver(config, nil, nil, jobs, 10, io.Discard)
	d.t0 = time.Now()
	for _, j := range d.jobs {
		j.submitted = d.t0
	}
	return d
}

func TestJobWorksOnceItsMinimumRunsAndEndsWithItsPods(t *testing.T) {
	d := testDriver(Configurations[0], trace.Job{Name: "g", Replicas: 3, MinReplicas: 2, Duration: 100, Queue: "q"})
	j := d.byName["g"]

	d.observe(pod("g", "g-0", "n1", corev1.PodRunning), false)
	assert.False(t, j.working, "one pod of a minimum of two runs: no work yet")
	assert.Empty(t, drain(d))

	d.observe(pod("g", "g-1", "n2", corev1.PodRunning), false)
	require.True(t, j.working, "the minimum runs")
	assert.Len(t, j.started, 1)
	assert.InDelta(t, 10*time.Second, j.workEnd.Sub(j.started[0]), float64(time.Millisecond), "100 trace seconds at 10x")
	assert.ElementsMatch(t, []string{"telling pod g-0 when it ends", "telling pod g-1 when it ends"}, drain(d))

	d.observe(pod("g", "g-2", "n3", corev1.PodRunning), false)
	assert.Equal(t, []string{"telling pod g-2 when it ends"}, drain(d), "a pod above the minimum ends with the job's work")
	assert.Equal(t, j.pods["g-0"].endsAt, j.pods["g-2"].endsAt)

	d.observe(pod("g", "g-0", "n1", corev1.PodSucceeded), false)
	assert.True(t, j.done, "its pods end when its work does")
	assert.Equal(t, []string{"deleting job g"}, drain(d))
	assert.True(t, j.ended.IsZero(), "two pods still hold their nodes")
	d.observe(pod("g", "g-1", "n2", corev1.PodSucceeded), false)
	d.observe(pod("g", "g-2", "n3", corev1.PodRunning), true)
	assert.False(t, j.ended.IsZero(), "no pod holds a node any more")

	run := d.run(time.Now())
	require.Len(t, run.Jobs, 1)
	assert.Len(t, run.Jobs[0].Pods, 3)
	assert.False(t, math.IsNaN(run.Jobs[0].Ended))
}

func TestPreemptedJobLosesItsWorkAndStartsAgain(t *testing.T) {
	configs, err := ConfigurationsByName("B0")
	require.NoError(t, err)
	b0 := configs[0]
	d := testDriver(b0, trace.Job{Name: "g", Replicas: 2, MinReplicas: 2, Duration: 100, Queue: "q"})
	j := d.byName["g"]
	d.observe(pod("g", "g-0", "n1", corev1.PodRunning), false)
	d.observe(pod("g", "g-1", "n2", corev1.PodRunning), false)
	require.True(t, j.working)
	drain(d)

	victim := pod("g", "g-1", "n2", corev1.PodRunning)
	victim.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler}}
	now := metav1.Now()
	victim.DeletionTimestamp = &now
	d.observe(victim, false)
	assert.False(t, j.working, "the minimum no longer runs")
	assert.Equal(t, []string{"telling pod g-0 when it ends"}, drain(d), "the pod left runs on, its end put off")
	assert.True(t, j.pods["g-0"].endsAt > j.workEnd.UTC().Format(time.RFC3339Nano))

	d.observe(victim, true)
	assert.Equal(t, []string{"creating pod g-0-r1 again"}, drain(d), "B0 has no job controller: the driver creates the pod again")
	assert.True(t, j.pods["g-1"].preempted)

	d.observe(pod("g", "g-0-r1", "n3", corev1.PodRunning), false)
	assert.True(t, j.working, "the minimum runs again")
	assert.Len(t, j.started, 2, "its work started again")
	assert.Len(t, drain(d), 2, "both pods are told the new end")
}

// Tephra's Job controller (C) and upstream's (B1j) create their jobs' pods again: the driver
// must not create another.
func TestJobControllersPodsAreNotCreatedAgainByTheDriver(t *testing.T) {
	configs, err := ConfigurationsByName("C,B1j")
	require.NoError(t, err)
	for _, config := range configs {
		d := testDriver(config, trace.Job{Name: "g", Replicas: 1, MinReplicas: 1, Duration: 100, Queue: "q"})
		d.observe(pod("g", "g-0", "n1", corev1.PodRunning), false)
		drain(d)
		d.observe(pod("g", "g-0", "n1", corev1.PodRunning), true)
		assert.Empty(t, drain(d), "%s: its Job controller creates its pods", config.Name)
	}
}

// B1j writes a job of 4 pods as an Indexed batch/v1 Job running all 4 at once, with a gang of its
// minimum for the Job controller's PodGroup, that no number of deleted pods fails; a job of one
// pod as a plain Job.
func TestB1jWritesAnIndexedJobWithAGangOfItsMinimum(t *testing.T) {
	job := batchJob(trace.Job{Name: "train", Replicas: 4, MinReplicas: 4, GPUs: 8, MilliCPU: 32000, Memory: "256Gi", Duration: 3600}, "train")
	assert.Equal(t, "train", job.Name)
	assert.Equal(t, namespace, job.Namespace)
	assert.Equal(t, batchv1.IndexedCompletion, ptr.Deref(job.Spec.CompletionMode, ""))
	assert.Equal(t, int32(4), ptr.Deref(job.Spec.Parallelism, 0))
	assert.Equal(t, int32(4), ptr.Deref(job.Spec.Completions, 0))
	require.NotNil(t, job.Spec.Scheduling)
	require.NotNil(t, job.Spec.Scheduling.SchedulingPolicy)
	require.NotNil(t, job.Spec.Scheduling.SchedulingPolicy.Gang)
	assert.Nil(t, job.Spec.Scheduling.SchedulingPolicy.Basic)
	assert.Equal(t, int32(4), ptr.Deref(job.Spec.Scheduling.SchedulingPolicy.Gang.MinCount, 0))
	assert.Equal(t, int32(math.MaxInt32), ptr.Deref(job.Spec.BackoffLimit, 0), "deletions by preemption never fail the Job")
	assert.Equal(t, batchv1.TerminatingOrFailed, ptr.Deref(job.Spec.PodReplacementPolicy, ""), "a deleted pod is replaced without waiting for a kubelet to fail it")
	assert.Nil(t, job.Spec.PodFailurePolicy, "it would make the replacement wait for phase Failed, which kwok never sets")
	assert.Equal(t, corev1.RestartPolicyNever, job.Spec.Template.Spec.RestartPolicy)
	assert.Equal(t, "train", job.Spec.Template.Labels[jobLabel], "the driver finds the Job controller's pods by it")
	assert.Nil(t, job.Spec.Template.Spec.SchedulingGroup, "the Job controller names its own PodGroup only in a template that names none")
	gpus := job.Spec.Template.Spec.Containers[0].Resources.Limits[localcluster.GPUResource]
	assert.Equal(t, int64(8), gpus.Value())

	elastic := batchJob(trace.Job{Name: "ft", Replicas: 4, MinReplicas: 2, GPUs: 8, Memory: "4Gi"}, "ft")
	assert.Equal(t, int32(2), ptr.Deref(elastic.Spec.Scheduling.SchedulingPolicy.Gang.MinCount, 0), "the gang is the minimum; the other pods are elastic")
	assert.Equal(t, int32(4), ptr.Deref(elastic.Spec.Parallelism, 0))

	single := batchJob(trace.Job{Name: "eval", Replicas: 1, MinReplicas: 1, Memory: "4Gi"}, "eval")
	assert.Nil(t, single.Spec.CompletionMode, "one pod: a plain Job")
	assert.Nil(t, single.Spec.Scheduling, "one pod: no gang")
	assert.Equal(t, int32(1), ptr.Deref(single.Spec.Completions, 0))
}

// The Job controller's pods carry the template's labels, and the completion index of their own:
// the driver finds them by their job's name and plays the job's work in them.
func TestB1jPodsArePlayedAsTheirJobs(t *testing.T) {
	configs, err := ConfigurationsByName("B1j")
	require.NoError(t, err)
	tj := trace.Job{Name: "g", Replicas: 2, MinReplicas: 2, Duration: 100, Queue: "q", Memory: "4Gi"}
	d := testDriver(configs[0], tj)
	template := batchJob(tj, "g").Spec.Template
	for i, name := range []string{"g-0-x7k2p", "g-1-q9w4z"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: maps.Clone(template.Labels)},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i)},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		p.Labels["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(i)
		d.observe(p, false)
	}
	assert.True(t, d.byName["g"].working, "both pods of the gang run")
	assert.ElementsMatch(t, []string{"telling pod g-0-x7k2p when it ends", "telling pod g-1-q9w4z when it ends"}, drain(d))
}

func TestJobNamesAreDNSLabelsAndUnique(t *testing.T) {
	names := jobNames([]trace.Job{{Name: "Train_ResNet"}, {Name: "train-resnet"}, {Name: "__"}, {Name: strings.Repeat("x", 80)}})
	assert.Equal(t, []string{"train-resnet", "train-resnet-1", "2", strings.Repeat("x", 40)}, names)
}

// B1j stops before it replays anything when the apiserver drops a Job's spec.scheduling, as it
// does with WorkloadWithJob off: its gangs would be scheduled pod by pod, unseen.
func TestB1jStopsWhenTheApiserverDropsJobGangs(t *testing.T) {
	keeps := fake.NewClientset()
	require.NoError(t, keepsJobGangs(t.Context(), keeps))

	drops := fake.NewClientset()
	drops.PrependReactor("create", "jobs", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create := action.(clienttesting.CreateActionImpl)
		assert.Equal(t, []string{metav1.DryRunAll}, create.GetCreateOptions().DryRun, "a dry run creates nothing")
		job := create.GetObject().(*batchv1.Job).DeepCopy()
		job.Spec.Scheduling = nil
		return true, job, nil
	})
	assert.ErrorContains(t, keepsJobGangs(t.Context(), drops), "WorkloadWithJob is off")
}

// B1's gang of a job with a trace priority names the PriorityClass its pods name: kube-scheduler
// places no group whose pods' priority differs from its own.
func TestB1GangsHaveTheirPodsPriority(t *testing.T) {
	j := trace.Job{Name: "g", Replicas: 2, MinReplicas: 2, Memory: "4Gi", HasPriority: true, Priority: -10}
	pg := upstreamPodGroup(j, "g")
	assert.Equal(t, podTemplate(j, "g").Spec.PriorityClassName, pg.Spec.PriorityClassName)
	assert.Equal(t, "replay-priority-minus-10", pg.Spec.PriorityClassName)
	assert.Equal(t, int32(2), pg.Spec.SchedulingPolicy.Gang.MinCount)
	assert.Empty(t, upstreamPodGroup(trace.Job{Name: "h", Replicas: 2, MinReplicas: 2}, "h").Spec.PriorityClassName, "no trace priority: the default, as its pods")
}
