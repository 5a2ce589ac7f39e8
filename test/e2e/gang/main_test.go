// Package gang checks gang scheduling end to end: TephraGang binds a PodGroup's minimum all at
// once or not at all, gangs never deadlock each other, a scheduler restart leaves no partial gang,
// and the PodGroup controller reports what happened.
package gang

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

// vanillaScheduler is a second profile of the same scheduler with upstream's default plugins (all
// profiles must share one queue sort, so it keeps TephraGang's, which orders pods without a
// group by their queue time as upstream does). It shows what users have without Tephra.
const vanillaScheduler = "vanilla-scheduler"

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{SchedulerConfig: schedulerConfigWithVanillaProfile()}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// schedulerConfigWithVanillaProfile writes the shipped scheduler configuration plus the vanilla
// profile to a temporary file.
func schedulerConfigWithVanillaProfile() string {
	root, err := localcluster.RepoRoot()
	if err != nil {
		panic(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "scheduler", "config.yaml"))
	if err != nil {
		panic(err)
	}
	var config map[string]any
	if err := yaml.Unmarshal(data, &config); err != nil {
		panic(err)
	}
	profiles := config["profiles"].([]any)
	config["profiles"] = append(profiles, map[string]any{
		"schedulerName": vanillaScheduler,
		// Profiles must agree on the queue sort plugin's args too.
		"pluginConfig": profiles[0].(map[string]any)["pluginConfig"],
		"plugins": map[string]any{
			"queueSort": map[string]any{
				"enabled":  []any{map[string]any{"name": "TephraGang"}},
				"disabled": []any{map[string]any{"name": "*"}},
			},
		},
	})
	out, err := yaml.Marshal(config)
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "tephra-gang-config-")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		panic(err)
	}
	return path
}
