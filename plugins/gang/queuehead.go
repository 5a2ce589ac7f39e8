package gang

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Queue-head reservations (the arg queueHeadReservations): the group at the head of its queue
// whose minimum cannot fit now gets nodes reserved, as a group past its SLA does, so that smaller
// workloads arriving behind it stop taking every GPU that frees up before it has enough of them.
// What the reservation keeps idle is open to backfill: workloads whose runtime estimate ends
// before the group could start (backfill.go).
//
// A queue has at most one such reservation: when another group comes to head the queue (one of a
// higher priority, say), the reservation of the one before is given back before the new head
// reserves. It ends like any other: when the group's minimum runs, when its queue turns it away,
// or when it waits no more.

// reserveAtQueueHead returns the nodes it reserved for the group, whose minimum (need) cannot fit
// now, when the group heads its queue; nil when it does not, or the nodes it may use could never
// hold the minimum.
func (g *groupManager) reserveAtQueueHead(ctx context.Context, key groupKey, pg *v1alpha1.PodGroup, member *corev1.Pod, need corev1.ResourceList, nodes []fwk.NodeInfo) []string {
	if !*g.args.QueueHeadReservations || len(need) == 0 {
		return nil
	}
	queue := v1alpha1.QueueOfPod(member, pg.Spec.Queue)
	if ahead := g.aheadInQueue(key, queue, corev1helpers.PodPriority(member), pg.CreationTimestamp.Time); ahead != "" {
		return nil
	}
	for _, other := range g.groups.queueHeadReservations(queue) {
		if other != key {
			klog.FromContext(ctx).V(2).Info("Pod group heads its queue no more: its reservation goes to the group now at the head", "podGroup", other.String(), "queue", queue, "head", key.String())
			g.releaseReservation(klog.FromContext(ctx), other)
		}
	}
	return g.reserveNodes(ctx, key, pg, member, need, nodes, reservation{queueHead: queue},
		fmt.Sprintf("the group heads queue %q and its minimum cannot fit now", queue))
}

// aheadInQueue names a group of the same queue that goes before the group (of the given priority
// and creation time) and still waits for its minimum; "" when the group heads its queue. Groups go
// by priority, then by creation, then by name, as QueueSort takes them. A group short of members
// (its Job suspended, say) heads nothing.
func (g *groupManager) aheadInQueue(key groupKey, queue string, priority int32, created time.Time) string {
	for _, other := range g.groups.waitingForMinimum(key) {
		if other.priority < priority || (other.priority == priority && !goesBefore(other.created, other.key, created, key)) {
			continue
		}
		pg, err := g.podGroups.PodGroups(other.key.namespace).Get(other.key.name)
		if err != nil || queueOfGroup(pg) != queue {
			continue
		}
		count := g.countMembers(other.key, pg, nil)
		if count.placedMeets(pg) || count.shortOf(pg) != "" {
			continue // placed meanwhile, or short of members: it waits for nothing here
		}
		return other.key.String()
	}
	return ""
}

// queueOfGroup is the queue of a group's members (v1alpha1.QueueOfPod): its spec.queue, or the
// default queue.
func queueOfGroup(pg *v1alpha1.PodGroup) string {
	if pg.Spec.Queue == "" {
		return v1alpha1.DefaultQueue
	}
	return pg.Spec.Queue
}

func goesBefore(aCreated time.Time, a groupKey, bCreated time.Time, b groupKey) bool {
	if !aCreated.Equal(bCreated) {
		return aCreated.Before(bCreated)
	}
	return a.String() < b.String()
}
