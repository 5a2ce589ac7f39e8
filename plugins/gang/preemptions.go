package gang

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// What TephraGang learns of TephraQueue's preemptions for a group's members: TephraQueue tells
// it, in the cycle that evicts or finds room, through setup.EvictingFor.

// evictingFor admits the group of a member that TephraQueue's PostFilter evicts pods for
// (reclaim or preemption): its other members need evictions of their own, and get them only by
// being tried. TephraQueue evicts for a gang's member only when the free capacity and what may be
// evicted cover the rest of the minimum, so the evictions of any member, the pilot or not, show
// that room can be made for the group. It is told in the cycle that evicts (setup.EvictingFor).
// The member's nomination, as the pod informer shows it later, is no signal: the evictions are
// often made in the cycle that found the group unfit, before any member is its pilot, and a
// nomination that came before its pod became the pilot was ignored; that pilot, allowed one
// eviction per victimsGrace, then freed one GPU per 10 s while its siblings waited at PreEnqueue.
func (g *groupManager) evictingFor(ctx context.Context, pod *corev1.Pod) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	now := g.now()
	g.groups.with(key, func(s *groupState) {
		for uid, at := range s.roomFor {
			if now.Sub(at) >= roomGrace {
				delete(s.roomFor, uid)
			}
		}
		s.roomFor[pod.UID] = now
	})
	if !g.queueRunning.Load() {
		return
	}
	held := false
	g.groups.with(key, func(s *groupState) { held = s.piloted && !s.admitted })
	if held {
		g.admit(ctx, key, pod)
	}
}

// roomGrace is how long a member TephraQueue made room for counts toward its group's minimum
// without being placed: the room its victims leave is its, as TephraQueue's own nominations
// count for as long (nominationGrace).
const roomGrace = 30 * time.Second

// withRoomComing counts the group's members, not placed, that TephraQueue made room for within
// roomGrace: with the placed ones they may make up the minimum, which then only waits for its
// victims to go. Called under the group's lock.
func (g *groupManager) withRoomComing(s *groupState, key groupKey, now time.Time) int {
	members, _ := g.members.ByIndex(podGroupIndex, key.String())
	n := 0
	for _, obj := range members {
		m := obj.(*corev1.Pod)
		at, ok := s.roomFor[m.UID]
		if !ok || m.Spec.NodeName != "" || m.DeletionTimestamp != nil || now.Sub(at) >= roomGrace {
			continue
		}
		if _, assumed := s.assumed[m.UID]; assumed {
			continue
		}
		n++
	}
	return n
}
