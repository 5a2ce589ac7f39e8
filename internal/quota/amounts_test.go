package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestDescribeReadsAsTheQueueColumns(t *testing.T) {
	assert.Equal(t, "cpu: 3, memory: 4Gi, nvidia.com/gpu: 2",
		Amounts{"nvidia.com/gpu": 2, corev1.ResourceMemory: 4 << 30, corev1.ResourceCPU: 3000}.Describe())
	assert.Equal(t, "cpu: 500m", Amounts{corev1.ResourceCPU: 500, "nvidia.com/gpu": 0}.Describe())
	assert.Equal(t, "0", Amounts{}.Describe())
	assert.Equal(t, "0", Amounts(nil).Describe())
}
