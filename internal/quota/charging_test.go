package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's total is every node's allocatable but its pod count, and the devices: a node
// replaced counts once, one removed not at all, and devices replaced count as they are now.
func TestClusterTotal(t *testing.T) {
	node := func(name, cpu string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110"),
		}}}
	}
	devices := corev1.ResourceName("gpu.example.com.deviceclass.resource.k8s.io/devices")
	var total ClusterTotal
	assert.Empty(t, total.Total())
	total.SetNode(node("n1", "4"))
	total.SetNode(node("n2", "8"))
	total.SetNode(node("n1", "2"))
	total.SetDevices(Amounts{devices: 8})
	assert.Equal(t, Amounts{corev1.ResourceCPU: 10000, devices: 8}, total.Total())
	before := total.Total()
	total.RemoveNode("n2")
	total.SetDevices(Amounts{devices: 4})
	assert.Equal(t, Amounts{corev1.ResourceCPU: 2000, devices: 4}, total.Total())
	assert.Equal(t, Amounts{corev1.ResourceCPU: 10000, devices: 8}, before, "a total read stays as it was read")
	total.RemoveNode("n1")
	total.SetDevices(nil)
	assert.Empty(t, total.Total())
}
