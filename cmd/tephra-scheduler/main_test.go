package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"

	"github.com/tephra-dev/tephra/plugins/backpressure"
	"github.com/tephra-dev/tephra/plugins/gang"
	"github.com/tephra-dev/tephra/plugins/numa"
	"github.com/tephra-dev/tephra/plugins/placement"
	"github.com/tephra-dev/tephra/plugins/queue"
	"github.com/tephra-dev/tephra/plugins/registry"
)

// TestShippedSchedulerConfigs loads every shipped KubeSchedulerConfiguration as
// kube-scheduler does and checks that it is valid, raises the client's QPS, and names only
// plugins this binary has, with args they accept.
func TestShippedSchedulerConfigs(t *testing.T) {
	files := []string{"../../manifests/scheduler/config.yaml", "../../manifests/overlays/replace-default/config-replace-default.yaml"}
	known := map[string]bool{}
	for name := range registry.Plugins() {
		known[name] = true
	}
	for name := range plugins.NewInTreeRegistry() {
		known[name] = true
	}
	wantProfiles := map[string][]string{"config.yaml": {"tephra-scheduler"}, "config-replace-default.yaml": {"default-scheduler", "tephra-scheduler"}}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cfg, err := options.LoadConfigFromFile(klog.Background(), file)
			require.NoError(t, err)
			require.NoError(t, validation.ValidateKubeSchedulerConfiguration(cfg))
			assert.GreaterOrEqual(t, cfg.ClientConnection.QPS, float32(500), "the client default of 50 QPS would cap binds at about 50/s")
			assert.True(t, cfg.LeaderElection.LeaderElect)
			var names []string
			for _, profile := range cfg.Profiles {
				names = append(names, profile.SchedulerName)
			}
			assert.Equal(t, wantProfiles[filepath.Base(file)], names)
			for _, profile := range cfg.Profiles {
				checkTephraProfile(t, profile, known)
			}
		})
	}
}

// checkTephraProfile checks that a profile runs every Tephra plugin as the shipped configs intend.
func checkTephraProfile(t *testing.T, profile config.KubeSchedulerProfile, known map[string]bool) {
	t.Run(profile.SchedulerName, func(t *testing.T) {
		for _, set := range []config.PluginSet{profile.Plugins.QueueSort, profile.Plugins.PreEnqueue, profile.Plugins.PreFilter,
			profile.Plugins.Filter, profile.Plugins.PostFilter, profile.Plugins.PreScore, profile.Plugins.Score,
			profile.Plugins.Reserve, profile.Plugins.Permit, profile.Plugins.PostBind} {
			for _, p := range set.Enabled {
				assert.True(t, known[p.Name], "plugin %s is registered", p.Name)
			}
		}
		assert.Equal(t, []config.Plugin{{Name: gang.Name}}, profile.Plugins.QueueSort.Enabled)
		// TephraBackpressure waits before any other plugin works on the pod, and counts every
		// reserved pod until it is seen bound or is unreserved.
		require.NotEmpty(t, profile.Plugins.PreFilter.Enabled)
		assert.Equal(t, config.Plugin{Name: backpressure.Name}, profile.Plugins.PreFilter.Enabled[0], "the wait for binds comes first")
		assert.Contains(t, profile.Plugins.Reserve.Enabled, config.Plugin{Name: backpressure.Name})
		parsedBackpressure := false
		for _, pc := range profile.PluginConfig {
			if pc.Name == backpressure.Name {
				args, err := backpressure.ParseArgs(pc.Args)
				require.NoError(t, err)
				assert.Equal(t, backpressure.DefaultMaxBindsInFlight, args.MaxBindsInFlight)
				parsedBackpressure = true
			}
		}
		assert.True(t, parsedBackpressure, "the profile configures %s", backpressure.Name)
		var postFilter []string
		for _, p := range profile.Plugins.PostFilter.Enabled {
			postFilter = append(postFilter, p.Name)
		}
		assert.Equal(t, []string{queue.Name, gang.Name}, postFilter, "queue-aware reclaim replaces DefaultPreemption; then the gang plugin releases gangs that cannot complete")
		assert.Equal(t, []config.Plugin{{Name: queue.Name}, {Name: gang.Name}}, profile.Plugins.PodGroupPostFilter.Enabled, "the same for upstream PodGroups in pod-group cycles")
		assert.Equal(t, []config.Plugin{{Name: gang.Name}}, profile.Plugins.PlacementGenerate.Enabled, "TephraGang's topology choice for upstream PodGroups")
		assert.Contains(t, profile.Plugins.PlacementGenerate.Disabled, config.Plugin{Name: "TopologyPlacementGenerator"}, "only one generator is allowed")
		parsed := false
		for _, pc := range profile.PluginConfig {
			if pc.Name == gang.Name {
				args, err := gang.ParseArgs(pc.Args)
				require.NoError(t, err)
				assert.Equal(t, int64(60), *args.DefaultScheduleTimeoutSeconds)
				assert.True(t, *args.Consolidation.Enabled, "consolidation for waiting gangs, which moves only pods that may move, ships on")
				assert.Equal(t, int32(8), *args.Consolidation.MaxMovesPerGang)
				parsed = true
			}
		}
		assert.True(t, parsed, "the profile configures %s", gang.Name)
		parsed = false
		for _, pc := range profile.PluginConfig {
			if pc.Name == queue.Name {
				_, err := queue.ParseArgs(pc.Args)
				require.NoError(t, err)
				raw, err := json.Marshal(pc.Args)
				require.NoError(t, err)
				assert.NotContains(t, string(raw), "usageHalfLife", "the half-life is set once, by tephra-controllers' --usage-half-life")
				parsed = true
			}
		}
		assert.True(t, parsed, "the profile configures %s", queue.Name)
		assert.Contains(t, profile.Plugins.Score.Enabled, config.Plugin{Name: placement.Name, Weight: 5}, "accelerator packing outweighs upstream's LeastAllocated and BalancedAllocation")
		assert.Contains(t, profile.Plugins.PreScore.Enabled, config.Plugin{Name: placement.Name})
		parsed = false
		for _, pc := range profile.PluginConfig {
			if pc.Name == placement.Name {
				args, err := placement.ParseArgs(pc.Args)
				require.NoError(t, err)
				assert.Equal(t, placement.MostAllocated, args.ScoringStrategy)
				assert.ElementsMatch(t, placement.DefaultAccelerators, args.Accelerators, "the shipped list is the default one")
				assert.True(t, *args.AvoidAcceleratorNodes)
				parsed = true
			}
		}
		assert.True(t, parsed, "the profile configures %s", placement.Name)
		for _, pc := range profile.PluginConfig {
			if pc.Name == numa.Name {
				args, err := numa.ParseArgs(pc.Args)
				require.NoError(t, err)
				assert.Equal(t, numa.MostAllocated, args.ScoringStrategy)
			}
		}
	})
}
