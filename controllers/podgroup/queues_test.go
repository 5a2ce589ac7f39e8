package podgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Waiting groups come back for a Queue's new spec, or a new allocation under a capability; not for
// the status updates of a queue without one, which come with every pod placed.
func TestQueueHoldMayChange(t *testing.T) {
	queue := func(generation int64, capability corev1.ResourceList, allocated string) *schedulingv1alpha1.Queue {
		return &schedulingv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: "q", Generation: generation},
			Spec:       schedulingv1alpha1.QueueSpec{Capability: capability},
			Status:     schedulingv1alpha1.QueueStatus{Allocated: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocated)}},
		}
	}
	update := func(old, new *schedulingv1alpha1.Queue) bool {
		return queueHoldMayChange.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: new})
	}
	limited := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	assert.False(t, update(queue(1, nil, "1"), queue(1, nil, "2")), "allocation of a queue without a capability")
	assert.True(t, update(queue(1, nil, "1"), queue(2, limited, "1")), "a new spec")
	assert.True(t, update(queue(1, limited, "1"), queue(1, limited, "2")), "allocation under a capability")
	assert.True(t, queueHoldMayChange.Create(event.CreateEvent{Object: queue(1, nil, "0")}))
	assert.True(t, queueHoldMayChange.Delete(event.DeleteEvent{Object: queue(1, nil, "0")}))
}
