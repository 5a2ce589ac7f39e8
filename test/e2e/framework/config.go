package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// VanillaScheduler is the name of a second profile of tephra-scheduler with upstream's default
// plugins: what users have without Tephra. All profiles of a scheduler must share one queue sort
// (and its args), so it keeps TephraGang's, which orders pods without a group by their queue
// time, as upstream does.
const VanillaScheduler = "vanilla-scheduler"

// SchedulerConfigWithVanillaProfile writes the shipped scheduler configuration plus the vanilla
// profile to a temporary file and returns its path, for localcluster.Options.SchedulerConfig.
func SchedulerConfigWithVanillaProfile() (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "scheduler", "config.yaml"))
	if err != nil {
		return "", err
	}
	var config map[string]any
	if err := yaml.Unmarshal(data, &config); err != nil {
		return "", err
	}
	profiles := config["profiles"].([]any)
	var queueSortArgs []any
	for _, pc := range profiles[0].(map[string]any)["pluginConfig"].([]any) {
		if pc.(map[string]any)["name"] == "TephraGang" {
			queueSortArgs = append(queueSortArgs, pc)
		}
	}
	config["profiles"] = append(profiles, map[string]any{
		"schedulerName": VanillaScheduler,
		"pluginConfig":  queueSortArgs,
		"plugins": map[string]any{
			"queueSort": map[string]any{
				"enabled":  []any{map[string]any{"name": "TephraGang"}},
				"disabled": []any{map[string]any{"name": "*"}},
			},
		},
	})
	out, err := yaml.Marshal(config)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "tephra-scheduler-config-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, out, 0o644)
}

// WithSchedulerPluginArgs runs tephra-scheduler with args merged into a plugin's args in every
// profile until the test ends: it restarts the scheduler with them, and again without them
// afterwards, for a test of an option the package's other tests run without.
func WithSchedulerPluginArgs(t *testing.T, env *Env, plugin string, args map[string]any) {
	t.Helper()
	restart := func() {
		for _, name := range env.Cluster.ReplicaNames(localcluster.Scheduler) {
			require.NoError(t, env.Cluster.RestartComponent(context.Background(), name, localcluster.RestartOptions{}))
		}
	}
	env.Cluster.SetSchedulerPluginArgs(plugin, args)
	restart()
	t.Cleanup(func() {
		env.Cluster.SetSchedulerPluginArgs(plugin, nil)
		restart()
	})
}
