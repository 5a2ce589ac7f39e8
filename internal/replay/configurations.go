package replay

import (
	"fmt"
	"strings"
	"time"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// GangAPI is how a configuration's jobs are written.
type GangAPI string

const (
	// TephraJobs: each job is a Tephra Job (batch.tephra.dev/v1alpha1) in its queue.
	TephraJobs GangAPI = "tephra"
	// NoGangs: each job is its bare pods.
	NoGangs GangAPI = "none"
	// UpstreamGangs: each job of a minimum above one is a scheduling.k8s.io/v1beta1 PodGroup
	// with a gang policy, and its pods name it in spec.schedulingGroup.
	UpstreamGangs GangAPI = "upstream"
	// BatchJobs: each job is a batch/v1 Job (Indexed when it has more than one pod) that
	// upstream's Job controller runs; a job of a minimum above one states a gang of its minimum
	// in spec.scheduling, and the Job controller (WorkloadWithJob) creates its
	// scheduling.k8s.io/v1beta1 Workload and PodGroup and names the PodGroup in its pods.
	BatchJobs GangAPI = "batch"
)

// Configuration is one way of scheduling the trace.
type Configuration struct {
	// Name is the short name of tables: C, B0, B1.
	Name string
	// Title says what it is.
	Title string
	// Gangs is how its jobs are written.
	Gangs GangAPI
	// Queues says that it has Tephra Queues, one per trace queue.
	Queues bool
	// Partition makes the Queues a static partition of the cluster's GPUs: each capped at its
	// weight's share of them (or its guarantee, if larger) and not reclaimable (queues.go).
	Partition bool
	// UsageHalfLife, in trace time, runs Tephra with usage history of that half-life (played at
	// the speedup, docs/queues.md "Fair share over time"); 0 plays the shipped one, a week of
	// trace time (playedUsageHalfLife).
	UsageHalfLife time.Duration
	// Backfill gives every Tephra Job a runtime estimate (its trace duration) and the big gangs an
	// SLA waiting time, so that they reserve nodes and short jobs backfill them (docs/elastic.md).
	Backfill bool
	// ReclaimMinRuntime, in trace time, runs TephraQueue with that reclaimMinRuntime (played at the
	// speedup): no job younger is reclaimed (docs/queues.md); 0 keeps the shipped one.
	ReclaimMinRuntime time.Duration
	// ReclaimPatienceLimit, in trace time, runs TephraQueue with that reclaimPatienceLimit (played
	// at the speedup): how long a pod below its queue's share waits before patience spares none
	// of its victims (docs/queues.md); 0 keeps the shipped one.
	ReclaimPatienceLimit time.Duration
	// ShortestFirstBound, in trace time, gives every Tephra Job its runtime estimate (its trace
	// duration) and orders each Queue ShortestEstimateFirst with that bound (played at the
	// speedup, docs/queues.md "Order within a queue"); 0 keeps submission order.
	ShortestFirstBound time.Duration
	// LeastAttainedBound, in trace time, orders each Queue LeastAttainedService with that bound,
	// and TephraGang's first level of attained service at an accelerator-hour of trace time (both
	// played at the speedup, docs/queues.md "Order within a queue"); 0 keeps submission order.
	LeastAttainedBound time.Duration
	// QueueHeadReservations (with Backfill) runs TephraGang with queueHeadReservations, in place of
	// the big gangs' SLA: the gang at the head of each queue reserves nodes while it cannot fit.
	QueueHeadReservations bool
	// DataLocality makes the pods of a job that reads a dataset declare it
	// (data.tephra.dev/datasets), for TephraIO to place them where it is cached (docs/io.md).
	DataLocality bool
	// LocalityWait, in trace time, runs TephraIO with that localityWait (played at the speedup):
	// how long a pod that prefers its data waits for a node that caches it; 0 keeps the shipped
	// one.
	LocalityWait time.Duration
	// options shapes its control plane; dir is the control plane's directory.
	options func(o *localcluster.Options, root, dir string) error
}

// jobControllerReplacesPods says that a job controller of the configuration, Tephra's or
// upstream's, creates a pod again when one is deleted before its job is done; where none does
// (bare pods), the replay's driver stands in for one.
func (c *Configuration) jobControllerReplacesPods() bool {
	return c.Gangs == TephraJobs || c.Gangs == BatchJobs
}

// upstreamPodGroups says that the configuration's gangs are scheduling.k8s.io/v1beta1 PodGroups,
// which the apiserver must serve.
func (c *Configuration) upstreamPodGroups() bool {
	return c.Gangs == UpstreamGangs || c.Gangs == BatchJobs
}

// Configurations are those a replay may compare, in the report's order.
var Configurations = []*Configuration{
	{
		Name:   "C",
		Title:  "Tephra as installed (manifests/): Tephra Jobs in the trace's Queues, gangs, fair share, reclaim",
		Gangs:  TephraJobs,
		Queues: true,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:          "Ch",
		Title:         fmt.Sprintf("C with a shorter usage history: a half-life of %v of trace time, where C plays the shipped week", historyHalfLife),
		Gangs:         TephraJobs,
		Queues:        true,
		UsageHalfLife: historyHalfLife,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name: "Cb",
		Title: fmt.Sprintf("C with backfill: every Job states its runtime estimate (its duration), and gangs of %d GPUs or more reserve nodes once they have waited %v of trace time",
			backfillGangGPUs, backfillSLA),
		Gangs:    TephraJobs,
		Queues:   true,
		Backfill: true,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:              "Cm",
		Title:             fmt.Sprintf("C with a reclaim minimum runtime of %v of trace time: no job younger is reclaimed", reclaimMinRuntime),
		Gangs:             TephraJobs,
		Queues:            true,
		ReclaimMinRuntime: reclaimMinRuntime,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:   "Cr",
		Title:  "C with reclaim at once, as Tephra shipped before patience: no reclaim patience and no limit of restarts per job (TephraQueue's reclaimPatience false, reclaimLimitPerJob 0)",
		Gangs:  TephraJobs,
		Queues: true,
		options: func(o *localcluster.Options, _, _ string) error {
			o.SchedulerPluginArgs = map[string]map[string]any{"TephraQueue": {"reclaimPatience": false, "reclaimLimitPerJob": 0}}
			return nil
		},
	},
	{
		Name:   "Cn",
		Title:  "C not draining for reclaim: a pod that patience keeps from reclaiming holds no node, and what ends on its victims' node goes to others (TephraQueue's reclaimDrain false)",
		Gangs:  TephraJobs,
		Queues: true,
		options: func(o *localcluster.Options, _, _ string) error {
			o.SchedulerPluginArgs = map[string]map[string]any{"TephraQueue": {"reclaimDrain": false}}
			return nil
		},
	},
	{
		Name:   "Cw",
		Title:  "C with patience counting a victim's whole run since its last start, what the reclaim throws away, not its run before the wait (TephraQueue's reclaimPatienceCounts WholeRun)",
		Gangs:  TephraJobs,
		Queues: true,
		options: func(o *localcluster.Options, _, _ string) error {
			o.SchedulerPluginArgs = map[string]map[string]any{"TephraQueue": {"reclaimPatienceCounts": "WholeRun"}}
			return nil
		},
	},
	{
		Name:                 "Ct",
		Title:                fmt.Sprintf("C with a tighter reclaim patience limit, %v of trace time: a pod below its queue's share waits that long before patience spares none of its victims (TephraQueue's reclaimPatienceLimit)", tightPatienceLimit),
		Gangs:                TephraJobs,
		Queues:               true,
		ReclaimPatienceLimit: tightPatienceLimit,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:   "Cf",
		Title:  "C with fragmentation-aware placement: TephraPlacement's scoringStrategy Fragmentation (the recent mix of pod shapes, FGD's measure)",
		Gangs:  TephraJobs,
		Queues: true,
		options: func(o *localcluster.Options, _, _ string) error {
			o.SchedulerPluginArgs = map[string]map[string]any{"TephraPlacement": {"scoringStrategy": "Fragmentation"}}
			return nil
		},
	},
	{
		Name:               "Cs",
		Title:              fmt.Sprintf("C with shortest-estimate-first order: every Job states its runtime estimate (its duration), and each queue runs the shortest first, passing none over by work submitted %v of trace time later", shortestFirstBound),
		Gangs:              TephraJobs,
		Queues:             true,
		ShortestFirstBound: shortestFirstBound,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:               "Cl",
		Title:              fmt.Sprintf("C with least-attained-service order: each queue runs first the work that has run fewest GPU-hours, in levels at 1, 10 and 100 GPU-hours of trace time, passing none over by work submitted %v of trace time later", leastAttainedBound),
		Gangs:              TephraJobs,
		Queues:             true,
		LeastAttainedBound: leastAttainedBound,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:                  "Cq",
		Title:                 "C with backfill at the head of each queue: every Job states its runtime estimate (its duration), and the gang at the head of each queue reserves nodes while it cannot fit (TephraGang's queueHeadReservations)",
		Gangs:                 TephraJobs,
		Queues:                true,
		Backfill:              true,
		QueueHeadReservations: true,
		options: func(o *localcluster.Options, _, _ string) error {
			o.SchedulerPluginArgs = map[string]map[string]any{"TephraGang": {"queueHeadReservations": true}}
			return nil
		},
	},
	{
		Name:                  "Ck",
		Title:                 "C keeping room for the head of each queue, without estimates: the gang at the head of each queue reserves nodes while it cannot fit (TephraGang's queueHeadReservations), and no Job states a runtime estimate, so nothing backfills them",
		Gangs:                 TephraJobs,
		Queues:                true,
		QueueHeadReservations: true,
		options: func(o *localcluster.Options, _, _ string) error {
			o.SchedulerPluginArgs = map[string]map[string]any{"TephraGang": {"queueHeadReservations": true}}
			return nil
		},
	},
	{
		Name:         "Cio",
		Title:        "C with data locality: the pods of a job that reads a dataset declare it (data.tephra.dev/datasets), and TephraIO places them where the nodes cache it",
		Gangs:        TephraJobs,
		Queues:       true,
		DataLocality: true,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:         "Ciw",
		Title:        "Cio with a locality wait of 5 minutes: a pod whose data is cached only on full nodes waits that long for one before it runs elsewhere",
		Gangs:        TephraJobs,
		Queues:       true,
		DataLocality: true,
		LocalityWait: 5 * time.Minute,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:      "Cp",
		Title:     "C as a static partition: each Queue capped at its weight's share of the cluster's GPUs (or its guarantee, if larger) and not reclaimable, so that no queue borrows and none is reclaimed from",
		Gangs:     TephraJobs,
		Queues:    true,
		Partition: true,
		options: func(o *localcluster.Options, _, _ string) error {
			return nil
		},
	},
	{
		Name:    "B0",
		Title:   "the stock scheduler: upstream's default profile, each job its bare pods, no queue",
		Gangs:   NoGangs,
		options: stockScheduler,
	},
	{
		Name:  "B1",
		Title: "upstream's gang scheduling: B0 with GenericWorkload, each gang a scheduling.k8s.io/v1beta1 PodGroup",
		Gangs: UpstreamGangs,
		options: func(o *localcluster.Options, root, dir string) error {
			o.FeatureGates = "GenericWorkload=true"
			o.RuntimeConfig = "scheduling.k8s.io/v1beta1=true"
			return stockScheduler(o, root, dir)
		},
	},
	{
		Name: "B1p",
		Title: fmt.Sprintf("B1 with the packing an admin would configure: NodeResourcesFit MostAllocated, %s weighted %d against CPU and memory 1",
			localcluster.GPUResource, packingGPUWeight),
		Gangs: UpstreamGangs,
		options: func(o *localcluster.Options, root, dir string) (err error) {
			o.FeatureGates = "GenericWorkload=true"
			o.RuntimeConfig = "scheduling.k8s.io/v1beta1=true"
			if err := stockScheduler(o, root, dir); err != nil {
				return err
			}
			o.SchedulerConfig, err = localcluster.WriteUpstreamPackingSchedulerConfig(root, dir, packingGPUWeight)
			return err
		},
	},
	{
		Name:  "B1j",
		Title: "B1 through upstream's Job controller: each job a batch/v1 Job, gangs Indexed with a gang policy in spec.scheduling, whose Workload and PodGroup the Job controller creates (WorkloadWithJob)",
		Gangs: BatchJobs,
		options: func(o *localcluster.Options, root, dir string) error {
			// WorkloadWithJob (KEP-5547, alpha since 1.36) depends on GenericWorkload. The
			// apiserver needs it to keep a Job's spec.scheduling (it drops the field without),
			// kube-controller-manager for the Job controller to create the Workload and PodGroup;
			// localcluster gives FeatureGates to both, and to the scheduler.
			o.FeatureGates = "GenericWorkload=true,WorkloadWithJob=true"
			o.RuntimeConfig = "scheduling.k8s.io/v1beta1=true"
			return stockScheduler(o, root, dir)
		},
	},
}

// packingGPUWeight is B1p's weight of the GPU in NodeResourcesFit's MostAllocated: enough that
// GPUs, not CPU and memory, decide where a GPU pod packs.
const packingGPUWeight = 10

// stockScheduler runs upstream's default profile with upstream's feature gates, and no Tephra
// controller.
func stockScheduler(o *localcluster.Options, root, dir string) (err error) {
	o.WithoutControllers = true
	o.SchedulerWithUpstreamFeatureGates = true
	o.SchedulerConfig, err = localcluster.WriteUpstreamSchedulerConfig(root, dir)
	return err
}

// Backfill's settings, in trace time: the gangs that reserve nodes, and after how long; and the
// half-life of Ch's usage history.
const (
	backfillGangGPUs = 32
	backfillSLA      = 10 * time.Minute
	historyHalfLife  = 6 * time.Hour
	// reclaimMinRuntime is Cm's: half an hour, about a typical short job's whole run.
	reclaimMinRuntime = 30 * time.Minute
	// tightPatienceLimit is Ct's: minutes, close to KAI's and Kueue's reclaim, which takes room at
	// once.
	tightPatienceLimit = 5 * time.Minute
	// shortestFirstBound is Cs's: a few hours, long for most jobs of a day, short for a day.
	shortestFirstBound = 4 * time.Hour
	// leastAttainedBound is Cl's, as Cs's.
	leastAttainedBound = 4 * time.Hour
)

func configurationNames() string {
	names := make([]string, len(Configurations))
	for i, c := range Configurations {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// ConfigurationsByName returns the configurations named in a comma-separated list, in the list's
// order, or says which names it does not know.
func ConfigurationsByName(list string) ([]*Configuration, error) {
	var out []*Configuration
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		var found *Configuration
		for _, c := range Configurations {
			if strings.EqualFold(c.Name, name) {
				found = c
			}
		}
		if found == nil {
			return nil, fmt.Errorf("configuration %q: not one of %s", name, configurationNames())
		}
		out = append(out, found)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no configuration named in %q", list)
	}
	return out, nil
}
