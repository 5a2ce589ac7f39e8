package benchupstream

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// workload is one workload of one of upstream's workload files.
type workload struct {
	// suite is the file's directory under test/integration/scheduler_perf.
	suite, testCase, name string
}

func (w workload) String() string { return fmt.Sprintf("%s:%s/%s", w.suite, w.testCase, w.name) }

// fullSet is every performance workload of upstream's gang files: podgroup/gangscheduling,
// podgroup/tas and workload_preemption (issue #28), and misc's SchedulingBasic at 5000 nodes for
// plain pods.
var fullSet = []workload{
	{"misc", "SchedulingBasic", "5000Nodes_10000Pods"},
	{"podgroup/gangscheduling", "GangScheduling", "5000Nodes_1000Gangs_3000Pods"},
	{"podgroup/gangscheduling", "GangScheduling", "5000Nodes_2000Gangs_6000Pods"},
	{"podgroup/gangscheduling", "GangScheduling", "5000Nodes_3000Gangs_9000Pods"},
	{"podgroup/gangscheduling", "GangScheduling", "5000Nodes_3Gangs_3000Pods_1000PerGroup"},
	{"podgroup/gangscheduling", "GangScheduling", "5000Nodes_6Gangs_6000Pods_1000PerGroup"},
	{"podgroup/gangscheduling", "GangScheduling", "5000Nodes_9Gangs_9000Pods_1000PerGroup"},
	{"podgroup/tas", "TopologyAwareScheduling", "5000Nodes_750Gangs_3000Pods"},
	{"podgroup/tas", "TopologyAwareScheduling", "5000Nodes_1500Gangs_6000Pods"},
	{"podgroup/tas", "TopologyAwareScheduling", "5000Nodes_2250Gangs_9000Pods"},
	{"podgroup/tas", "TopologyAwareScheduling", "5000Nodes_3Gangs_3000Pods_1000PerGroup"},
	{"podgroup/tas", "TopologyAwareScheduling", "5000Nodes_6Gangs_6000Pods_1000PerGroup"},
	{"podgroup/tas", "TopologyAwareScheduling", "5000Nodes_9Gangs_9000Pods_1000PerGroup"},
	{"workload_preemption", "GangPreemptionBasic", "100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods"},
	{"workload_preemption", "GangPreemptionBasic", "100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods"},
	{"workload_preemption", "GangPreemptionPodGroups", "100Nodes_1PreemptorGang_100Pods_Evicting_5LowPriorityGangs"},
	{"workload_preemption", "GangPreemptionPodGroups", "100Nodes_10PreemptorGangs_10Pods_Evicting_50LowPriorityGangs"},
	{"workload_preemption", "GangPreemptionAffinity", "100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods"},
	{"workload_preemption", "GangPreemptionAffinity", "100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods"},
}

// shortSet are upstream's short integration workloads of the same files: what make test runs.
var shortSet = []workload{
	{"misc", "SchedulingBasic", "5Nodes"},
	{"podgroup/gangscheduling", "GangScheduling", "10Nodes_3Gangs"},
	{"podgroup/tas", "TopologyAwareScheduling", "10Nodes_3Gangs"},
	{"workload_preemption", "GangPreemptionBasic", "2Nodes_1PreemptorGang_2Pods_Evicting_10InitPods"},
	{"workload_preemption", "GangPreemptionPodGroups", "2Nodes_1PreemptorGang_2Pods_Evicting_2LowPriorityGangs"},
	{"workload_preemption", "GangPreemptionAffinity", "2Nodes_1PreemptorGang_2Pods_Evicting_10InitPods"},
}

// unsupported are the workloads (by suite, or suite:TestCase/Workload) a profile cannot run yet,
// and why: the harness would wait for them until its timeout. They are reported as not run.
var unsupported = map[string]map[string]string{
	// Tephra ran every workload of fullSet once it left upstream PodGroups to kube-scheduler's
	// pod-group cycles with the gate on and preempted for them in PodGroupPostFilter (#28);
	// before, the gang-preemption workloads found no victims, gangs of 1000 timed out at
	// TephraGang's Permit, and the topology workload placed 916 of 3000 pods in 10 minutes.
	"tephra": {},
}

// unsupportedReason says why profile cannot run w, or "".
func unsupportedReason(profile string, w workload) string {
	if why := unsupported[profile][w.String()]; why != "" {
		return why
	}
	return unsupported[profile][w.suite]
}

// selection reads -upstream-set and -upstream-workloads.
func selection(set, list string) ([]workload, error) {
	if list != "" {
		var out []workload
		for item := range strings.SplitSeq(list, ",") {
			suite, rest, ok := strings.Cut(strings.TrimSpace(item), ":")
			testCase, name, ok2 := strings.Cut(rest, "/")
			if !ok || !ok2 || suite == "" || testCase == "" || name == "" {
				return nil, fmt.Errorf("-upstream-workloads: %q is not suite:TestCase/Workload", item)
			}
			out = append(out, workload{suite, testCase, name})
		}
		return out, nil
	}
	switch set {
	case "full":
		return fullSet, nil
	case "short":
		return shortSet, nil
	}
	return nil, fmt.Errorf(`-upstream-set: %q is neither "full" nor "short"`, set)
}

// suitesOf lists the selected workloads' files, in order of first mention.
func suitesOf(selected []workload) []string {
	var suites []string
	for _, w := range selected {
		if !slices.Contains(suites, w.suite) {
			suites = append(suites, w.suite)
		}
	}
	return suites
}

// suiteName is a suite's name in benchmark names and scheduler_perf's topic: its last directory.
func suiteName(suite string) string { return filepath.Base(suite) }

// copyWorkloadFiles copies upstream's scheduler_perf YAML files (workload files and the templates
// they name by relative paths) from the module to dir.
func copyWorkloadFiles(moduleDir, dir string) error {
	src := filepath.Join(moduleDir, "test", "integration", "scheduler_perf")
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
}

// deriveWorkloadFile writes, beside a suite's performance-config.yaml, the same file holding only
// the selected workloads, without their pass/fail thresholds, and, when schedulerConfig is set,
// naming it as every test case's scheduler configuration. It returns the new file's name and the
// thresholds (SchedulingThroughput, pods/s) the workloads had; each selected workload must exist.
//
// The thresholds are upstream's, for its CI machines: on a smaller one every profile misses them,
// and the harness would fail the run. They are reported beside the measured throughput instead.
func deriveWorkloadFile(tree, suite, profile, schedulerConfig string, selected []workload) (string, map[workload]float64, error) {
	dir := filepath.Join(tree, suite)
	data, err := os.ReadFile(filepath.Join(dir, "performance-config.yaml"))
	if err != nil {
		return "", nil, err
	}
	var testCases []map[string]any
	if err := yaml.Unmarshal(data, &testCases); err != nil {
		return "", nil, fmt.Errorf("%s/performance-config.yaml: %w", suite, err)
	}
	found := map[workload]bool{}
	thresholds := map[workload]float64{}
	var kept []map[string]any
	for _, tc := range testCases {
		tcName, _ := tc["name"].(string)
		workloads, _ := tc["workloads"].([]any)
		var keep []any
		for _, w := range workloads {
			wm, _ := w.(map[string]any)
			name, _ := wm["name"].(string)
			key := workload{suite, tcName, name}
			if slices.Contains(selected, key) && unsupportedReason(profile, key) == "" {
				found[key] = true
				// Every selected workload runs: prepare clears the harness's label filter,
				// and the labels go so that none is skipped under -short either.
				delete(wm, "labels")
				if t, ok := thresholdOf(wm["threshold"], suiteName(suite)); ok {
					thresholds[key] = t
				}
				delete(wm, "threshold")
				keep = append(keep, wm)
			}
		}
		if len(keep) == 0 {
			continue
		}
		tc["workloads"] = keep
		delete(tc, "labels")
		if schedulerConfig != "" {
			if existing, ok := tc["schedulerConfigPath"]; ok {
				return "", nil, fmt.Errorf("%s/%s names its own scheduler configuration %v: Tephra's cannot replace it unchanged", suite, tcName, existing)
			}
			tc["schedulerConfigPath"] = schedulerConfig
		}
		kept = append(kept, tc)
	}
	for _, w := range selected {
		if w.suite == suite && !found[w] && unsupportedReason(profile, w) == "" {
			return "", nil, fmt.Errorf("workload %s is not in upstream's %s/performance-config.yaml", w, suite)
		}
	}
	out, err := yaml.Marshal(kept)
	if err != nil {
		return "", nil, err
	}
	name := "bench-" + profile + ".yaml"
	return name, thresholds, os.WriteFile(filepath.Join(dir, name), out, 0o644)
}

// thresholdOf reads a workload's threshold: one number, or numbers by topic (scheduler_perf's
// topic is the suite's name here).
func thresholdOf(v any, topic string) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case map[string]any:
		f, ok := t[topic].(float64)
		return f, ok
	}
	return 0, false
}
