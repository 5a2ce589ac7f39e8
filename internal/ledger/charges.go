package ledger

import (
	"github.com/tephra-dev/tephra/internal/quota"
	corev1 "k8s.io/api/core/v1"
)

// Charge is what a pod counts for in its queue: its requests, and the devices of its
// ResourceClaims that are charged to it.
type Charge struct {
	Requests, Direct, Shared quota.Amounts
	Claims                   map[string]quota.Amounts
	// problems say why a claim could not be accounted; uncounted are the DeviceClasses of
	// requests whose count only their allocation tells.
	Problems, Uncounted []string
}

// ChargeOf is what a pod counts for in its queue.
func (l *Ledger) ChargeOf(pod *corev1.Pod) Charge {
	return l.withDevices(pod, quota.PodRequests(pod))
}

// withDevices adds a pod's devices to its requests.
func (l *Ledger) withDevices(pod *corev1.Pod, requests quota.Amounts) Charge {
	c := Charge{Requests: requests}
	if l.Devices == nil || (len(pod.Spec.ResourceClaims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil) {
		return c
	}
	d := quota.ChargeDevices(pod, l.Devices)
	c.Requests.Add(d.Charged)
	c.Direct, c.Shared, c.Problems, c.Uncounted, c.Claims = d.Direct, d.Shared, d.Problems, d.Uncounted, d.DirectClaims
	return c
}

// PodRequests are what a pod counts for in its queue.
func (l *Ledger) PodRequests(pod *corev1.Pod) quota.Amounts {
	return l.ChargeOf(pod).Requests
}

// PlacedClaimsIn returns the part of claims that a queue counts placed already.
func (l *Ledger) PlacedClaimsIn(queue, namespace string, claims map[string]quota.Amounts) quota.Amounts {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := quota.Amounts{}
	for name, amounts := range claims {
		if l.placedClaims[claimRef{queue, namespace + "/" + name}] != nil {
			out.Add(amounts)
		}
	}
	return out
}

// claimRef is a claim named directly by pods of a queue.
type claimRef struct{ queue, claim string }

// claimCount is how many entries name a claim, and the charge the queue counts for it: the
// first entry's, kept until the last is gone, so that the sums never drift.
type claimCount struct {
	entries int
	charge  quota.Amounts
}

// addClaims adds (sign 1) or removes an entry's direct claims to a queue's sums, each once.
func addClaims(sums map[string]quota.Amounts, refs map[claimRef]*claimCount, queue, namespace string, claims map[string]quota.Amounts, sign int64) {
	for name, amounts := range claims {
		ref := claimRef{queue, namespace + "/" + name}
		c := refs[ref]
		if sign > 0 {
			if c == nil {
				c = &claimCount{charge: amounts.Clone()}
				refs[ref] = c
				AddSigned(sums, queue, c.charge, 1)
			} else if !equalAmounts(c.charge, amounts) {
				// The claim's charge changed (allocated, its class created): the newest counts.
				AddSigned(sums, queue, c.charge, -1)
				c.charge = amounts.Clone()
				AddSigned(sums, queue, c.charge, 1)
			}
			c.entries++
			continue
		}
		if c == nil {
			continue
		}
		if c.entries--; c.entries == 0 {
			AddSigned(sums, queue, c.charge, -1)
			delete(refs, ref)
		}
	}
}

func equalAmounts(a, b quota.Amounts) bool {
	if len(a) != len(b) {
		return false
	}
	for name, v := range a {
		if w, ok := b[name]; !ok || w != v {
			return false
		}
	}
	return true
}
