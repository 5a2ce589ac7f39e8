package queue

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/quota"
)

// podRequests are what a pod counts for in its queue, as the scheduler counts them: its requests,
// and the devices of the ResourceClaims charged to it (none without a lookup), but for the claims
// it names directly, returned apart by name: a queue counts each of those once, however many of
// its pods name it (as plugins/queue's ledger does).
// The caller must not change own.
func podRequests(pod *corev1.Pod, devices quota.DeviceLookup, memo *requestsMemo) (own quota.Amounts, claims map[string]quota.Amounts) {
	own = memo.requests(pod)
	if devices != nil {
		charge := quota.ChargeDevices(pod, devices)
		own = own.Clone()
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

// requestsMemo keeps the pods' own requests between recounts, by UID and resourceVersion: they
// change only with a new resourceVersion (an in-place resize), and working out every pod's
// requests again on each recount was 7% of a make bench-upstream run's CPU. A nil memo keeps
// nothing.
type requestsMemo struct {
	mu   sync.Mutex
	pods map[types.UID]memoEntry
	seen map[types.UID]bool
}

type memoEntry struct {
	resourceVersion string
	requests        quota.Amounts
}

// requests returns the pod's requests, which the caller must not change (a copy of every pod's
// requests on every recount was 1.5 % of make bench-upstream's 3000-gang run).
func (m *requestsMemo) requests(pod *corev1.Pod) quota.Amounts {
	if m == nil || pod.UID == "" || pod.ResourceVersion == "" {
		return quota.PodRequests(pod)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pods == nil {
		m.pods, m.seen = map[types.UID]memoEntry{}, map[types.UID]bool{}
	}
	m.seen[pod.UID] = true
	e, ok := m.pods[pod.UID]
	if !ok || e.resourceVersion != pod.ResourceVersion {
		e = memoEntry{resourceVersion: pod.ResourceVersion, requests: quota.PodRequests(pod)}
		m.pods[pod.UID] = e
	}
	return e.requests
}

// forgetUnseen drops the pods the last recount did not see (gone from the cluster).
func (m *requestsMemo) forgetUnseen() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.pods {
		if !m.seen[uid] {
			delete(m.pods, uid)
		}
	}
	m.seen = map[types.UID]bool{}
}
