package queue

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// podRequests are what a pod counts for in its queue, as the scheduler counts them: its requests,
// and the devices of the ResourceClaims charged to it (none without a lookup), but for the claims
// it names directly, returned apart by name: a queue counts each of those once, however many of
// its pods name it (as plugins/queue's ledger does).
func podRequests(pod *corev1.Pod, devices quota.DeviceLookup) (own quota.Amounts, claims map[string]quota.Amounts) {
	own = quota.PodRequests(pod)
	if devices != nil {
		charge := quota.ChargeDevices(pod, devices)
		own.Add(charge.Charged)
		own.Sub(charge.Direct)
		claims = charge.DirectClaims
	}
	return own, claims
}

// claimsOnce adds the claims a queue's pods name directly to sums, each claim once per queue
// (seen remembers them).
func claimsOnce(sums map[string]quota.Amounts, seen map[string]bool, queue, namespace string, claims map[string]quota.Amounts) {
	for name, amounts := range claims {
		key := queue + "\x00" + namespace + "/" + name
		if !seen[key] {
			seen[key] = true
			add(sums, queue, amounts)
		}
	}
}
