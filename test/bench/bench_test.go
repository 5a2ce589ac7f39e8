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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/localcluster"
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

func TestProcParsing(t *testing.T) {
	stat := "4242 (tephra sched) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	cpu, err := parseCPUSeconds(stat)
	require.NoError(t, err)
	assert.InDelta(t, 3.0, cpu, 1e-9, "utime 250 + stime 50 ticks")

	rss, err := parsePeakRSS("Name:\ttephra-scheduler\nVmPeak:\t 900000 kB\nVmHWM:\t  102400 kB\nVmRSS:\t 90000 kB\n")
	require.NoError(t, err)
	assert.Equal(t, int64(100<<20), rss)

	stats, err := readProcStats(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, stats.PeakRSSBytes)
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
	p := newWorkload(scenarioByName("P"), "ns", 300, 100)
	assert.Len(t, p.pods, 300)
	assert.Empty(t, p.gangs)
	assert.Equal(t, 300, p.measured())

	g64 := newWorkload(scenarioByName("G64"), "ns", 300, 100)
	assert.Len(t, g64.gangs, 4)
	assert.Len(t, g64.pods, 256)
	assert.Equal(t, 64, g64.gangs[0].minMember)

	gi := newWorkload(scenarioByName("GI"), "ns", 300, 100)
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

func nodeShapeCPU(t *testing.T) int64 {
	t.Helper()
	node := localcluster.SimulatedNode("n", nodeShape)
	return node.Status.Allocatable.Cpu().MilliValue()
}

func TestPodsPerGangAPI(t *testing.T) {
	w := newWorkload(scenarioByName("G8"), "ns", 64, 10)
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
	r := &recorder{pods: map[string]*podRecord{}, gangs: map[string]*gangRecord{}, changed: make(chan struct{}, 1), toBind: w.measured()}
	for _, g := range w.gangs {
		r.gangs[g.name] = &gangRecord{minMember: g.minMember, blocker: g.blocker}
	}
	for _, p := range w.pods {
		r.pods[p.name] = &podRecord{gang: p.gang, blocker: p.blocker}
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	for _, p := range w.pods {
		r.observe(pod(p.name, ""))
	}
	r.observe(pod("unknown", "n"))
	seen, bound, toBind := r.counts()
	assert.Equal(t, []int{6, 0, 4}, []int{seen, bound, toBind})

	r.observe(pod("a-0", "n"))
	r.observe(pod("a-1", "n"))
	r.observe(pod("never-0", "n"))
	r.observe(pod("a-1", "n")) // seen again: counted once
	assert.Equal(t, 3, r.partial)
	r.observe(pod("a-2", "n"))
	r.observe(pod("plain", "n"))
	assert.Equal(t, 1, r.partial, "the whole gang leaves the count; the blocker stays")

	o := r.observation()
	assert.Equal(t, 3, o.peakPartial)
	assert.Equal(t, 5, o.bound)
	assert.Len(t, o.binds, 4, "blockers are not measured")
	assert.Len(t, o.latencies, 4)
	assert.Equal(t, []int{1, 1, 0}, []int{o.gangs, o.gangsWhole, o.blockersWhole})
	_, _, toBind = r.counts()
	assert.Zero(t, toBind)
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
		assert.Equal(t, c.Gangs == TephraGangs, strings.Contains(text, "TephraGang"), c.Name)
	}
}

// syntheticResults are results of a run with every figure set, for the report's tests.
func syntheticResults() *Results {
	res := &Results{Kind: "matrix", Command: "make bench", Nodes: 100, Pods: 300, Reps: 2, Machine: thisMachine(), Kubernetes: "v1.37.1", Tephra: "dev"}
	for _, c := range Configurations {
		status := ConfigurationStatus{Configuration: *c}
		if c.Name == "B1" {
			status.Unavailable = "no upstream gangs here"
		}
		res.Configurations = append(res.Configurations, status)
	}
	res.Scenarios = Scenarios
	speed := map[string]float64{"L": 400, "B0": 200, "C": 100}
	for rep := 1; rep <= 2; rep++ {
		for _, c := range []string{"L", "B0", "C"} {
			for _, sc := range []string{"P", "G8", "G64", "GI"} {
				r := RunResult{Configuration: c, Scenario: sc, Rep: rep, Nodes: 100, Pods: 300, Bound: 300, BoundAll: 300,
					Throughput:     Throughput{Average: speed[c] * float64(rep), P50: speed[c], P99: 2 * speed[c]},
					LatencySeconds: &Quantiles{P50: 1, P99: 2}, MutatingRequestsPerPod: 2}
				if c != "L" {
					r.SchedulerCPUSecondsPer1000Pods, r.SchedulerPeakRSSMiB = ptr.To(1.5), ptr.To(80.0)
				}
				if sc == "G8" {
					r.Gangs, r.GangsWhole, r.GangWholeSeconds = 37, 37, &Quantiles{P50: 0.5, P99: 0.9}
				}
				res.Runs = append(res.Runs, r)
			}
		}
	}
	return res
}

func TestReport(t *testing.T) {
	res := syntheticResults()
	assert.Empty(t, res.Failures())
	assert.Equal(t, []string{"B1 unavailable: no upstream gangs here"}, res.Unavailable())

	header, rows := scenarioTable(res, scenarioByName("P"), 100)
	require.Len(t, rows, 4)
	assert.Len(t, rows[0], len(header))
	c := rows[3]
	assert.Equal(t, "C", c[0])
	assert.Equal(t, "150 (100–200)", c[1], "median of the repetitions and their range")
	assert.Equal(t, "0.50×", c[4], "against B0")
	assert.Equal(t, "0.25×", c[5], "against L")
	assert.Equal(t, "1.50", c[11])
	assert.Equal(t, "–", rows[0][11], "L has no scheduler")
	assert.Contains(t, rows[2][1], "unavailable")

	md := Markdown(res, nil, "benchmarks")
	for _, want := range []string{"## Machine", "make bench", "### G64", "### Q", "queues are not built yet", "benchmarks/throughput.svg", "B1 unavailable"} {
		assert.Contains(t, md, want)
	}

	// A failed run shows in the table and in Failures.
	res.Runs[0].Error = "scheduler exited"
	assert.Len(t, res.Failures(), 1)

	dir := t.TempDir()
	require.NoError(t, res.writeOutputs(dir, "."))
	for _, name := range []string{"results.json", "throughput.svg", "benchmarks.md"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	back, err := ReadResults(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	assert.Equal(t, len(res.Runs), len(back.Runs))
}

func TestPublishKeepsTheOtherKind(t *testing.T) {
	docs := t.TempDir()
	matrix := syntheticResults()
	require.NoError(t, matrix.Publish(docs))

	sweep := syntheticResults()
	sweep.Kind, sweep.Nodes, sweep.Sweep = "sweep", 0, []int{100}
	require.NoError(t, sweep.Publish(docs))

	md, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "### GI", "the matrix results stay")
	assert.Contains(t, string(md), "## Cost curve")
	for _, name := range []string{"results.json", "sweep.json", "throughput.svg", "sweep.svg"} {
		assert.FileExists(t, filepath.Join(docs, "benchmarks", name))
	}
}
