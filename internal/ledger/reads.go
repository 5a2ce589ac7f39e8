package ledger

import (
	"maps"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/quota"
)

// View is a consistent copy of what a scheduling decision reads from the ledger.
type View struct {
	Version                                    uint64
	Total                                      quota.Amounts
	Allocated, Terminating, Pending, Nominated map[string]quota.Amounts
	// Singles counts the pods without a PodGroup object by queue.
	Singles map[string]Singles
}

// View copies the ledger's sums. Its pending leaves out the pods of groups short of their
// minimum: they cannot run until the rest of their members exist, and counted as demand they
// would hold shares, and so capacity, idle (the pending of closed queues is left out by the
// queue plugin's snapshot, which knows the tree).
func (l *Ledger) View() View {
	l.mu.RLock()
	defer l.mu.RUnlock()
	v := View{
		Version:     l.version,
		Total:       l.capacity.Total().Clone(),
		Allocated:   CloneSums(l.allocated),
		Terminating: CloneSums(l.terminating),
		Pending:     CloneSums(l.pending),
		Nominated:   CloneSums(l.nominated),
		Singles:     maps.Clone(l.singles),
	}
	if l.MinMember == nil {
		return v
	}
	for group := range l.short {
		for queue, amounts := range l.groupPending[group] {
			AddSigned(v.Pending, queue, amounts, -1)
		}
	}
	return v
}

// Singles counts a queue's pods without a PodGroup object (with no group, or carrying their group
// of one), each a workload of its own: those placed, and those waiting (gated or not).
type Singles struct{ Placed, Waiting int32 }

// Version is the ledger's version, which changes with every change.
func (l *Ledger) Version() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.version
}

// GroupPlacement returns a group's placed requests and pod count.
func (l *Ledger) GroupPlacement(group string) (quota.Amounts, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.groupPlaced[group].Clone(), l.groupCount[group]
}

// GroupCounts returns the placed pod count of every group with pods placed in the queue.
func (l *Ledger) GroupCounts(queue string) map[string]int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[string]int{}
	for _, e := range l.pods {
		if e.Queue == queue && e.Group != "" && e.Placed() {
			out[e.Group]++
		}
	}
	return out
}

// PlacedIn returns copies of the entries placed in a queue.
func (l *Ledger) PlacedIn(queue string) []Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []Entry
	for _, e := range l.pods {
		if e.Queue == queue && e.Placed() {
			out = append(out, *e)
		}
	}
	return out
}

// Entry returns a copy of a pod's entry.
func (l *Ledger) Entry(uid types.UID) (Entry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.pods[uid]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// LowestPlacedPriority is the lowest priority of the pods placed in a queue and not terminating
// (the largest int32 when there are none).
func (l *Ledger) LowestPlacedPriority(queue string) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	lowest := int32(1<<31 - 1)
	for _, e := range l.pods {
		if e.Queue == queue && e.Placed() && !e.Terminating {
			lowest = min(lowest, e.Priority)
		}
	}
	return lowest
}
