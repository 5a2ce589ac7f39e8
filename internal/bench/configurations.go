package bench

import (
	"path/filepath"
	"slices"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// GangAPI is how a configuration's workloads express gangs.
type GangAPI string

const (
	// NoGangs: pods carry no gang; the scheduler places them one by one.
	NoGangs GangAPI = "none"
	// TephraGangs: scheduling.tephra.dev/v1alpha1 PodGroups and the pods' pod-group label.
	TephraGangs GangAPI = "tephra"
	// UpstreamGangs: scheduling.k8s.io/v1beta1 PodGroups with a gang policy and the pods'
	// spec.schedulingGroup.podGroupName.
	UpstreamGangs GangAPI = "upstream"
)

// Configuration is one way of scheduling the same workloads on the same cluster.
type Configuration struct {
	// Name is the short name used in tables: L, B0, B1, C, CU, CG.
	Name string `json:"name"`
	// Title says what it is.
	Title string `json:"title"`
	// Gangs is how its workloads express gangs.
	Gangs GangAPI `json:"gangs"`
	// Binder is set for L: no scheduler runs; the benchmark's binder binds the pods.
	Binder bool `json:"binder,omitempty"`
	// Controllers is set for CU: tephra-controllers runs beside the scheduler, counts the
	// upstream PodGroups in the queues and writes their status. Its CPU is measured apart from
	// the scheduler's.
	Controllers bool `json:"controllers,omitempty"`
	// GangsOnly is set for CU: it runs only the scenarios with gangs (G8, G64, GI). Elsewhere its
	// pods, without gangs, are C's, and it would measure C again.
	GangsOnly bool `json:"gangsOnly,omitempty"`
	// FeatureGates and RuntimeConfig for the apiserver and the scheduler.
	FeatureGates  string `json:"featureGates,omitempty"`
	RuntimeConfig string `json:"runtimeConfig,omitempty"`
	// SchedulerWithoutFeatureGates runs the scheduler without FeatureGates, as Tephra ships it
	// (docs/gang.md): with GenericWorkload on, kube-scheduler would schedule upstream PodGroups'
	// pods in pod-group cycles of its own, beside TephraGang.
	SchedulerWithoutFeatureGates bool `json:"schedulerWithoutFeatureGates,omitempty"`
	// UpstreamFeatureGates runs the scheduler without the feature gates of Tephra's Deployment
	// (NominatedNodeNameForExpectation=false): upstream's scheduler as upstream ships it.
	UpstreamFeatureGates bool `json:"upstreamFeatureGates,omitempty"`

	// schedulerConfig writes the scheduler's KubeSchedulerConfiguration under dir and returns
	// its path; nil for L.
	schedulerConfig func(root, dir string) (string, error)
}

// Configurations are the configurations of a run, in the order they are interleaved.
var Configurations = []*Configuration{
	{
		Name:   "L",
		Title:  "limit: no scheduler; a client binds the pending pods round-robin (pods/binding, same QPS)",
		Gangs:  NoGangs,
		Binder: true,
	},
	{
		Name:                 "B0",
		Title:                "vanilla: tephra-scheduler with upstream's default profile, no Tephra plugin",
		Gangs:                NoGangs,
		UpstreamFeatureGates: true,
		schedulerConfig:      vanillaSchedulerConfig,
	},
	{
		Name:                 "B1",
		Title:                "upstream gangs: B0 with GenericWorkload (and TopologyAwareWorkloadScheduling, for T), gangs as scheduling.k8s.io/v1beta1 PodGroups",
		Gangs:                UpstreamGangs,
		FeatureGates:         "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		RuntimeConfig:        "scheduling.k8s.io/v1beta1=true",
		UpstreamFeatureGates: true,
		schedulerConfig:      vanillaSchedulerConfig,
	},
	{
		Name:            "C",
		Title:           "Tephra: the shipped manifests/scheduler/config.yaml, gangs as Tephra PodGroups",
		Gangs:           TephraGangs,
		schedulerConfig: tephraSchedulerConfig,
	},
	{
		Name: "CU",
		Title: "Tephra with upstream gangs: C's scheduler configuration, gangs as scheduling.k8s.io/v1beta1 PodGroups " +
			"(as B1's), which both Tephra binaries read in memory",
		Gangs:         UpstreamGangs,
		Controllers:   true,
		GangsOnly:     true,
		FeatureGates:  "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		RuntimeConfig: "scheduling.k8s.io/v1beta1=true",
		// As shipped: only the apiserver needs the gate (docs/gang.md).
		SchedulerWithoutFeatureGates: true,
		schedulerConfig:              tephraSchedulerConfig,
	},
	{
		Name: "CG",
		Title: "Tephra with the GenericWorkload gate on in the scheduler too: CU, whose upstream PodGroups kube-scheduler then " +
			"schedules in its own pod-group cycles (docs/gang.md)",
		Gangs:           UpstreamGangs,
		Controllers:     true,
		GangsOnly:       true,
		FeatureGates:    "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		RuntimeConfig:   "scheduling.k8s.io/v1beta1=true",
		schedulerConfig: tephraSchedulerConfig,
	},
}

// runs says whether a configuration runs a scenario.
func (c *Configuration) runs(sc *Scenario) bool {
	if len(sc.Only) > 0 && !slices.Contains(sc.Only, c.Name) {
		return false
	}
	return !c.GangsOnly || sc.GangSize > 0 || sc.Blockers
}

func configurationByName(name string) *Configuration {
	for _, c := range Configurations {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func configurationNames() []string {
	names := make([]string, len(Configurations))
	for i, c := range Configurations {
		names[i] = c.Name
	}
	return names
}

// apiServerArgs take the apiserver's own limits out of the way: no priority and fairness, no cap
// on requests in flight. Etcd already runs without fsync (internal/localcluster). Several workers
// delete a collection, which is how a smoke run empties a namespace between scenarios.
var apiServerArgs = []string{
	"--enable-priority-and-fairness=false",
	"--max-requests-inflight=0",
	"--max-mutating-requests-inflight=0",
	"--delete-collection-workers=4",
}

// schedulerVerbosity keeps the schedulers' logs (in the cluster's logs/) small: --v=2 would log
// every bind.
const schedulerVerbosity = 1

// shippedSchedulerConfig reads manifests/scheduler/config.yaml.
func shippedSchedulerConfig(root string) (map[string]any, error) {
	return localcluster.ShippedSchedulerConfig(root)
}

// clientLimits are the shipped configuration's clientConnection qps and burst, which every
// configuration uses, the binder of L included.
func clientLimits(root string) (qps float32, burst int, err error) {
	return localcluster.SchedulerClientLimits(root)
}

// tephraSchedulerConfig is the shipped configuration as it is, but for leader election: a
// benchmark cluster runs one scheduler, and lease renewals would only add to the apiserver's
// mutating requests.
func tephraSchedulerConfig(root, dir string) (string, error) {
	config, err := shippedSchedulerConfig(root)
	if err != nil {
		return "", err
	}
	config["leaderElection"] = map[string]any{"leaderElect": false}
	return writeYAML(filepath.Join(dir, "scheduler-tephra.yaml"), config)
}

// vanillaSchedulerConfig has upstream's default profile under Tephra's scheduler name, with the
// shipped configuration's client limits.
func vanillaSchedulerConfig(root, dir string) (string, error) {
	return localcluster.WriteUpstreamSchedulerConfig(root, dir)
}

func writeYAML(path string, v any) (string, error) {
	return localcluster.WriteYAML(path, v)
}
