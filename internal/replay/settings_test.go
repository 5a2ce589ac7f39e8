package replay

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/replay/report"
	"github.com/tephra-dev/tephra/internal/replay/trace"
)

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestQueuesFileGivesWeightsAndGuarantees(t *testing.T) {
	path := write(t, "queues.yaml", "queues:\n- name: team-a\n  weight: 3\n- name: team-b\n  guarantee: 16\n")
	queues, err := ReadQueues(path, []string{"team-c", "team-a", "team-b", "team-a"})
	require.NoError(t, err)
	assert.Equal(t, []report.Queue{
		{Name: "team-a", Weight: 3},
		{Name: "team-b", Weight: 1, Guarantee: 16},
		{Name: "team-c", Weight: 1},
	}, queues)

	defaults, err := ReadQueues("", []string{"x"})
	require.NoError(t, err)
	assert.Equal(t, []report.Queue{{Name: "x", Weight: 1}}, defaults, "without a file, every queue weighs 1")
}

func TestBadQueuesFileSaysWhat(t *testing.T) {
	for content, want := range map[string]string{
		"queues:\n- name: Team_A\n":             `name "Team_A": must be a lowercase DNS label`,
		"queues:\n- name: a\n  weight: 70000\n": `weight 70000: must be between 1 and 65535`,
		"queues:\n- name: a\n  guarantee: -1\n": `guarantee -1: must not be negative`,
		"queues:\n- name: a\n  wieght: 2\n":     `unknown field "wieght"`,
		"queues:\n- name: root\n":               `the root queue is Tephra's own`,
	} {
		_, err := ReadQueues(write(t, "queues.yaml", content), []string{"a"})
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want)
	}
}

func TestClusterFile(t *testing.T) {
	shape, err := ReadClusterShape(write(t, "cluster.yaml", "nodes: 16\ngpus: 4\nracks: 4\n"))
	require.NoError(t, err)
	assert.Equal(t, ClusterShape{Nodes: 16, CPU: "64", Memory: "512Gi", GPUs: 4, Racks: 4}, shape, "fields left out keep the defaults")
	assert.Equal(t, 64, shape.TotalGPUs())

	_, err = ReadClusterShape(write(t, "cluster.yaml", "nodes: 0\ncpu: lots\nracks: 3\n"))
	require.Error(t, err)
	for _, want := range []string{"nodes: 0: must be at least 1", `cpu: "lots"`, "racks: 3: must be between 0 and the number of nodes (0)"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestConfigurationsByName(t *testing.T) {
	configs, err := ConfigurationsByName("b0, C")
	require.NoError(t, err)
	require.Len(t, configs, 2)
	assert.Equal(t, "B0", configs[0].Name)
	assert.Equal(t, "C", configs[1].Name)
	_, err = ConfigurationsByName("C,B2")
	assert.EqualError(t, err, `configuration "B2": not one of C, Ch, Cb, Cm, Cr, Cn, Cw, Ct, Cf, Cs, Cl, Cq, Ck, Cio, Ciw, Cp, B0, B1, B1p, B1j`)
}

// With backfill, every Job states its duration played at the speedup (rounded up, a second more)
// as its runtime estimate, and only big gangs get an SLA waiting time, in played time.
func TestBackfillStatesEstimatesAndReservesForBigGangs(t *testing.T) {
	configs, err := ConfigurationsByName("Cb")
	require.NoError(t, err)
	w := &workloads{config: configs[0], speedup: 144}
	var gang, small batchv1alpha1.Job
	for _, j := range []struct {
		job   *batchv1alpha1.Job
		trace trace.Job
	}{{&gang, trace.Job{Duration: 7200, Replicas: 8, MinReplicas: 8, GPUs: 8}}, {&small, trace.Job{Duration: 60, Replicas: 1, MinReplicas: 1, GPUs: 1}}} {
		w.estimate(j.job, j.trace)
		w.backfill(j.job, j.trace)
	}
	assert.Equal(t, int32(51), *gang.Spec.RuntimeEstimateSeconds, "2 h at 144x is 50 s")
	assert.Equal(t, "4.2s", gang.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation], "10 min at 144x")
	assert.Equal(t, int32(2), *small.Spec.RuntimeEstimateSeconds, "1 min at 144x is under a second")
	assert.Empty(t, small.Annotations)
}

// Cs orders every queue shortest-estimate-first, its bound of 4 hours of trace time played at the
// speedup; the other configurations keep submission order.
func TestShortestFirstOrdersQueuesWithTheBoundAtTheSpeedup(t *testing.T) {
	configs, err := ConfigurationsByName("Cs,C")
	require.NoError(t, err)
	order := configs[0].orderOf(144)
	assert.Equal(t, schedulingv1alpha1.QueueOrderShortestEstimateFirst, order.order)
	assert.Equal(t, int32(100), *order.boundSeconds, "4 h at 144x")
	assert.Equal(t, queueOrder{}, configs[1].orderOf(144))
}

func TestResultsKeepNeverThroughJSON(t *testing.T) {
	nan := math.NaN()
	run := report.Run{Config: "C", GPUs: 8, End: 100, Jobs: []report.Job{{
		Name: "j", Submit: 1, Duration: 10, Replicas: 1, MinReplicas: 1, Started: []float64{2}, Ended: nan,
		Pods: []report.Pod{{Name: "p", Bound: 2, Running: nan, Ended: nan}, {Name: "q", Node: "n-3", Bound: 1, Running: 1, Ended: 2,
			Preempted: true, Eviction: &report.Eviction{At: 2, Why: `tephra-scheduler: making room in queue "a" for pod replay/x-0`}}},
	}}}
	path := filepath.Join(t.TempDir(), "runs.json")
	results := []Result{{Run: run, Wall: 90 * time.Second}}
	require.NoError(t, SaveResults(path, Saved{Command: "tephra-replay", Results: results}))
	assert.True(t, math.IsNaN(results[0].Run.Jobs[0].Ended), "the results saved are left as they were: the report is made from them next")
	saved, err := LoadResults(path)
	require.NoError(t, err)
	require.Len(t, saved.Results, 1)
	got := saved.Results[0]
	assert.Equal(t, 90*time.Second, got.Wall)
	assert.True(t, math.IsNaN(got.Run.Jobs[0].Ended))
	assert.True(t, math.IsNaN(got.Run.Jobs[0].Pods[0].Running))
	assert.Equal(t, 2.0, got.Run.Jobs[0].Pods[0].Bound)
	assert.Equal(t, []float64{2}, got.Run.Jobs[0].Started)
	assert.Equal(t, run.Jobs[0].Pods[1], got.Run.Jobs[0].Pods[1], "each pod's node, and its eviction: when, for whom and why")
}

func TestFidelityComparesTheSameJobs(t *testing.T) {
	job := func(name string, submit, started, ended float64) report.Job {
		return report.Job{Name: name, Submit: submit, Started: []float64{started}, Ended: ended}
	}
	reference := Result{Run: report.Run{Config: "C", Jobs: []report.Job{job("a", 0, 1, 101), job("b", 0, 1, 201), job("c", 0, 1, math.NaN())}}}
	compressed := Result{Run: report.Run{Config: "C", Jobs: []report.Job{job("a", 0, 5, 111), job("b", 0, 1, 201), job("c", 0, 1, 50)}}}
	f := CompareFidelity(reference, compressed, 1, 144)
	assert.Equal(t, 2, f.Jobs, "c did not finish in the reference")
	assert.InDelta(t, 5, f.JCTError.Mean, 1e-9, "a moved 10 s, b not at all")
	assert.InDelta(t, 2, f.WaitError.Mean, 1e-9)
	assert.InDelta(t, (10.0/101)/2, f.JCTRelative.Mean, 1e-9)
}

func TestDefaultHorizonIsTwiceTheEarliestEveryJobCouldHaveEnded(t *testing.T) {
	jobs := []trace.Job{{Submit: 0, Duration: 100, Replicas: 1, GPUs: 1}, {Submit: 50, Duration: 1000, Replicas: 2, GPUs: 4}, {Submit: 900, Duration: 10, Replicas: 1}}
	assert.InDelta(t, 2*1050, DefaultHorizon(jobs, 64), 1e-9, "the last job's end")
	assert.InDelta(t, 2*8100.0/2, DefaultHorizon(jobs, 2), 1e-9, "8100 GPU-seconds on 2 GPUs")
}

// B1p is B1 with upstream's scheduler configured to pack GPUs: a configuration kube-scheduler
// accepts, whose NodeResourcesFit scores MostAllocated with the GPU weighted 10.
func TestB1pPacksGPUsWithUpstreamsMostAllocated(t *testing.T) {
	configs, err := ConfigurationsByName("B1p")
	require.NoError(t, err)
	require.Equal(t, UpstreamGangs, configs[0].Gangs)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	o := &localcluster.Options{}
	require.NoError(t, configs[0].options(o, root, t.TempDir()))
	assert.Equal(t, "GenericWorkload=true", o.FeatureGates)
	assert.True(t, o.WithoutControllers)

	cfg, err := options.LoadConfigFromFile(klog.Background(), o.SchedulerConfig)
	require.NoError(t, err)
	require.NoError(t, validation.ValidateKubeSchedulerConfiguration(cfg))
	require.Len(t, cfg.Profiles, 1)
	found := false
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if args, ok := pc.Args.(*config.NodeResourcesFitArgs); ok {
			found = true
			assert.Equal(t, config.MostAllocated, args.ScoringStrategy.Type)
			assert.ElementsMatch(t, []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: string(localcluster.GPUResource), Weight: 10}}, args.ScoringStrategy.Resources)
		}
	}
	assert.True(t, found, "NodeResourcesFit's args")
}

// Cl orders every queue by least attained service, its bound and its first level (an
// accelerator-hour) played at the speedup.
func TestLeastAttainedOrdersQueuesWithTheBoundAndLevelsAtTheSpeedup(t *testing.T) {
	configs, err := ConfigurationsByName("Cl,C")
	require.NoError(t, err)
	order := configs[0].orderOf(144)
	assert.Equal(t, schedulingv1alpha1.QueueOrderLeastAttainedService, order.order)
	assert.Equal(t, int32(100), *order.boundSeconds, "4 h at 144x")
	var o localcluster.Options
	configs[0].playedPluginArgs(&o, 144)
	assert.Equal(t, int64(25), o.SchedulerPluginArgs["TephraGang"]["attainedServiceFirstLevelSeconds"], "an hour at 144x")
	o = localcluster.Options{}
	configs[1].playedPluginArgs(&o, 144)
	assert.NotContains(t, o.SchedulerPluginArgs, "TephraGang")
}

// Tephra's configurations play their reclaim patience limit, else the shipped one, at the
// speedup, beside the args their options set; the stock scheduler's have no TephraQueue.
func TestTephraConfigurationsPlayThePatienceLimitAtTheSpeedup(t *testing.T) {
	configs, err := ConfigurationsByName("C,Cr,B1,Ct")
	require.NoError(t, err)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	played := func(c *Configuration) map[string]map[string]any {
		o := &localcluster.Options{}
		require.NoError(t, c.options(o, root, t.TempDir()))
		c.playedPluginArgs(o, 144)
		return o.SchedulerPluginArgs
	}
	assert.Equal(t, map[string]map[string]any{"TephraQueue": {"reclaimPatienceLimit": "25s"}}, played(configs[0]), "an hour at 144x")
	assert.Equal(t, map[string]map[string]any{"TephraQueue": {"reclaimPatience": false, "reclaimLimitPerJob": 0, "reclaimPatienceLimit": "25s"}}, played(configs[1]))
	assert.NotContains(t, played(configs[2]), "TephraQueue")
	assert.Equal(t, map[string]map[string]any{"TephraQueue": {"reclaimPatienceLimit": "2.1s"}}, played(configs[3]), "5 minutes at 144x")
}

// Tephra's configurations play usage history's shipped week at the speedup, or their own
// half-life; the others run no tephra-controllers to set it for.
func TestTephraConfigurationsPlayTheUsageHalfLifeAtTheSpeedup(t *testing.T) {
	configs, err := ConfigurationsByName("C,Ch,Cp,B1")
	require.NoError(t, err)
	assert.Equal(t, "1h10m0s", configs[0].playedUsageHalfLife(144), "a week at 144x")
	assert.Equal(t, "2m30s", configs[1].playedUsageHalfLife(144), "6 hours at 144x")
	assert.Equal(t, "1h10m0s", configs[2].playedUsageHalfLife(144))
	assert.Empty(t, configs[3].playedUsageHalfLife(144))
}

// Cp caps each Queue at its weight's share of the cluster's GPUs, rounded down, or at its
// guarantee where that is larger, and takes every queue out of reclaim; C caps nothing.
func TestStaticPartitionCapsEachQueueAtItsWeightsShareOfTheGPUs(t *testing.T) {
	configs, err := ConfigurationsByName("Cp,C")
	require.NoError(t, err)
	partition, shared := configs[0], configs[1]
	gpus := ClusterShape{Nodes: 16, GPUs: 8}.TotalGPUs()
	queues := []report.Queue{{Name: "team-a", Weight: 1}, {Name: "team-b", Weight: 1}, {Name: "team-c", Weight: 2}}

	capabilities := func(specs map[string]schedulingv1alpha1.QueueSpec) map[string]string {
		out := map[string]string{}
		for name, spec := range specs {
			assert.Equal(t, schedulingv1alpha1.RootQueue, spec.Parent, name)
			if c, ok := spec.Capability[localcluster.GPUResource]; ok {
				out[name] = c.String()
			}
		}
		return out
	}
	specs := partition.queueSpecs(queues, gpus, 144)
	assert.Equal(t, map[string]string{"team-a": "32", "team-b": "32", "team-c": "64"}, capabilities(specs), "128 GPUs by weights 1, 1, 2")
	for name, spec := range specs {
		require.NotNil(t, spec.Reclaimable, name)
		assert.False(t, *spec.Reclaimable, name)
	}
	assert.Equal(t, int32(2), specs["team-c"].Weight, "the weights stay: they share what a slice leaves idle within it")

	queues[0].Guarantee = 40
	specs = partition.queueSpecs(queues, gpus, 144)
	assert.Equal(t, map[string]string{"team-a": "40", "team-b": "32", "team-c": "64"}, capabilities(specs), "a guarantee above the slice is the cap")
	assert.Equal(t, map[string]string{"team-a": "5", "team-b": "5", "team-c": "5"},
		capabilities(partition.queueSpecs([]report.Queue{{Name: "team-a", Weight: 1}, {Name: "team-b", Weight: 1}, {Name: "team-c", Weight: 1}}, 16, 144)),
		"16 GPUs in three: rounded down, so that the slices fit in the cluster")

	for name, spec := range shared.queueSpecs(queues, gpus, 144) {
		assert.Nil(t, spec.Capability, name)
		assert.Nil(t, spec.Reclaimable, name)
	}
}

// A job whose minimum needs more GPUs than its queue's slice can never run in Cp: the report
// says how many, queue by queue.
func TestJobsAboveTheirSliceAreReported(t *testing.T) {
	configs, err := ConfigurationsByName("Cp,C")
	require.NoError(t, err)
	queues := []report.Queue{{Name: "team-a", Weight: 1}, {Name: "team-b", Weight: 1}, {Name: "team-c", Weight: 1}}
	jobs := []trace.Job{
		{Name: "gang", Queue: "team-a", Replicas: 2, MinReplicas: 2, GPUs: 4},
		{Name: "big", Queue: "team-a", Replicas: 1, MinReplicas: 1, GPUs: 6},
		{Name: "elastic", Queue: "team-b", Replicas: 2, MinReplicas: 1, GPUs: 4},
		{Name: "small", Queue: "team-c", Replicas: 1, MinReplicas: 1, GPUs: 5},
	}
	assert.Equal(t, []string{"2 jobs of queue team-a need more GPUs at once (up to 8) than its capability of 5, and cannot run"},
		jobsAboveCapability(jobs, configs[0].queueSpecs(queues, 16, 144)), "an elastic job needs only its minimum, and a job of its slice fits")
	assert.Empty(t, jobsAboveCapability(jobs, configs[1].queueSpecs(queues, 16, 144)))
}

// B1j is B1 with the Job controller's gangs: WorkloadWithJob, which depends on GenericWorkload,
// in the components localcluster gives FeatureGates to, and scheduling.k8s.io/v1beta1 served.
func TestB1jTurnsOnTheJobControllersGangs(t *testing.T) {
	configs, err := ConfigurationsByName("B1j")
	require.NoError(t, err)
	require.Equal(t, BatchJobs, configs[0].Gangs)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	o := &localcluster.Options{}
	require.NoError(t, configs[0].options(o, root, t.TempDir()))
	assert.ElementsMatch(t, []string{"GenericWorkload=true", "WorkloadWithJob=true"}, strings.Split(o.FeatureGates, ","))
	assert.Equal(t, "scheduling.k8s.io/v1beta1=true", o.RuntimeConfig)
	assert.True(t, o.WithoutControllers, "upstream's Job controller, not Tephra's")
	assert.True(t, o.SchedulerWithUpstreamFeatureGates)
	assert.True(t, configs[0].upstreamPodGroups())
	assert.True(t, configs[0].jobControllerReplacesPods())
}
