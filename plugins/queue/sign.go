package queue

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/plugins/internal/devices"
)

// SignPod lets the scheduler batch pods: the plugin's verdict does not depend on the node, but
// for pods that claim devices, which Filter keeps off the devices held for nominated pods.
func (q *Queue) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if devices.UsesDevices(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods that claim devices are not signable: TephraQueue's Filter reads the devices held on each node")
	}
	return nil, nil
}
