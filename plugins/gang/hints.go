package gang

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
)

// eventsToRegister says which cluster events may let a pod this plugin rejected go on.
func (g *groupManager) eventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A new member may complete its group's minimum.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: g.unlessBackingOff(g.forgettingUnfit(g.isSchedulableAfterMemberAdded))},
		// A pod relabelled into another group, sub-group or task (upstream composites' pods,
		// which the adapter labels after their creation) is decided again: kube-scheduler reports
		// a pod's own update as TargetPod, never to the UnscheduledPod hint above.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodLabel}, QueueingHintFn: g.unlessBackingOff(isSchedulableAfterMembershipChanged)},
		// A pod that stops frees capacity a group may need.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: g.unlessBackingOff(g.forgettingUnfit(g.unlessHeldAtPreEnqueue(g.isSchedulableAfterPodDeleted)))},
		// A node added or grown adds capacity; so does a node relabelled or untainted into the
		// reach of a group whose members' affinity or tolerations left it out. A group's capacity
		// counts only the nodes its members may use, so without the label event a gang waiting for
		// a pool waited on when a node joined the pool (seen in queue/TestJobsInAQueueGoByDominantShare:
		// the elastic pods of another group, queued by NodeAffinity, took the room).
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: g.unlessBackingOff(g.forgettingUnfit(g.unlessHeldAtPreEnqueue(queueGroupMembers)))},
		// Devices published, or freed when a claim is deallocated (after its pod ended), add
		// capacity for groups whose members claim devices.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.unlessBackingOff(g.forgettingUnfit(g.unlessHeldAtPreEnqueue(queueDeviceMembers)))},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: g.unlessBackingOff(g.forgettingUnfit(g.unlessHeldAtPreEnqueue(isSchedulableAfterClaimFreed)))},
		// A pilot deleted before it found room lets another member try (preEnqueue).
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}, QueueingHintFn: g.unlessBackingOff(g.isSchedulableAfterPilotDeleted)},
		// A PodGroup created, or its minimum lowered, lets its waiting members go on.
		{Event: fwk.ClusterEvent{Resource: podGroupEvent, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.unlessBackingOff(g.forgettingUnfit(isSchedulableAfterPodGroupChange))},
	}, nil
}

// unlessBackingOff wraps every hint: no event queues a member of a group that waits out a backoff
// (after a failed attempt or an unready eviction). The backoff's timer brings the members back
// when it ends; queued before, each would only be refused again. What the event means for the
// group's capacity verdict still counts (forgettingUnfit, inside).
func (g *groupManager) unlessBackingOff(hint fwk.QueueingHintFn) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		h, err := hint(logger, pod, oldObj, newObj)
		if h != fwk.Queue {
			return h, err
		}
		if key, ok := groupOf(pod); ok && g.groups.backingOff(key, g.now()) {
			return fwk.QueueSkip, nil
		}
		return h, err
	}
}

// devicesChanged follows the devices the ResourceSlices offer: jobs' shares count them, and the
// groups found unfit are tried again. The scheduling queue's own ResourceSlice event may come
// before this plugin's view of the devices has the slice (two handlers of one informer, in no set
// order): a member tried then found the old devices, kept the verdict, and no event was left to
// bring it back (seen in the DRA e2e test: a gang waited for good for the device just added).
func (g *groupManager) devicesChanged(total quota.Amounts) {
	g.shares.setDevices(total)
	if !g.queueRunning.Load() {
		return
	}
	logger := klog.Background()
	for _, key := range g.groups.takeUnfit() {
		g.handle.Activate(logger, g.pendingMembers(key, ""))
	}
}

// forgettingUnfit wraps a queueing hint: when it queues a group's member, the event may let the
// group fit, so the group's kept capacity verdict is forgotten and its next member counts again.
func (g *groupManager) forgettingUnfit(hint fwk.QueueingHintFn) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		h, err := hint(logger, pod, oldObj, newObj)
		if key, ok := groupOf(pod); ok && h == fwk.Queue {
			g.groups.clearUnfit(key)
		}
		return h, err
	}
}

// unlessHeldAtPreEnqueue wraps the hint of a capacity event (a node added, a pod deleted): it
// skips the members that PreEnqueue holds for something capacity does not change, which would
// only be held again. Those are the members of a group short of members (a member's addition
// queues them), and the members that wait for their group's pilot (the pilot gets the event, and
// its PreFilter admits them). Without it, a scheduler starting with a backlog of gangs ran
// PreEnqueue for every held member on every node its informer added (886 406 times for 2944
// pods in 46 gangs of 64 on 1000 nodes, 8.4 s of CPU).
func (g *groupManager) unlessHeldAtPreEnqueue(hint fwk.QueueingHintFn) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		if key, ok := groupOf(pod); ok {
			held := false
			g.groups.with(key, func(s *groupState) {
				held = s.short || (s.pilot != "" && s.pilot != pod.UID && !s.admitted)
			})
			if held {
				return fwk.QueueSkip, nil
			}
		}
		return hint(logger, pod, oldObj, newObj)
	}
}

// isSchedulableAfterMemberAdded queues a group's pods when the added member completes the
// group's minimum (or a task's). Members added before that cannot help, nor can members beyond
// it: queueing on every addition would retry a big group's pods once per member. An addition
// completes the minimum when the count reaches it exactly (a replacement of a lost member), or
// when it is the first seen with the minimum present since a member found it short: the
// informer's store may already hold pods whose additions the queue has not seen yet, so the exact
// count can be passed unseen.
func (g *groupManager) isSchedulableAfterMemberAdded(logger klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T", newObj)
	}
	mine, ok := groupOf(pod)
	theirs, ok2 := groupOf(added)
	if !ok || !ok2 || mine != theirs {
		return fwk.QueueSkip, nil
	}
	memo := &g.memberAdded
	memo.Lock()
	defer memo.Unlock()
	if memo.group == mine && memo.pod == added.UID && memo.rv == added.ResourceVersion {
		return memo.hint, nil
	}
	hint := g.memberAddedHint(mine, added)
	memo.group, memo.pod, memo.rv, memo.hint = mine, added.UID, added.ResourceVersion, hint
	return hint, nil
}

// memberCreated brings back the members of a group that PreEnqueue holds for want of members when
// a created pod completes its minimum. kube-scheduler asks the queueing hints about a created
// pod only with its GenericWorkload gate on (isSchedulableAfterMemberAdded is not called
// otherwise): without this, the held members came back only when tephra-controllers next wrote
// the PodGroup's status, and a group was not tried whole the first time but its last member
// alone, the others following at no fixed time.
func (g *groupManager) memberCreated(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	g.reportMissingGroup(pod)
	if !g.queueRunning.Load() || g.inPodGroupCycles(pod) {
		// kube-scheduler's GangScheduling, not PreEnqueue here, holds the members of a group its
		// pod-group cycles schedule until they exist: none waits here for members. Counting the
		// group's members on each one's creation cost gangs of 1000 a million pod lookups.
		return
	}
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	queued := false
	g.groups.with(key, func(s *groupState) { queued = s.minimumQueued })
	if queued {
		return // no member found the minimum short since it was queued: none waits for members
	}
	if g.memberAddedHint(key, pod) == fwk.Queue {
		g.handle.Activate(klog.Background(), g.pendingMembers(key, pod.UID))
	}
}

// memberAddedHint decides isSchedulableAfterMemberAdded for one added member of group key.
func (g *groupManager) memberAddedHint(key groupKey, added *corev1.Pod) fwk.QueueingHint {
	pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return fwk.QueueSkip // the PodGroup's own creation will queue the pod
	}
	count := g.countMembers(key, pg, added)
	if count.shortOf(pg) != "" {
		return fwk.QueueSkip
	}
	first := false
	g.groups.with(key, func(s *groupState) { first, s.minimumQueued = !s.minimumQueued, true })
	task := v1alpha1.TaskOf(added)
	if first || count.existing == int(pg.Spec.MinMember) || (pg.Spec.MinTaskMember[task] > 0 && count.existingByTask[task] == int(pg.Spec.MinTaskMember[task])) {
		return fwk.Queue
	}
	return fwk.QueueSkip
}

func (g *groupManager) isSchedulableAfterPodDeleted(logger klog.Logger, pod *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if _, ok := groupOf(pod); !ok {
		return fwk.QueueSkip, nil
	}
	deleted, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil // a tombstone: assume it freed something
	}
	if len(resourcehelper.PodRequests(deleted, resourcehelper.PodResourcesOptions{})) == 0 {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// isSchedulableAfterMembershipChanged queues a pod whose own labels moved it to another group,
// sub-group or task: PreEnqueue held it for the group it named before (PodGroupNotFound, or short
// of members), and no other event would bring it back.
func isSchedulableAfterMembershipChanged(_ klog.Logger, _ *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	old, ok := oldObj.(*corev1.Pod)
	updated, ok2 := newObj.(*corev1.Pod)
	if !ok || !ok2 {
		return fwk.Queue, nil
	}
	oldGroup, _ := v1alpha1.PodGroupNameOf(old)
	newGroup, _ := v1alpha1.PodGroupNameOf(updated)
	if oldGroup != newGroup || v1alpha1.SubGroupOf(old) != v1alpha1.SubGroupOf(updated) || v1alpha1.TaskOf(old) != v1alpha1.TaskOf(updated) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterPilotDeleted queues a group's members when the member they wait for at
// PreEnqueue is deleted.
func (g *groupManager) isSchedulableAfterPilotDeleted(_ klog.Logger, pod *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	key, ok := groupOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	deleted, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil // a tombstone: it may have been the pilot
	}
	pilot := false
	g.groups.with(key, func(s *groupState) { pilot = s.pilot == deleted.UID })
	if pilot {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func queueGroupMembers(_ klog.Logger, pod *corev1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, ok := groupOf(pod); ok {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// queueDeviceMembers queues the members of groups that claim devices.
func queueDeviceMembers(_ klog.Logger, pod *corev1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, ok := groupOf(pod); ok && devices.UsesDevices(pod) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterClaimFreed queues the members of groups that claim devices when a claim's
// devices are freed: its allocation removed, or the claim deleted allocated. The scheduler's own
// allocations, which update claims far more often, take nothing away from what is free.
func isSchedulableAfterClaimFreed(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	old, _ := oldObj.(*resourceapi.ResourceClaim)
	if old == nil || old.Status.Allocation == nil {
		return fwk.QueueSkip, nil
	}
	if claim, ok := newObj.(*resourceapi.ResourceClaim); ok && claim.Status.Allocation != nil {
		return fwk.QueueSkip, nil
	}
	return queueDeviceMembers(logger, pod, oldObj, newObj)
}

// isSchedulableAfterPodGroupChange queues a group's members when their PodGroup is created or its
// spec or annotations change (its minimum lowered, its SLA set). Not when only its status does:
// tephra-controllers derives the status from the members' PodScheduled conditions, which the
// scheduler writes when it refuses a member, so each refusal whose message changed (a backoff
// or a grace period counting down) came back as a PodGroup update that queued the members for
// another refusal. The status holds nothing that lets a member go on.
func isSchedulableAfterPodGroupChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, ok := groupOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, nil
	}
	if obj.GetNamespace() != key.namespace || obj.GetName() != key.name {
		return fwk.QueueSkip, nil
	}
	if old, err := meta.Accessor(oldObj); err == nil && oldObj != nil && statusOnly(old, obj) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// statusOnly says whether an update of a PodGroup changed nothing but its status and bookkeeping:
// with the status subresource, the apiserver bumps metadata.generation on every change of the
// spec, and on nothing else but the metadata.
func statusOnly(old, obj metav1.Object) bool {
	return obj.GetGeneration() != 0 && old.GetGeneration() == obj.GetGeneration() && maps.Equal(old.GetAnnotations(), obj.GetAnnotations())
}
