package localcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// ShippedSchedulerConfig reads manifests/scheduler/config.yaml of the repository at root.
func ShippedSchedulerConfig(root string) (map[string]any, error) {
	path := filepath.Join(root, "manifests", "scheduler", "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var config map[string]any
	if err := yaml.Unmarshal(data, &config); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return config, nil
}

// SchedulerClientLimits are the shipped configuration's clientConnection qps and burst, which a
// baseline uses too, so that it is compared with Tephra at the same rate of requests.
func SchedulerClientLimits(root string) (qps float32, burst int, err error) {
	config, err := ShippedSchedulerConfig(root)
	if err != nil {
		return 0, 0, err
	}
	connection, _ := config["clientConnection"].(map[string]any)
	q, qok := connection["qps"].(float64)
	b, bok := connection["burst"].(float64)
	if !qok || !bok {
		return 0, 0, fmt.Errorf("manifests/scheduler/config.yaml sets no clientConnection qps and burst")
	}
	return float32(q), int(b), nil
}

// WriteUpstreamSchedulerConfig writes, as dir/scheduler-vanilla.yaml, a configuration with
// upstream's default profile under Tephra's scheduler name (so that the same pods go to it) and
// the shipped configuration's client limits, without leader election: the stock kube-scheduler,
// for a baseline. It returns the file's path, for Options.SchedulerConfig.
func WriteUpstreamSchedulerConfig(root, dir string) (string, error) {
	return writeUpstreamSchedulerConfig(root, filepath.Join(dir, "scheduler-vanilla.yaml"), nil)
}

// WriteUpstreamPackingSchedulerConfig writes, as dir/scheduler-packing.yaml, the stock
// configuration of WriteUpstreamSchedulerConfig with the packing an admin of upstream's scheduler
// would configure for GPUs: NodeResourcesFit's MostAllocated strategy, the GPU weighted
// gpuWeight against CPU and memory 1 each.
func WriteUpstreamPackingSchedulerConfig(root, dir string, gpuWeight int) (string, error) {
	fit := map[string]any{
		"name": "NodeResourcesFit",
		"args": map[string]any{"scoringStrategy": map[string]any{
			"type": "MostAllocated",
			"resources": []any{
				map[string]any{"name": "cpu", "weight": 1},
				map[string]any{"name": "memory", "weight": 1},
				map[string]any{"name": string(GPUResource), "weight": gpuWeight},
			},
		}},
	}
	return writeUpstreamSchedulerConfig(root, filepath.Join(dir, "scheduler-packing.yaml"), []any{fit})
}

func writeUpstreamSchedulerConfig(root, path string, pluginConfig []any) (string, error) {
	qps, burst, err := SchedulerClientLimits(root)
	if err != nil {
		return "", err
	}
	profile := map[string]any{"schedulerName": schedulingv1alpha1.SchedulerName}
	if pluginConfig != nil {
		profile["pluginConfig"] = pluginConfig
	}
	config := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"qps": qps, "burst": burst},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles":         []any{profile},
	}
	return WriteYAML(path, config)
}

// WriteYAML writes v as YAML to path and returns the path.
func WriteYAML(path string, v any) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, data, 0o644)
}
