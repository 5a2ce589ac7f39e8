package queue

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// podRequests are the requests a pod counts for in its queue, as the scheduler counts them.
func podRequests(pod *corev1.Pod) quota.Amounts { return quota.PodRequests(pod) }
