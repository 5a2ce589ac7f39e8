package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// `kubectl tephra queues` shows the tree with each queue's limits, use, share and bar, and `top`
// the biggest queues and groups and the cluster's free capacity, as the pods say.
func TestQueuesAndTop(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	const unit corev1.ResourceName = "e2e.tephra.dev/unit"
	pool := units(t, env, unit, 2, 4)
	createQueue(t, env, "cli-org", "root", func(s *schedulingv1alpha1.QueueSpec) {
		s.Weight = 2
		s.Guarantee = corev1.ResourceList{unit: *resourceQuantity(2)}
	})
	createQueue(t, env, "cli-team-a", "cli-org", func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{unit: *resourceQuantity(3)}
	})
	createQueue(t, env, "cli-team-b", "cli-org", nil)
	createQueue(t, env, "cli-closed", "root", func(s *schedulingv1alpha1.QueueSpec) { s.State = schedulingv1alpha1.QueueClosed })
	createQueue(t, env, "cli-tenant", "root", func(s *schedulingv1alpha1.QueueSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	})
	for _, name := range []string{"a-0", "a-1", "a-2"} {
		pod{name: name, queue: "cli-team-a", res: unit, amount: 1, selector: pool}.create(t, env, ns)
	}
	createGroup(t, env, ns, "train", "cli-team-b", 2)
	for _, name := range []string{"train-0", "train-1"} {
		pod{name: name, group: "train", res: unit, amount: 1, selector: pool}.create(t, env, ns)
	}
	pod{name: "closed-0", queue: "cli-closed", res: unit, amount: 1, selector: pool}.create(t, env, ns)
	waitBound(t, env, ns, 5)

	settled(t, env, ns, "queues", "queues")
	settled(t, env, ns, "queues-wide", "queues", "-o", "wide")
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, env, "", "queues", "-o", "json")), &rows))
	byName := map[string]map[string]any{}
	for _, r := range rows {
		byName[r["name"].(string)] = r
	}
	require.Contains(t, byName, "cli-team-a")
	assert.Equal(t, map[string]any{"name": "cli-team-a", "parent": "cli-org", "depth": 2.0, "allocated": map[string]any{string(unit): "3"}, "capability": map[string]any{string(unit): "3"}},
		pick(byName["cli-team-a"], "name", "parent", "depth", "allocated", "capability"))

	settled(t, env, ns, "top", "top")
	var u struct {
		Groups []struct {
			Name string `json:"name"`
			Pods int    `json:"pods"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, env, "", "top", "-o", "yaml", "-o", "json")), &u))
	require.NotEmpty(t, u.Groups)
	assert.Equal(t, ns+"/train", u.Groups[0].Name)
	assert.Equal(t, 2, u.Groups[0].Pods)

	_, _, err := kubectlTephra(t, env, "", "queues", "-o", "xml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown output format "xml": use wide, json or yaml`)
}
