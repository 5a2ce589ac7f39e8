package reclaim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// kube-scheduler tries a gang's members one by one, and each member's PostFilter preempts for
// that member. The gang must still evict for its minimum as a whole, and only once: the two
// checks here keep a member from evicting for room the gang has already arranged.
//
//   - minimumArranged: once the rest of the minimum is placed or nominated for room its victims
//     are leaving, the member is above the minimum and, like every elastic pod, evicts nobody.
//     Without it a Job of 4 with a minimum of 2 evicted for all 4 of its pods, and its last two
//     broke the victim's minimum whole.
//   - roomComing: a node that has room for the member once the pods on their way out are gone
//     (victims evicted for the member's gang a moment ago, or terminating) is nominated without
//     evicting anybody. kube-scheduler's evaluator takes no candidate node without victims, so
//     without it the second member of a gang took a second victim gang on another node, when the
//     first victim gang had freed room for both.

// minimumArranged says whether the pod's group has the rest of its minimum arranged: placed, or
// nominated by a preemption of this scheduler that may still be taking effect.
func (r *Reclaimer) minimumArranged(pod *corev1.Pod, w Workload) bool {
	if w.PodGroup == nil {
		return false
	}
	objs, err := r.members.ByIndex(setup.PodGroupIndex, w.Group)
	if err != nil {
		return false
	}
	arranged := 0
	for _, obj := range objs {
		m := obj.(*corev1.Pod)
		if m.UID == pod.UID || m.DeletionTimestamp != nil {
			continue
		}
		e, ok := r.ledger.Entry(m.UID)
		if !ok || e.Terminating {
			continue
		}
		if e.Arranged() {
			arranged++
		}
	}
	return arranged >= int(w.PodGroup.Spec.MinMember)
}

// roomComing returns a node the pod fits on once the pods leaving it are gone, counting the pods
// nominated to it before this one ("" if there is none). The filters run only on nodes that some
// pod is leaving, and the cycle state is copied only then: while nothing is being evicted, it only
// reads the nodes' pods.
func (r *run) roomComing(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (string, error) {
	if r.admit(r.leaf, r.need, nil, true) != "" {
		return "", nil
	}
	infos, err := r.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "", err
	}
	var state fwk.CycleState
	for _, info := range infos {
		node := info.Node()
		if node == nil || m.Get(node.Name).Code() == fwk.UnschedulableAndUnresolvable {
			continue
		}
		var leaving []*corev1.Pod
		for _, pi := range info.GetPods() {
			if p := pi.GetPod(); p.DeletionTimestamp != nil || r.going[p.UID] {
				leaving = append(leaving, p)
			}
		}
		if len(leaving) == 0 {
			continue
		}
		if state == nil {
			state = cs.Clone()
			if r.devices != nil {
				// DynamicResources' Filter sees the devices allocated when the cycle began: the
				// allocator is asked with the leaving pods' devices given back instead.
				skipDRAFilter(state)
			}
		}
		clone := info.Snapshot()
		for _, p := range leaving {
			if err := clone.RemovePod(klog.FromContext(ctx), p); err != nil {
				return "", err
			}
		}
		if !r.handle.RunFilterPluginsWithNominatedPods(ctx, state, pod, clone).IsSuccess() {
			continue
		}
		if r.devices != nil {
			removed := map[types.UID]*corev1.Pod{}
			for _, p := range leaving {
				removed[p.UID] = p
			}
			if ok, err := r.devices.fits(ctx, node, removed); err != nil || !ok {
				continue
			}
		}
		return node.Name, nil
	}
	return "", nil
}
