package ledger

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/quota"
)

// Waiting is a queue's pending workload that a share hold keeps room for: a pod of its
// own or a gang, named for messages, and one of its pending pods (the gang's first found).
type Waiting struct {
	Name string
	UID  types.UID
}

// PendingFits returns a pending workload of the queue whose next step fits in room and, when
// placeable is not nil, on the nodes as placeable says (none: the zero value): a pod of its
// own, or for a gang whose minimum is not placed, the pod's requests times the members its
// minimum still misses, less those nominated to room their preemption freed (the caller counts
// that room as the queue's already). Gated pods and the groups short of members are no demand
// (View).
func (l *Ledger) PendingFits(queue string, room quota.Amounts, placeable func(e *Entry, count int) bool) Waiting {
	return PendingFitsInOrder[unranked](l, queue, room, placeable, nil)
}

// Rank is where a waiting workload stands in its queue's order, among those of its priority.
type Rank[R any] interface {
	Before(R) bool
}

// unranked orders no workload before another.
type unranked struct{}

func (unranked) Before(unranked) bool { return false }

// PendingFitsInOrder is PendingFits, trying the workloads in the order rank gives (nil: by name
// alone, after priority).
func PendingFitsInOrder[R Rank[R]](l *Ledger, queue string, room quota.Amounts, placeable func(e *Entry, count int) bool, rank func(e *Entry) R) Waiting {
	l.mu.RLock()
	defer l.mu.RUnlock()
	// The workloads that fit the room are tried on the nodes in the order the queue runs them
	// (highest priority, then as the active queue orders a priority's pods, rank), so that the
	// hold names the workload the other queue runs next, not one it leaves waiting; and then by
	// name, so that a held pod is told of the same workload attempt after attempt: the scheduler
	// writes a pod's status only when its message changes, and a message naming whichever
	// workload the map gave first wrote it on every attempt.
	type candidate struct {
		e     *Entry
		uid   types.UID
		count int
		name  string
		rank  R
	}
	var candidates []candidate
	tried := map[string]bool{} // a group's members are one workload
	for uid, e := range l.pods {
		if e.Queue != queue || e.Placed() || e.Terminating || e.Gated || tried[e.Group] {
			continue
		}
		if e.Group != "" {
			tried[e.Group] = true
		}
		count, ok := l.nextStepFits(e, room)
		if !ok {
			continue
		}
		name := "pod " + e.Namespace + "/" + e.Name
		if e.Group != "" {
			name = "pod group " + e.Group
		}
		c := candidate{e: e, uid: uid, count: count, name: name}
		if rank != nil {
			c.rank = rank(e)
		}
		candidates = append(candidates, c)
	}
	slices.SortFunc(candidates, func(a, b candidate) int {
		if a.e.Priority != b.e.Priority {
			return cmp.Compare(b.e.Priority, a.e.Priority)
		}
		if a.rank.Before(b.rank) {
			return -1
		}
		if b.rank.Before(a.rank) {
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	for _, c := range candidates {
		if placeable == nil || placeable(c.e, c.count) {
			return Waiting{Name: c.name, UID: c.uid}
		}
	}
	return Waiting{}
}

// StillFits says whether a workload PendingFits returned for the queue still waits there and its
// next step still fits in room (the nodes aside: a share hold checks them when it is decided
// again, in PreFilter).
func (l *Ledger) StillFits(w Waiting, queue string, room quota.Amounts) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.pods[w.UID]
	if !ok || e.Queue != queue {
		return false
	}
	_, fits := l.nextStepFits(e, room)
	return fits
}

// nextStepFits says whether a pending entry is demand whose next step fits in room, and how many
// pods like it that step places: one, or the members its gang's minimum still misses. Called
// under the read lock.
func (l *Ledger) nextStepFits(e *Entry, room quota.Amounts) (int, bool) {
	if e.Placed() || e.Terminating || e.Gated {
		return 0, false
	}
	unit, count := e.Requests, 1
	if e.Group != "" {
		if _, short := l.short[e.Group]; short {
			return 0, false
		}
		if l.MinMember != nil {
			minimum := l.MinMember(e.Group)
			missing := minimum - l.groupCount[e.Group] - l.groupNominated[e.Group]
			if minimum > 0 && missing <= 0 {
				// Its minimum is placed: what waits is above it, and only takes what is free
				// once other groups' minimums are placed (TephraGang's ElasticWaiting), so a
				// queue held for it and it would wait for each other beside the idle room.
				return 0, false
			}
			if missing > 1 {
				count = missing
				unit = e.Requests.Clone()
				for name, v := range unit {
					unit[name] = v * int64(missing)
				}
			}
		}
	}
	return count, fitsIn(unit, room, l.capacity.Total())
}

// fitsIn says whether unit fits in room, in every resource the cluster has.
func fitsIn(unit, room, total quota.Amounts) bool {
	for name, v := range unit {
		if v > 0 && total[name] > 0 && v > room[name] {
			return false
		}
	}
	return true
}
