package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const monitoringDir = "../../../manifests/monitoring"

// metricName matches the metrics Tephra's dashboard and alerts read: Tephra's own, kube-scheduler's
// and controller-runtime's.
var metricName = regexp.MustCompile(`\b(?:tephra|scheduler|controller_runtime)_[a-z0-9_]+`)

// The dashboard and the alerts in manifests/monitoring read only metrics that the components of a
// running cluster serve, once it has reclaimed a pod, refused a gang that does not fit and run one
// that does; the alerts pass their promtool unit tests (skipped, saying so, without promtool
// outside CI).
func TestMonitoring(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/gpu-monitoring"
	pool := units(t, env, res, 2, 1)
	framework.CreateQueue(t, env, "monitoring-a", nil)
	framework.CreateQueue(t, env, "monitoring-b", func(s *schedulingv1alpha1.QueueSpec) {
		s.Guarantee = corev1.ResourceList{res: resource.MustParse("1")}
	})

	// A gang that fits, then a reclaim, then a gang that never fits.
	createGroup(t, env, ns, "fits", "monitoring-a", 2, nil)
	submit(t, env, ns, 2, "fits", workPod{group: "fits", queue: "monitoring-a", res: res, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"monitoring-a": 2}, time.Minute)
	submit(t, env, ns, 1, "b", workPod{queue: "monitoring-b", res: res, amount: 1, pool: pool})
	framework.Eventually(t, time.Minute, "a pod of queue a reclaimed", func() (bool, string) {
		return countEvents(t, env, ns, "Reclaimed") > 0, framework.QueueStatuses(env)
	})
	createGroup(t, env, ns, "never", "monitoring-b", 3, nil)
	submit(t, env, ns, 3, "never", workPod{group: "never", queue: "monitoring-b", res: res, amount: 1, pool: pool})

	names := map[string]bool{}
	rules, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	require.NoError(t, err)
	// The spec's groups as they are, for promtool's plain rule file, and read for their metrics.
	var rule struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(rules, &rule))
	for _, g := range rule.Spec.Groups {
		list, _ := g["rules"].([]any)
		for _, r := range list {
			expr, _ := r.(map[string]any)["expr"].(string)
			for _, name := range metricName.FindAllString(expr, -1) {
				names[name] = true
			}
		}
	}
	dashboard, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	require.NoError(t, err)
	var board struct {
		SchemaVersion int `json:"schemaVersion"`
		Panels        []struct {
			Type    string                  `json:"type"`
			Title   string                  `json:"title"`
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(dashboard, &board), "dashboard.json is JSON")
	assert.Equal(t, 39, board.SchemaVersion, "the Grafana schema version the dashboard is written for")
	for _, p := range board.Panels {
		if p.Type == "row" {
			continue
		}
		assert.NotEmpty(t, p.Targets, "panel %q queries something", p.Title)
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				names[name] = true
			}
		}
	}
	require.NotEmpty(t, names)
	servedAs := map[string]*regexp.Regexp{}
	for name := range names {
		servedAs[name] = regexp.MustCompile(`(?m)^` + name + `[{ ]`)
	}

	var missing []string
	framework.Eventually(t, time.Minute, "every metric the dashboard and alerts read to be served", func() (bool, string) {
		scheduler, err := env.Cluster.SchedulerMetrics(context.Background())
		if err != nil {
			return false, err.Error()
		}
		controllers, err := env.Cluster.ControllersMetrics(context.Background(), localcluster.Controllers)
		if err != nil {
			return false, err.Error()
		}
		served := scheduler + "\n" + controllers
		missing = nil
		for name, line := range servedAs {
			if !line.MatchString(served) {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		return len(missing) == 0, fmt.Sprintf("not served: %v", missing)
	})

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing; .ci/run installs Debian's prometheus package, which has it")
		}
		t.Skip("promtool is not installed (Debian package prometheus): the alerts' unit tests (manifests/monitoring/rules_test.yaml) did not run")
	}
	dir := t.TempDir()
	groups, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o644))
	tests, err := os.ReadFile(filepath.Join(monitoringDir, "rules_test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644))
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}
