package plugins

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// tfConfig parses TF_CONFIG of every container of the pod and checks they agree.
func tfConfig(t *testing.T, pod *corev1.Pod) TFConfig {
	t.Helper()
	var configs []TFConfig
	for _, c := range allContainers(pod) {
		raw, ok := envOf(t, c)["TF_CONFIG"]
		require.True(t, ok, "container %s has TF_CONFIG", c.Name)
		var config TFConfig
		require.NoError(t, json.Unmarshal([]byte(raw), &config))
		configs = append(configs, config)
	}
	for _, config := range configs[1:] {
		require.Equal(t, configs[0], config)
	}
	return configs[0]
}

func TestTensorFlowConfig(t *testing.T) {
	p := mustNew(t, "tensorflow")
	job := newJob(nil, task("ps", 2), task("worker", 3), task("chief", 1), task("evaluator", 1), task("tensorboard", 1))
	cluster := map[string][]string{
		"chief":  {"train-chief-0.train:2222"},
		"ps":     {"train-ps-0.train:2222", "train-ps-1.train:2222"},
		"worker": {"train-worker-0.train:2222", "train-worker-1.train:2222", "train-worker-2.train:2222"},
	}
	for _, tc := range []struct {
		task, role string
		index      int
	}{{"ps", "ps", 1}, {"worker", "worker", 2}, {"chief", "chief", 0}, {"evaluator", "evaluator", 0}} {
		pod := mutated(t, p, job, tc.task, tc.index)
		assert.Equal(t, TFConfig{Cluster: cluster, Task: TFTask{Type: tc.role, Index: tc.index}}, tfConfig(t, pod), tc.task)
		assert.Equal(t, []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222, Protocol: corev1.ProtocolTCP}}, pod.Spec.Containers[0].Ports)
	}
	other := mutated(t, p, job, "tensorboard", 0)
	assert.Empty(t, envOf(t, other.Spec.Containers[0]))
	assert.Empty(t, other.Spec.Containers[0].Ports)
}

func TestTensorFlowConfigHasOnlyTheJobsRoles(t *testing.T) {
	p := mustNew(t, "tensorflow", "--ps=params", "--worker=trainer", "--port=5000")
	job := newJob(nil, task("params", 1), task("trainer", 2), task("chief", 0))
	pod := mutated(t, p, job, "trainer", 1)

	raw := envOf(t, pod.Spec.Containers[0])["TF_CONFIG"]
	assert.JSONEq(t, `{"cluster":{"ps":["train-params-0.train:5000"],"worker":["train-trainer-0.train:5000","train-trainer-1.train:5000"]},"task":{"type":"worker","index":1}}`, raw)
}
