package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/job"
)

func shapeNamed(t *testing.T, name string) *JobShape {
	t.Helper()
	for _, sh := range JobShapes {
		if sh.Name == name {
			return sh
		}
	}
	t.Fatalf("no shape %s", name)
	return nil
}

func TestBurstShapesMakeNPodsEach(t *testing.T) {
	for _, n := range []int{1000, 40, 1001} {
		for _, sh := range JobShapes {
			pods := sh.jobs(n) * sh.PodsPerJob
			assert.LessOrEqual(t, pods, n, "%s of N=%d", sh.Name, n)
			assert.Greater(t, pods, n-sh.PodsPerJob, "%s of N=%d: as many whole Jobs as fit", sh.Name, n)
		}
	}
	assert.Equal(t, 125, shapeNamed(t, "J8").jobs(1000))
	assert.Equal(t, "j8-00007", shapeNamed(t, "J8").jobName(7))
}

// The Tephra Job must be what Tephra's Job controller turns into one gang of all its pods in the
// default queue, created at once.
func TestTephraBurstJobIsOneGangOfItsPods(t *testing.T) {
	for _, sh := range JobShapes {
		j := tephraBurstJob(sh, "ns", 3)
		assert.Equal(t, sh.jobName(3), j.Name)
		assert.Equal(t, schedulingv1alpha1.DefaultQueue, j.Spec.Queue)
		require.Len(t, j.Spec.Tasks, 1)
		assert.EqualValues(t, sh.PodsPerJob, j.Spec.Tasks[0].Replicas)
		assert.Equal(t, ptr.To(j.Spec.Tasks[0].Replicas), j.Spec.MinAvailable, "minAvailable = replicas")

		d := job.Decide(job.Observed{Job: j, Now: time.Now()})
		assert.Len(t, d.Create, sh.PodsPerJob, "%s: every pod created in the first decision", sh.Name)
		if sh.PodsPerJob == 1 {
			assert.Nil(t, d.PodGroup, "%s: a one-pod Job's pod carries its group, as the product's Jobs do", sh.Name)
			continue
		}
		require.NotNil(t, d.PodGroup, sh.Name)
		assert.EqualValues(t, sh.PodsPerJob, d.PodGroup.MinMember, sh.Name)
		assert.Equal(t, schedulingv1alpha1.DefaultQueue, d.PodGroup.Queue, sh.Name)
		for _, slot := range d.Create {
			pod := job.NewPod(j, &j.Spec.Tasks[0], slot.Index, 0, slot.Generation)
			assert.Equal(t, schedulingv1alpha1.SchedulerName, pod.Spec.SchedulerName)
			assert.Equal(t, j.Name, metav1.GetControllerOf(pod).Name, "the recorder finds the Job from the pod's owner")
		}
	}
}

func TestBatchBurstJobStartsEveryPodAtOnce(t *testing.T) {
	single := batchBurstJob(shapeNamed(t, "J1"), "ns", 0)
	assert.Equal(t, ptr.To[int32](1), single.Spec.Parallelism)
	assert.Equal(t, ptr.To[int32](1), single.Spec.Completions)
	assert.Nil(t, single.Spec.CompletionMode, "a one-pod Job is a plain NonIndexed Job")

	gang := batchBurstJob(shapeNamed(t, "J8"), "ns", 0)
	assert.Equal(t, ptr.To[int32](8), gang.Spec.Parallelism)
	assert.Equal(t, ptr.To[int32](8), gang.Spec.Completions)
	assert.Equal(t, ptr.To(batchv1.IndexedCompletion), gang.Spec.CompletionMode)
	assert.Equal(t, tephraBurstJob(shapeNamed(t, "J8"), "ns", 0).Spec.Tasks[0].Template, gang.Spec.Template,
		"both kinds make the same pods")
}

func TestBurstPodsRunUntilDeletedOnTephraScheduler(t *testing.T) {
	tmpl := burstPodTemplate()
	assert.Equal(t, schedulingv1alpha1.SchedulerName, tmpl.Spec.SchedulerName)
	assert.NotContains(t, tmpl.Annotations, "sim.tephra.dev/duration", "kwok would end the pods")
	requests := tmpl.Spec.Containers[0].Resources.Requests
	assert.NotContains(t, requests, corev1.ResourceName("nvidia.com/gpu"))
	cpu := requests[corev1.ResourceCPU]
	// The nodes hold a burst with room to spare.
	assert.LessOrEqual(t, maxBurstPodsPerNode*cpu.MilliValue(), int64(8000))
}

func TestKwokNodesHoldEveryPod(t *testing.T) {
	assert.Equal(t, 50, kwokNodesFor(1000))
	assert.Equal(t, 50, kwokNodesFor(40))
	assert.Equal(t, 101, kwokNodesFor(10001))
	for _, pods := range []int{1, 5000, 5001, 12345} {
		assert.GreaterOrEqual(t, kwokNodesFor(pods)*maxBurstPodsPerNode, pods)
	}
}

func burstPod(name, job, node string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	if job != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: job, Controller: ptr.To(true)}}
	}
	return pod
}

func TestJobPodRecorder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := newJobPodRecorder(3)
	r.observe(burstPod("a-0", "a", ""), at(100))
	r.observe(burstPod("a-1", "a", ""), at(150))
	r.observe(burstPod("a-0", "a", ""), at(200)) // an update that changes nothing
	r.observe(burstPod("b-0", "b", "node-1"), at(300))
	assert.False(t, r.done())
	r.observe(burstPod("a-0", "a", "node-2"), at(400))
	r.observe(burstPod("a-1", "a", "node-2"), at(500))
	r.observe(burstPod("a-1", "a", "node-2"), at(600))
	assert.True(t, r.done())

	o := r.observation()
	assert.Equal(t, 3, o.seen)
	assert.Equal(t, 3, o.bound)
	assert.Equal(t, at(300), o.lastSeen)
	assert.Equal(t, at(500), o.lastBound)
	assert.Equal(t, map[string]time.Time{"a": at(100), "b": at(300)}, o.firstPod)

	r.observe(burstPod("stray", "", ""), at(700))
	assert.NotContains(t, r.observation().firstPod, "", "a pod of no Job is counted for no Job")
}

func TestMeasureBurst(t *testing.T) {
	sh := shapeNamed(t, "J1")
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	calls := []time.Time{at(10), at(0), at(20), {}} // the last Job's call was never made
	o := burstObservation{want: 3, seen: 3, bound: 3, lastSeen: at(900), lastBound: at(1500),
		firstPod: map[string]time.Time{sh.jobName(0): at(110), sh.jobName(1): at(300), sh.jobName(2): at(920)}}
	var run JobBurstRun
	measureBurst(&run, sh, calls, at(50), o)
	assert.InDelta(t, 0.05, run.SubmittedSeconds, 1e-9, "from the first call, not the first Job's")
	assert.InDelta(t, 0.9, run.AllPodsExistSeconds, 1e-9)
	assert.InDelta(t, 1.5, run.AllPodsBoundSeconds, 1e-9)
	assert.Equal(t, 3, run.JobsWithPods)
	require.NotNil(t, run.FirstPodSeconds)
	assert.InDelta(t, 0.3, run.FirstPodSeconds.P50, 1e-9, "each Job from its own call: 0.1, 0.3, 0.9")
	assert.InDelta(t, 0.9, run.FirstPodSeconds.P99, 1e-9)

	o.seen, o.bound = 2, 1
	run = JobBurstRun{Pods: 3}
	measureBurst(&run, sh, calls, at(50), o)
	assert.Zero(t, run.AllPodsExistSeconds, "no time until every pod exists when one never did")
	ok, why := run.complete()
	assert.False(t, ok)
	assert.Contains(t, why, "2 of 3 pods created")
}

// burstResults are two repetitions of each kind on J1 (Tephra's second failed) and none on J8.
func burstResults() *JobBurstResults {
	run := func(kind string, rep int, exist, p50 float64, errText string) JobBurstRun {
		return JobBurstRun{Kind: kind, Shape: "J1", Rep: rep, Jobs: 100, Pods: 100, Seen: 100, Bound: 100, Error: errText,
			SubmittedSeconds: 1, AllPodsExistSeconds: exist, AllPodsBoundSeconds: exist + 1,
			FirstPodSeconds: &Quantiles{P50: p50, P99: 2 * p50}, ControllerCPUSeconds: ptr.To(3.0),
			APIServerCPUSeconds: ptr.To(exist), ControlPlaneCPUSeconds: ptr.To(2 * exist)}
	}
	return &JobBurstResults{
		Command: "make bench-jobs", Jobs: 100, Nodes: 50, Reps: 2, Workers: 32, QPS: 5000, Shapes: JobShapes,
		Started: time.Unix(0, 0), Finished: time.Unix(600, 0), Machine: Machine{CPUs: 2},
		Runs: []JobBurstRun{
			run(TephraJobKind, 1, 2, 0.5, ""),
			run(BatchJobKind, 1, 3, 0.4, ""),
			run(BatchJobKind, 2, 5, 0.6, ""),
			run(TephraJobKind, 2, 100, 9, "no pod created or bound for 1m30s"),
		},
	}
}

func TestJobBurstSummaryAndGoals(t *testing.T) {
	res := burstResults()
	tephra := res.summarize(TephraJobKind, "J1")
	assert.Equal(t, 1, tephra.completed)
	assert.Equal(t, 1, tephra.failed)
	assert.Equal(t, 2.0, tephra.allExist, "the failed repetition is left out")
	batch := res.summarize(BatchJobKind, "J1")
	assert.Equal(t, 4.0, batch.allExist)
	assert.InDelta(t, 0.5, batch.firstPodP50, 1e-9)
	assert.True(t, math.IsNaN(batch.mutatingRequestsPod), "not read: no figure")

	goals := res.goals()
	require.Len(t, goals, 2)
	assert.Equal(t, "0.50×", goals[0].measured)
	assert.Equal(t, "yes", goals[0].met)
	assert.Equal(t, "–", goals[1].met, "J8 did not run")

	res.Runs[0].AllPodsExistSeconds = 4.5
	assert.Equal(t, "no", res.goals()[0].met, "Tephra slower than batch/v1")
	assert.Len(t, res.Failures(), 1)
}

func TestJobBurstSection(t *testing.T) {
	none := jobBurstSection(nil)
	assert.Contains(t, none, "## Job burst")
	assert.Contains(t, none, "Not measured yet")
	assert.Contains(t, none, "N = 1000", "the method names the default size")

	text := jobBurstSection(burstResults())
	assert.NotContains(t, text, "Not measured yet")
	assert.Contains(t, text, "| J1: Tephra's time until every pod exists at most 1.0 × batch/v1's (Tephra / batch/v1) | 0.50× | yes |")
	assert.Contains(t, text, "| Tephra | rep 2 | failed: no pod created or bound for 1m30s |")
	assert.Contains(t, text, "| batch/v1 | median | 1.00 s | 4.00 s | 5.00 s | 0.50 s | 1.00 s | 3.00 | 4.00 | 8.00 | – |")
	assert.Contains(t, text, "| Tephra / batch/v1 | median | 1.00× | 0.50× | 0.60× | 1.00× | 1.00× | 1.00× | 0.50× | 0.50× | – |",
		"the apiserver's and the whole control plane's CPU, against batch/v1's")
	assert.Contains(t, text, "| Tephra / batch/v1 | median | 1.00× | 0.50× | 0.60× |")
	assert.Contains(t, text, "- Tephra J1 (rep 2): no pod created or bound")
	assert.Contains(t, text, "### J1\n\n100 one-pod Jobs (100 pods) created at once, 50 nodes.\n")
	assert.Less(t, strings.Index(text, "### J1"), strings.Index(text, "### J8"))
}

// The Job burst's section is rendered between the scheduling benchmark's and upstream's, and a
// later publication of either keeps it.
func TestPublishJobBurstKeepsItAcrossPublications(t *testing.T) {
	docs := t.TempDir()
	require.NoError(t, PublishJobBurst(docs, burstResults()))
	_, err := os.Stat(filepath.Join(docs, "benchmarks", jobBurstJSON))
	require.NoError(t, err)
	require.NoError(t, PublishUpstream(docs, &UpstreamResults{Command: "make bench-upstream"}))
	data, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	require.NoError(t, err)
	report := string(data)
	jobs, upstream := strings.Index(report, "## Job burst"), strings.Index(report, "## Upstream's scheduler_perf")
	require.GreaterOrEqual(t, jobs, 0)
	assert.Less(t, jobs, upstream)
	assert.Contains(t, report, "### J1")
}

func TestJobBurstSettings(t *testing.T) {
	s, err := JobBurstSettings{OutDir: "out"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultJobBurstJobs, s.Jobs)
	assert.Equal(t, "make bench-jobs", s.Command())
	s.Jobs, s.Reps = 40, 1
	assert.Equal(t, "make bench-jobs BENCH_JOBS_FLAGS='--jobs-n=40 --jobs-reps=1'", s.Command())

	_, err = JobBurstSettings{OutDir: "out", Jobs: 7}.withDefaults()
	assert.Error(t, err, "fewer pods than one Job of J8")
	_, err = JobBurstSettings{}.withDefaults()
	assert.Error(t, err, "no output folder")
}

// The writes of each kind are split by resource from the apiserver's request counts, and the
// report shows where one kind writes more than the other, most first.
func TestJobBurstWritesByResource(t *testing.T) {
	byResource, err := mutatingByResource(`apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 10
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",subresource="",verb="GET"} 99
apiserver_request_total{code="200",resource="jobs",subresource="status",verb="PUT"} 4
apiserver_request_total{code="409",resource="jobs",subresource="status",verb="PUT"} 1
`)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"pods": 10, "pods/binding": 10, "jobs/status": 5}, byResource, "reads are no writes; conflicts are")

	res := burstResults()
	res.Runs[0].WritesPerPodByResource = map[string]float64{"events": 4, "pods": 1, "jobs/status": 2}
	res.Runs[1].WritesPerPodByResource = map[string]float64{"events": 2, "pods": 1}
	res.Runs[2].WritesPerPodByResource = map[string]float64{"events": 1, "pods": 1, "jobs/status": 0.01}
	header, rows := res.writesTable(JobShapes[0])
	assert.Equal(t, []string{"writes/pod", "events", "jobs/status", "pods"}, header)
	assert.Equal(t, [][]string{{"Tephra", "4.00", "2.00", "1.00"}, {"batch/v1", "1.50", "0.01", "1.00"}}, rows)
	assert.Contains(t, jobBurstSection(res), "API writes per pod by resource")
}
