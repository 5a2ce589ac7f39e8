package queue

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// podRequests are what a pod counts for in its queue, as the scheduler counts them: its requests,
// and the devices of the ResourceClaims charged to it (none without a lookup).
func podRequests(pod *corev1.Pod, devices quota.DeviceLookup) quota.Amounts {
	requests := quota.PodRequests(pod)
	if devices != nil {
		requests.Add(quota.ChargeDevices(pod, devices).Charged)
	}
	return requests
}
