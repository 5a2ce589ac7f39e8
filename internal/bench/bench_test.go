package bench

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

func TestPercentileAndMedian(t *testing.T) {
	values := []float64{5, 1, 4, 2, 3}
	assert.Equal(t, 3.0, percentile(values, 50))
	assert.Equal(t, 5.0, percentile(values, 99))
	assert.Equal(t, 1.0, percentile(values, 0))
	assert.Equal(t, 3.0, median(values))
	assert.Equal(t, 2.5, median([]float64{1, 2, 3, 4}))
	assert.True(t, math.IsNaN(percentile(nil, 50)))
	assert.Equal(t, []float64{5, 1, 4, 2, 3}, values, "inputs are not reordered")
}

func TestThroughput(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var binds []time.Time
	// 10 binds in the first second, 20 in the second, 5 in the partial third.
	for i := range 10 {
		binds = append(binds, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	for i := range 20 {
		binds = append(binds, t0.Add(time.Second+time.Duration(i)*50*time.Millisecond))
	}
	for i := range 5 {
		binds = append(binds, t0.Add(2*time.Second+time.Duration(i)*100*time.Millisecond))
	}
	avg, samples := throughput(binds)
	assert.InDelta(t, 35/2.4, avg, 1e-9)
	assert.Equal(t, []float64{10, 20}, samples, "the partial last second is left out")

	avg, samples = throughput(binds[:3])
	assert.InDelta(t, 3, avg, 1e-9, "a drain shorter than a second counts as one second")
	assert.Equal(t, []float64{3}, samples)

	avg, samples = throughput(nil)
	assert.Zero(t, avg)
	assert.Empty(t, samples)
}

func TestRunOrderPutsEveryConfigurationInEveryPosition(t *testing.T) {
	assert.Equal(t, []int{0, 1, 2, 3}, runOrder(4, 0))
	assert.Equal(t, []int{1, 2, 3, 0}, runOrder(4, 1))
	assert.Equal(t, []int{3, 0, 1, 2}, runOrder(4, 7))
	first := map[int]bool{}
	for shift := range 4 {
		first[runOrder(4, shift)[0]] = true
	}
	assert.Len(t, first, 4, "over four repetitions each configuration runs first once")
}

func TestSumMutatingRequests(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="PATCH",version="v1"} 2.5e+01
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="DELETE",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="WATCH",version="v1"} 9
apiserver_request_duration_seconds_count{verb="POST"} 1000
`
	sum, err := sumMutatingRequests(text)
	require.NoError(t, err)
	assert.InDelta(t, 128, sum, 1e-9)
	_, err = sumMutatingRequests("other_metric 1\n")
	assert.Error(t, err)
}

func TestWorkloads(t *testing.T) {
	size := workloadSize{pods: 300, nodes: 100, gpus: 12}
	p := newWorkload(scenarioByName("P"), "ns", size)
	assert.Len(t, p.pods, 300)
	assert.Empty(t, p.gangs)
	assert.Equal(t, 300, p.measured())
	assert.False(t, p.queues())

	g64 := newWorkload(scenarioByName("G64"), "ns", size)
	assert.Len(t, g64.gangs, 4)
	assert.Len(t, g64.pods, 256)
	assert.Equal(t, 64, g64.gangs[0].minMember)

	gi := newWorkload(scenarioByName("GI"), "ns", size)
	assert.Equal(t, 150, gi.measured())
	assert.Len(t, gi.pods, 150+blockerGangs*101)
	for _, g := range gi.gangs {
		assert.True(t, g.blocker)
		assert.Equal(t, 101, g.minMember, "one member more than there are nodes")
	}
	// Blockers are spread through the plain pods, not bunched at either end.
	firstHalf := 0
	for _, pod := range gi.pods[:len(gi.pods)/2] {
		if pod.blocker {
			firstHalf++
		}
	}
	assert.InDelta(t, blockerGangs*101/2, firstHalf, 2)
	// Two members of a never-fitting gang never share a node, and one fits beside plain pods.
	cpu := nodeShapeCPU(t)
	assert.Greater(t, 2*blockerCPU.MilliValue(), cpu)
	assert.Less(t, blockerCPU.MilliValue()+10*podCPU.MilliValue(), cpu)
}

func TestQueueWorkload(t *testing.T) {
	q := newWorkload(scenarioByName("Q"), "ns", workloadSize{pods: 300, nodes: 100, gpus: 12, qScale: 0.1})
	require.True(t, q.queues())
	assert.Len(t, q.pods, qDemand*12, "5x the GPUs, one GPU each")
	assert.Equal(t, len(q.pods), q.measured())
	perQueue := map[string]int{}
	var total time.Duration
	for i, p := range q.pods {
		assert.Equal(t, benchQueues[i%3].Name, p.queue, "queues interleaved")
		assert.Equal(t, 1, p.gpus)
		assert.GreaterOrEqual(t, p.run, time.Second)
		assert.LessOrEqual(t, p.run, 3*time.Second)
		perQueue[p.queue]++
		total += p.run
	}
	assert.Equal(t, map[string]int{"bench-q1": 20, "bench-q2": 20, "bench-q3": 20}, perQueue)
	assert.InDelta(t, 2*time.Second, total/time.Duration(len(q.pods)), float64(300*time.Millisecond))
	again := newWorkload(scenarioByName("Q"), "other", workloadSize{gpus: 12, qScale: 0.1})
	assert.Equal(t, q.pods, again.pods, "every configuration gets the same jobs")

	pod := q.pod(q.pods[0], TephraGangs)
	assert.Equal(t, "bench-q1", pod.Labels[schedulingv1alpha1.QueueLabel])
	assert.Equal(t, q.pods[0].run.String(), pod.Annotations[durationAnnotation])
	gpus := pod.Spec.Containers[0].Resources
	assert.Equal(t, int64(1), gpus.Requests.Name(gpuResource, resource.DecimalSI).Value())
	assert.Equal(t, int64(1), gpus.Limits.Name(gpuResource, resource.DecimalSI).Value(), "extended resources need limits")
	d, err := time.ParseDuration(pod.Annotations[durationAnnotation])
	require.NoError(t, err, "kwok parses the annotation with time.ParseDuration")
	assert.Equal(t, q.pods[0].run, d)
}

func TestBenchNodes(t *testing.T) {
	gpu, plain := benchNode(0), benchNode(1)
	assert.True(t, schedulable(gpu), "created Ready")
	assert.True(t, schedulable(plain))
	assert.Equal(t, "true", gpu.Labels[gpuNodeLabel])
	assert.NotContains(t, plain.Labels, gpuNodeLabel)
	assert.Equal(t, int64(gpusPerNode), gpu.Status.Allocatable.Name(gpuResource, resource.DecimalSI).Value())
	assert.NotContains(t, plain.Status.Allocatable, gpuResource)
	assert.Equal(t, "10.64.0.1", plain.Status.Addresses[0].Address)
	assert.Equal(t, 12, estimateGPUs(100), "nodes 0, 40 and 80")
	assert.Equal(t, 100, estimateGPUs(1000))
}

func TestKwokPodStages(t *testing.T) {
	dir := t.TempDir()
	path, err := writeKwokPodStages(filepath.Join("..", ".."), dir)
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	for _, want := range []string{"kind: KwokConfiguration", "name: pod-ready", "name: pod-complete", "name: pod-delete", durationAnnotation,
		"name: node-initialize"} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "node-heartbeat", "no heartbeat: the nodes stay as created")
}

func nodeShapeCPU(t *testing.T) int64 {
	t.Helper()
	node := localcluster.SimulatedNode("n", nodeShape)
	return node.Status.Allocatable.Cpu().MilliValue()
}

func TestPodsPerGangAPI(t *testing.T) {
	w := newWorkload(scenarioByName("G8"), "ns", workloadSize{pods: 64, nodes: 10})
	member := w.pods[0]

	plain := w.pod(member, NoGangs)
	assert.Equal(t, member.gang, plain.Labels[groupLabel], "the recorder follows gangs B0 does not know of")
	assert.NotContains(t, plain.Labels, schedulingv1alpha1.PodGroupLabel)
	assert.Nil(t, plain.Spec.SchedulingGroup)
	assert.Equal(t, schedulerName, plain.Spec.SchedulerName)

	tephra := w.pod(member, TephraGangs)
	assert.Equal(t, member.gang, tephra.Labels[schedulingv1alpha1.PodGroupLabel])
	assert.Nil(t, tephra.Spec.SchedulingGroup)

	upstream := w.pod(member, UpstreamGangs)
	assert.NotContains(t, upstream.Labels, schedulingv1alpha1.PodGroupLabel)
	require.NotNil(t, upstream.Spec.SchedulingGroup)
	assert.Equal(t, member.gang, *upstream.Spec.SchedulingGroup.PodGroupName)
}

func TestRecorderGangs(t *testing.T) {
	w := &workload{
		namespace: "ns",
		gangs:     []gangSpec{{name: "a", minMember: 3}, {name: "never", minMember: 5, blocker: true}},
		pods: []podSpec{
			{name: "a-0", gang: "a"}, {name: "a-1", gang: "a"}, {name: "a-2", gang: "a"},
			{name: "never-0", gang: "never", blocker: true}, {name: "never-1", gang: "never", blocker: true},
			{name: "plain"},
		},
	}
	r := newRecorder(w)
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	for _, p := range w.pods {
		r.observe(pod(p.name, ""), false)
	}
	r.observe(pod("unknown", "n"), false)
	c := r.counts()
	assert.Equal(t, []int{6, 0, 4}, []int{c.seen, c.bound, c.toBind})

	r.observe(pod("a-0", "n"), false)
	r.observe(pod("a-1", "n"), false)
	r.observe(pod("never-0", "n"), false)
	r.observe(pod("a-1", "n"), false) // seen again: counted once
	assert.Equal(t, 3, r.partial)
	r.observe(pod("a-2", "n"), false)
	r.observe(pod("plain", "n"), false)
	assert.Equal(t, 1, r.partial, "the whole gang leaves the count; the blocker stays")

	o := r.observation()
	assert.Equal(t, 3, o.peakPartial)
	assert.Equal(t, 1, o.partialAtEnd, "the never-fitting gang's member is left bound")
	require.Len(t, o.gangSpreads, 1)
	assert.GreaterOrEqual(t, o.gangSpreads[0], time.Duration(0))
	assert.Equal(t, 5, o.bound)
	assert.Len(t, o.binds, 4, "blockers are not measured")
	assert.Len(t, o.latencies, 4)
	assert.Equal(t, []int{1, 1, 0}, []int{o.gangs, o.gangsWhole, o.blockersWhole})
	assert.Zero(t, r.counts().toBind)
}

func TestRecorderEnds(t *testing.T) {
	w := &workload{namespace: "ns", pods: []podSpec{{name: "a", queue: "bench-q1", gpus: 1}, {name: "b", queue: "bench-q2", gpus: 1}, {name: "c", queue: "bench-q3", gpus: 1}}}
	r := newRecorder(w)
	var freed []string
	r.setOnEnd(func(node string) { freed = append(freed, node) })
	pod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	for _, name := range []string{"a", "b", "c"} {
		r.observe(pod(name, "", corev1.PodPending), false)
	}
	r.observe(pod("a", "n1", corev1.PodPending), false)
	r.observe(pod("a", "n1", corev1.PodRunning), false)
	r.observe(pod("a", "n1", corev1.PodSucceeded), false)
	r.observe(pod("a", "n1", corev1.PodSucceeded), false) // seen again: counted once
	r.observe(pod("b", "n2", corev1.PodRunning), false)
	r.observe(pod("b", "n2", corev1.PodRunning), true) // deleted while running: evicted
	r.observe(pod("c", "", corev1.PodPending), true)   // deleted before binding
	c := r.counts()
	assert.Equal(t, 3, c.ended)
	assert.Equal(t, 2, c.bound)
	assert.Equal(t, []string{"n1", "n2"}, freed, "GPUs come back once per bound pod")
	o := r.observation()
	assert.Equal(t, 2, o.evicted)
	assert.Len(t, o.pods, 3)
}

func TestWaterFill(t *testing.T) {
	w := []float64{1, 2, 3}
	assert.InDeltaSlice(t, []float64{20, 40, 60}, waterFill(120, w, []float64{500, 500, 500}), 1e-9)
	// q3 asks for less than its share: the rest goes to the others by weight.
	assert.InDeltaSlice(t, []float64{30, 60, 30}, waterFill(120, w, []float64{500, 500, 30}), 1e-9)
	// Nobody asks for enough: everyone gets its demand.
	assert.InDeltaSlice(t, []float64{5, 0, 7}, waterFill(120, w, []float64{5, 0, 7}), 1e-9)
	// The docs' 3:1 example.
	assert.InDeltaSlice(t, []float64{9, 3}, waterFill(12, []float64{3, 1}, []float64{100, 100}), 1e-9)
}

func TestQueueResult(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// 4 GPUs. q3 (weight 3) gets 2 of them from the start, q1 and q2 one each; all run 2 s.
	var pods []podRecord
	job := func(queue string, bound, end float64) {
		pods = append(pods, podRecord{queue: queue, gpus: 1, run: 2 * time.Second, created: t0, bound: at(bound), ended: at(end)})
	}
	job("bench-q3", 0, 2)
	job("bench-q3", 0, 2)
	job("bench-q1", 0, 2)
	job("bench-q2", 0, 2)
	job("bench-q3", 2, 4)
	job("bench-q3", 2, 4)
	job("bench-q2", 2, 4)
	job("bench-q1", 3, 5) // one GPU idle from 2 to 3 s
	res := queueResult(pods, 4, 0)
	assert.InDelta(t, 5, res.MakespanSeconds, 1e-9)
	assert.InDelta(t, 4, res.LowerBoundSeconds, 1e-9, "16 GPU-seconds on 4 GPUs")
	// From the first bind (0) to the last (3): 4+4+3 GPU-seconds held of 12.
	assert.InDelta(t, 11.0/12, res.Utilisation, 1e-9)
	require.Len(t, res.Queues, 3)
	assert.Equal(t, 2, res.Queues[0].Pods)
	assert.Equal(t, 4, res.Queues[2].Pods)
	assert.InDelta(t, 2.0, res.Queues[2].AdmissionSeconds.P99, 1e-9)
	assert.Greater(t, res.Queues[2].Share, res.Queues[0].Share)
	for _, q := range res.Queues {
		assert.GreaterOrEqual(t, q.Deviation, 0.0)
		assert.LessOrEqual(t, q.Deviation, 1.0)
	}
	require.NotNil(t, res.Series)
	assert.Equal(t, 2.0, res.Series.Held[2][0], "q3 holds 2 GPUs at the first bind")
	assert.Len(t, res.Series.Held[0], len(res.Series.Deserved[0]))
}

func TestParsePprofTop(t *testing.T) {
	text := `File: tephra-scheduler
Type: cpu
Duration: 15.10s, Total samples = 12.34s (81.72%)
Showing nodes accounting for 10.50s, 85.09% of 12.34s total
Dropped 412 nodes (cum <= 0.06s)
      flat  flat%   sum%        cum   cum%
     1.20s  9.72%  9.72%      1.50s 12.16%  runtime.scanobject
     0.50s  4.05% 13.78%      3.10s 25.12%  github.com/tephra-dev/tephra/plugins/queue.(*Queue).PreFilter
      10ms 0.081% 13.86%      8.20s 66.45%  k8s.io/kubernetes/pkg/scheduler.(*Scheduler).ScheduleOne
`
	entries, total := parsePprofTop(text)
	assert.InDelta(t, 12.34, total, 1e-9)
	require.Len(t, entries, 3)
	assert.Equal(t, "runtime.scanobject", entries[0].Name)
	assert.InDelta(t, 9.72, entries[0].Flat, 1e-9)
	assert.InDelta(t, 25.12, entries[1].Cum, 1e-9)
	for text, want := range map[string]float64{"850ms": 0.85, "1.5mins": 90, "2s": 2} {
		got, err := parsePprofDuration(text)
		require.NoError(t, err)
		assert.InDelta(t, want, got, 1e-9, text)
	}
}

func TestEstimate(t *testing.T) {
	full := Estimate(Settings{OutDir: "out"}, Configurations, Scenarios)
	assert.Greater(t, full, 10*time.Minute)
	// 30 minutes for L, B0, B1 and C; CU (issue #14) and CG (issue #28) add their three gang
	// scenarios each.
	assert.Less(t, full, 40*time.Minute, "the default run fits the budget")
	withoutCU := Estimate(Settings{OutDir: "out"}, slices.DeleteFunc(slices.Clone(Configurations), func(c *Configuration) bool { return c.Name == "CU" || c.Name == "CG" }), Scenarios)
	assert.Less(t, withoutCU, 30*time.Minute)
	gangs := Estimate(Settings{OutDir: "out"}, []*Configuration{configurationByName("CU")}, Scenarios)
	all := Estimate(Settings{OutDir: "out"}, []*Configuration{configurationByName("C")}, Scenarios)
	assert.Less(t, gangs, all, "CU runs only the gang scenarios")
	smoke := Estimate(SmokeSettings("out"), Configurations, Scenarios)
	assert.Less(t, smoke, 3*time.Minute)
}

func TestSettings(t *testing.T) {
	t.Setenv("BENCH_NODES", "5000")
	t.Setenv("BENCH_SWEEP", "2000, 500,1000")
	t.Setenv("BENCH_CONFIGS", "L,C")
	var s Settings
	require.NoError(t, s.FromEnv())
	assert.Equal(t, 5000, s.Nodes)
	assert.Equal(t, []int{500, 1000, 2000}, s.Sweep)
	s.OutDir = "out"
	s, err := s.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "make bench BENCH_SWEEP=500,1000,2000 BENCH_CONFIGS=L,C", s.Command())

	t.Setenv("BENCH_CONFIGS", "X")
	require.NoError(t, s.FromEnv())
	_, err = s.withDefaults()
	assert.ErrorContains(t, err, `unknown configuration "X"`)

	t.Setenv("BENCH_REPS", "zero")
	assert.Error(t, s.FromEnv())
	t.Setenv("BENCH_REPS", "")

	var sweep Settings
	t.Setenv("BENCH_SWEEP", "1")
	t.Setenv("BENCH_CONFIGS", "")
	require.NoError(t, sweep.FromEnv())
	assert.Equal(t, DefaultSweep, sweep.Sweep)
	sweep.OutDir = "out"
	sweep, err = sweep.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 1, sweep.Reps, "one repetition per node count by default")
	assert.True(t, *sweep.Profile)
	assert.Equal(t, "make bench BENCH_SWEEP=1", sweep.Command())

	assert.Equal(t, "make bench-smoke", SmokeSettings("out").Command())
	assert.Equal(t, "make bench BENCH_NODES=5000", Settings{Nodes: 5000, Pods: DefaultPods, Reps: DefaultReps}.Command())
}

func TestSchedulerConfigs(t *testing.T) {
	root := filepath.Join("..", "..")
	dir := t.TempDir()
	for _, c := range Configurations {
		if c.schedulerConfig == nil {
			assert.True(t, c.Binder, "%s has a scheduler or a binder", c.Name)
			continue
		}
		path, err := c.schedulerConfig(root, dir)
		require.NoError(t, err)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		text := string(data)
		assert.Contains(t, text, "leaderElect: false", c.Name)
		assert.Contains(t, text, "schedulerName: tephra-scheduler", c.Name)
		assert.Contains(t, text, "qps: 1000", c.Name)
		tephra := c.Gangs == TephraGangs || c.Controllers
		assert.Equal(t, tephra, strings.Contains(text, "TephraGang"), c.Name)
		if c.Gangs == UpstreamGangs && tephra {
			// With the gate on, kube-scheduler adds its GangScheduling to Tephra's profile, to gang
			// upstream PodGroups in its pod-group cycles (docs/gang.md): the profile leaves it be.
			assert.NotContains(t, text, "GangScheduling", c.Name)
		}
	}
	// CU runs C's scheduler on B1's upstream PodGroups, with tephra-controllers beside it.
	b1, c, cu := configurationByName("B1"), configurationByName("C"), configurationByName("CU")
	require.NotNil(t, cu)
	assert.Equal(t, UpstreamGangs, cu.Gangs)
	assert.True(t, cu.Controllers)
	assert.Equal(t, b1.FeatureGates, cu.FeatureGates)
	assert.Equal(t, b1.RuntimeConfig, cu.RuntimeConfig)
	// B1's scheduler needs the gate; CU's runs as shipped, without it (docs/gang.md).
	assert.False(t, b1.SchedulerWithoutFeatureGates)
	assert.True(t, cu.SchedulerWithoutFeatureGates)
	// Upstream's baselines run with upstream's feature gates; Tephra's with its Deployment's.
	for _, name := range []string{"B0", "B1"} {
		assert.True(t, configurationByName(name).UpstreamFeatureGates, name)
	}
	assert.False(t, c.UpstreamFeatureGates)
	assert.False(t, cu.UpstreamFeatureGates)
	cPath, err := c.schedulerConfig(root, t.TempDir())
	require.NoError(t, err)
	cuPath, err := cu.schedulerConfig(root, t.TempDir())
	require.NoError(t, err)
	cText, _ := os.ReadFile(cPath)
	cuText, _ := os.ReadFile(cuPath)
	assert.Equal(t, string(cText), string(cuText), "CU's scheduler is configured as C's")
	// CG is CU with the gate on in the scheduler too.
	cg := configurationByName("CG")
	require.NotNil(t, cg)
	assert.Equal(t, cu.FeatureGates, cg.FeatureGates)
	assert.False(t, cg.SchedulerWithoutFeatureGates)
	for _, other := range Configurations {
		assert.Equal(t, other == cu || other == cg, other.Controllers, "only CU and CG run tephra-controllers: %s", other.Name)
	}
}

// T is G8's gangs in racks, run by the two configurations with topology-aware gangs only.
func TestTopologyScenarioIsG8InRacks(t *testing.T) {
	size := workloadSize{pods: 64, nodes: 100}
	g8, topo := newWorkload(scenarioByName("G8"), "ns", size), newWorkload(scenarioByName("T"), "ns", size)
	assert.Equal(t, g8.pods, topo.pods)
	assert.Equal(t, g8.gangs, topo.gangs)
	assert.True(t, topo.topology)
	assert.False(t, g8.topology)
	var runs []string
	for _, c := range Configurations {
		if c.runs(scenarioByName("T")) {
			runs = append(runs, c.Name)
		}
	}
	assert.Equal(t, []string{"B1", "C"}, runs)
	assert.Equal(t, "r002", benchNode(80).Labels[rackLabel], "racks of 40 nodes")
}
