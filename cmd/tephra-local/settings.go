package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// schedulerArgs are the plugin args a person tries with `make up SCHEDULER_ARGS=FILE`: by plugin
// name, merged into every profile's args of the shipped configuration. TephraQueue's
// usageHalfLife is taken out: the half-life of usage history is tephra-controllers'
// --usage-half-life, which tephra-scheduler reads from Queue status, and the local cluster sets
// the flag from it.
type schedulerArgs struct {
	plugins       map[string]map[string]any
	usageHalfLife string
}

// readSchedulerArgs reads the file ("" for none), or says what is wrong with it.
func readSchedulerArgs(path string) (schedulerArgs, error) {
	if path == "" {
		return schedulerArgs{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return schedulerArgs{}, fmt.Errorf("--scheduler-args: %w", err)
	}
	var plugins map[string]map[string]any
	if err := yaml.UnmarshalStrict(data, &plugins); err != nil {
		return schedulerArgs{}, fmt.Errorf("--scheduler-args %s: want plugin names, each with a map of its args (hack/scheduler-args.example.yaml): %w", path, err)
	}
	out := schedulerArgs{plugins: plugins}
	if queue := plugins["TephraQueue"]; queue != nil {
		if h, ok := queue["usageHalfLife"]; ok {
			s, isString := h.(string)
			if !isString {
				return schedulerArgs{}, fmt.Errorf("--scheduler-args %s: TephraQueue usageHalfLife: %v is not a duration such as 1h", path, h)
			}
			out.usageHalfLife = s
			delete(queue, "usageHalfLife")
			if len(queue) == 0 {
				delete(plugins, "TephraQueue")
			}
		}
	}
	return out, nil
}

// describe lists the settings as plugin.arg=value, sorted.
func (a schedulerArgs) describe() string {
	var settings []string
	for plugin, args := range a.plugins {
		for name, v := range args {
			settings = append(settings, fmt.Sprintf("%s.%s=%v", plugin, name, v))
		}
	}
	if a.usageHalfLife != "" {
		settings = append(settings, "tephra-controllers' --usage-half-life="+a.usageHalfLife+" (TephraQueue.usageHalfLife)")
	}
	slices.Sort(settings)
	return strings.Join(settings, ", ")
}
