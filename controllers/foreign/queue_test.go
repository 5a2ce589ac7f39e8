package foreign

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
)

// A Volcano Queue's DRA keys (the capacity plugin's, Volcano 1.15) become Tephra's device
// resources, in capability and guarantee; other resources keep their names.
func TestVolcanoQueueDeviceKeys(t *testing.T) {
	vq := &volcanov1beta1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "ml"},
		Spec: volcanov1beta1.QueueSpec{
			Capability: corev1.ResourceList{
				corev1.ResourceCPU:                                resource.MustParse("64"),
				"nvidia.com/gpu":                                  resource.MustParse("4"),
				"deviceclass/gpu.nvidia.com":                      resource.MustParse("8"),
				"memory.deviceclass/shared-gpu.example.com":       resource.MustParse("320Gi"),
				"cores.deviceclass/hami-core-gpu.project-hami.io": resource.MustParse("800"),
			},
			Guarantee: volcanov1beta1.Guarantee{Resource: corev1.ResourceList{
				"deviceclass/gpu.nvidia.com": resource.MustParse("1"),
			}},
			Deserved: corev1.ResourceList{"deviceclass/gpu.nvidia.com": resource.MustParse("4")},
		},
	}
	spec := volcanoQueueSpec(vq)
	assert.Equal(t, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"),
		"nvidia.com/gpu":   resource.MustParse("4"),
		"gpu.nvidia.com.deviceclass.resource.k8s.io/devices":              resource.MustParse("8"),
		"shared-gpu.example.com.deviceclass.resource.k8s.io/memory":       resource.MustParse("320Gi"),
		"hami-core-gpu.project-hami.io.deviceclass.resource.k8s.io/cores": resource.MustParse("800"),
	}, spec.Capability)
	assert.Equal(t, corev1.ResourceList{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": resource.MustParse("1")}, spec.Guarantee)

	// The Tephra Queue's usage is written back under Volcano's keys.
	allocated := toVolcanoResources(corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("3"),
		"gpu.nvidia.com.deviceclass.resource.k8s.io/devices":        resource.MustParse("2"),
		"shared-gpu.example.com.deviceclass.resource.k8s.io/memory": resource.MustParse("40Gi"),
	})
	assert.Equal(t, corev1.ResourceList{
		corev1.ResourceCPU:                          resource.MustParse("3"),
		"deviceclass/gpu.nvidia.com":                resource.MustParse("2"),
		"memory.deviceclass/shared-gpu.example.com": resource.MustParse("40Gi"),
	}, allocated)
}

func TestVolcanoDeviceNames(t *testing.T) {
	for in, want := range map[corev1.ResourceName]corev1.ResourceName{
		"deviceclass/gpu.example.com":        "gpu.example.com.deviceclass.resource.k8s.io/devices",
		"memory.deviceclass/gpu.example.com": "gpu.example.com.deviceclass.resource.k8s.io/memory",
		"cpu":                                "cpu",
		"nvidia.com/gpu":                     "nvidia.com/gpu",
		"deviceclass/":                       "deviceclass/",
		".deviceclass/gpu.example.com":       ".deviceclass/gpu.example.com",
		"gpu.example.com.deviceclass.resource.k8s.io/devices": "gpu.example.com.deviceclass.resource.k8s.io/devices",
	} {
		assert.Equal(t, want, volcanoDeviceName(in), "%s", in)
	}
	// A key given both ways keeps Tephra's.
	both := fromVolcanoResources(corev1.ResourceList{
		"deviceclass/gpu.example.com":                         resource.MustParse("8"),
		"gpu.example.com.deviceclass.resource.k8s.io/devices": resource.MustParse("6"),
	})
	assert.Equal(t, corev1.ResourceList{"gpu.example.com.deviceclass.resource.k8s.io/devices": resource.MustParse("6")}, both)
}
