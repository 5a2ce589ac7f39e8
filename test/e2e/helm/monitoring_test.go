package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// prometheusRule.enabled and grafanaDashboard.enabled install the alerts and the dashboard of
// manifests/monitoring (which TestMonitoring checks against a running cluster and promtool), as
// they are there; by default the chart installs neither.
func TestMonitoringValuesInstallTheShippedRulesAndDashboard(t *testing.T) {
	ctx := testContext(t)
	const rule, dashboard = "PrometheusRule/tephra-system/tephra", "ConfigMap/tephra-system/tephra-dashboard"
	without := renderChart(t, ctx)
	assert.NotContains(t, without, rule)
	assert.NotContains(t, without, dashboard)

	with := renderChart(t, ctx, "--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true",
		"--set", "prometheusRule.labels.release=kube-prometheus-stack")
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)

	require.Contains(t, with, rule)
	data, err := os.ReadFile(filepath.Join(root, "manifests", "monitoring", "prometheusrule.yaml"))
	require.NoError(t, err)
	var shipped map[string]any
	require.NoError(t, yaml.Unmarshal(data, &shipped))
	assert.Equal(t, shipped["spec"], with[rule].Object["spec"], "the chart's rules are manifests/monitoring's (make generate copies them)")
	assert.Equal(t, "kube-prometheus-stack", with[rule].GetLabels()["release"], "labels Prometheus selects rules by")

	require.Contains(t, with, dashboard)
	assert.Equal(t, "1", with[dashboard].GetLabels()["grafana_dashboard"], "the label Grafana's sidecar loads dashboards by")
	data, err = os.ReadFile(filepath.Join(root, "manifests", "monitoring", "dashboard.json"))
	require.NoError(t, err)
	var want, got any
	require.NoError(t, json.Unmarshal(data, &want))
	content, _, _ := unstructured.NestedString(with[dashboard].Object, "data", "tephra.json")
	require.NoError(t, json.Unmarshal([]byte(content), &got), "the ConfigMap holds the dashboard's JSON")
	assert.Equal(t, want, got)
}
