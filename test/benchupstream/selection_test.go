package benchupstream

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The derived workload file keeps only the selected workloads, without labels or thresholds (which
// it returns), names Tephra's scheduler configuration when given one, and refuses a selection that
// upstream's file does not hold or a test case that names its own configuration.
func TestDeriveWorkloadFileKeepsOnlyTheSelection(t *testing.T) {
	tree := t.TempDir()
	suite := "podgroup/gangscheduling"
	require.NoError(t, os.MkdirAll(filepath.Join(tree, suite), 0o755))
	write := func(content string) {
		require.NoError(t, os.WriteFile(filepath.Join(tree, suite, "performance-config.yaml"), []byte(content), 0o644))
	}
	write(`
- name: GangScheduling
  labels: [performance]
  featureGates: {GenericWorkload: true}
  workloadTemplate: [{opcode: createNodes, countParam: $initNodes}]
  workloads:
  - name: small
    labels: [integration-test, short]
    params: {initNodes: 10}
  - name: big
    labels: [performance]
    threshold: 680
    params: {initNodes: 5000}
- name: Other
  workloadTemplate: [{opcode: createNodes, countParam: $initNodes}]
  workloads:
  - name: big
    threshold: {gangscheduling: 100, other: 5}
    params: {initNodes: 5000}
`)
	selected := []workload{{suite, "GangScheduling", "big"}, {suite, "Other", "big"}}
	name, thresholds, err := deriveWorkloadFile(tree, suite, "tephra", "/etc/tephra.yaml", selected)
	require.NoError(t, err)
	assert.Equal(t, map[workload]float64{selected[0]: 680, selected[1]: 100}, thresholds, "a threshold by topic is the suite's")

	data, err := os.ReadFile(filepath.Join(tree, suite, name))
	require.NoError(t, err)
	var got []map[string]any
	require.NoError(t, yaml.Unmarshal(data, &got))
	require.Len(t, got, 2)
	assert.Equal(t, "/etc/tephra.yaml", got[0]["schedulerConfigPath"])
	assert.NotContains(t, got[0], "labels")
	assert.Equal(t, map[string]any{"GenericWorkload": true}, got[0]["featureGates"], "the rest of the test case is upstream's")
	workloads := got[0]["workloads"].([]any)
	require.Len(t, workloads, 1, "only the selected workload")
	assert.Equal(t, map[string]any{"name": "big", "params": map[string]any{"initNodes": float64(5000)}}, workloads[0])

	_, _, err = deriveWorkloadFile(tree, suite, "tephra", "", []workload{{suite, "GangScheduling", "huge"}})
	assert.EqualError(t, err, "workload podgroup/gangscheduling:GangScheduling/huge is not in upstream's podgroup/gangscheduling/performance-config.yaml")

	write(`
- name: Own
  schedulerConfigPath: config/own.yaml
  workloadTemplate: []
  workloads: [{name: w}]
`)
	_, _, err = deriveWorkloadFile(tree, suite, "tephra", "/etc/tephra.yaml", []workload{{suite, "Own", "w"}})
	assert.ErrorContains(t, err, "names its own scheduler configuration")
}

func TestSelectionReadsSetsAndLists(t *testing.T) {
	got, err := selection("full", "misc:SchedulingBasic/5000Nodes, podgroup/tas:TopologyAwareScheduling/10Nodes_3Gangs")
	require.NoError(t, err)
	assert.Equal(t, []workload{{"misc", "SchedulingBasic", "5000Nodes"}, {"podgroup/tas", "TopologyAwareScheduling", "10Nodes_3Gangs"}}, got, "a list replaces the set")
	assert.Equal(t, []string{"misc", "podgroup/tas"}, suitesOf(got))

	got, err = selection("short", "")
	require.NoError(t, err)
	assert.Equal(t, shortSet, got)

	_, err = selection("full", "misc-SchedulingBasic")
	assert.EqualError(t, err, `-upstream-workloads: "misc-SchedulingBasic" is not suite:TestCase/Workload`)
	_, err = selection("most", "")
	assert.Error(t, err)

	assert.Equal(t, "", unsupportedReason("upstream", fullSet[0]))
	for _, w := range append(slices.Clone(fullSet), shortSet...) {
		assert.Equal(t, "", unsupportedReason("tephra", w), "Tephra runs every workload: %s", w)
	}
	unsupported["tephra"]["workload_preemption"] = "a suite-wide reason"
	defer delete(unsupported["tephra"], "workload_preemption")
	assert.Equal(t, "a suite-wide reason", unsupportedReason("tephra", workload{"workload_preemption", "GangPreemptionBasic", "any"}))
}

// The full set is every performance workload of upstream's gang files, as the module has them.
func TestFullSetHasEveryPerformanceWorkloadOfTheGangFiles(t *testing.T) {
	out, err := goCommand(t.Context(), ".", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	require.NoError(t, err)
	var want []workload
	for _, suite := range []string{"podgroup/gangscheduling", "podgroup/tas", "workload_preemption"} {
		data, err := os.ReadFile(filepath.Join(out, "test", "integration", "scheduler_perf", suite, "performance-config.yaml"))
		require.NoError(t, err)
		var testCases []struct {
			Name      string
			Workloads []struct {
				Name   string
				Labels []string
			}
		}
		require.NoError(t, yaml.Unmarshal(data, &testCases))
		for _, tc := range testCases {
			for _, w := range tc.Workloads {
				if slices.Contains(w.Labels, "performance") {
					want = append(want, workload{suite, tc.Name, w.Name})
				}
			}
		}
	}
	require.NotEmpty(t, want)
	got := slices.DeleteFunc(slices.Clone(fullSet), func(w workload) bool { return w.suite == "misc" })
	assert.ElementsMatch(t, want, got)
}
