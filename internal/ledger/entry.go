package ledger

import (
	"time"

	"github.com/tephra-dev/tephra/internal/quota"
)

// Entry is what the ledger knows of one pod that counts in a queue.
type Entry struct {
	Queue string // "" while the pod's PodGroup is unknown: it counts nowhere yet
	Group string // namespace/name of its PodGroup, "" for none
	// Carried: the pod carries its group of one (quota.PodCharge), which is a workload of one pod
	// as a pod without a group is, and is counted with those (Singles).
	Carried  bool
	Requests quota.Amounts
	// direct and shared are parts of requests, from the pod's ResourceClaims (quota.PodDevices):
	// claims it names directly, which a gang's members may share, and claims other running pods
	// use too, which its eviction would not free. claims are the direct ones by "namespace/name":
	// a queue counts each once, however many of its pods name it (claimRefs).
	Direct, Shared quota.Amounts
	Claims         map[string]quota.Amounts
	Namespace      string
	Name           string
	// ResourceVersion is the version of the pod recorded (Refresh records only that one again).
	ResourceVersion string
	Priority        int32
	// bound: the informer shows it on a node; assumed: this scheduler reserved it.
	Bound, Assumed bool
	Terminating    bool
	Nominated      bool
	// gated: the pod has scheduling gates; it cannot be scheduled, so it is no demand.
	Gated bool
	// nominatedAt is when PostFilter nominated the pod; until the informer catches up (or a
	// while has passed), the nomination counts even if the pod object does not show it yet.
	NominatedAt   time.Time
	NominatedNode string
	// holding: the nomination holds a node that drains for the pod
	// (plugins/queue/reclaim/drain.go); no victims of its are going.
	Holding bool
}

// NominationGrace is how long a nomination made by PostFilter counts without the informer
// showing it.
const NominationGrace = 30 * time.Second

func (e *Entry) Placed() bool { return e.Bound || e.Assumed }

// Charge is the entry as quota.ChargeOf charged its pod, placed also when this scheduler assumed
// it: its sums follow the same rules as the Queue controller's count.
func (e *Entry) Charge() quota.PodCharge {
	c := quota.PodCharge{Queue: e.Queue, Group: e.Group, Terminating: e.Terminating, Gated: e.Gated}
	switch {
	case e.Queue == "":
		c.Standing = quota.Unresolved
	case e.Placed():
		c.Standing = quota.Placed
	case e.Terminating:
		c.Standing = quota.Leaving
	default:
		c.Standing = quota.Waiting
	}
	return c
}

// Arranged says whether the pod is placed, or nominated to room a preemption of the last
// NominationGrace freed for it: either way, its gang's minimum counts it.
func (e *Entry) Arranged() bool {
	return e.Placed() || (e.Nominated && !e.NominatedAt.IsZero() && time.Since(e.NominatedAt) < NominationGrace)
}
