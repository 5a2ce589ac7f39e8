package gang

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// pilotedFromStart is the smallest minimum for which a group's first attempt already has a
// pilot. A minimum that cannot fit otherwise costs every member a scheduling cycle, a status
// write and a FailedScheduling event, which the scheduler's event cache keeps for six minutes:
// for two gangs of 1001 that never fit (make bench GI), 2002 failures in the first 30 s, plain
// pods waiting behind them, and a fifth of the scheduler's memory. Below it, members go to the
// active queue whole: a backlog of small gangs held for their pilots fills the scheduling
// queue's unschedulable pods, which the queue walks on every bind (see groupState.piloted).
const pilotedFromStart = 100

// pilotLocked makes pod its group's pilot unless the group needs none (see groupState.piloted),
// has a pending one or was admitted, and returns the name of the pilot pod waits for ("" when it
// may go on). A pod with scheduling gates is never the pilot: the SchedulingGates plugin holds it,
// and the others would wait for a pilot that is not tried. Called under the group's lock.
func (g *groupManager) pilotLocked(s *groupState, pod *corev1.Pod) string {
	if !s.piloted || s.admitted || s.pilot == pod.UID || len(pod.Spec.SchedulingGates) > 0 || (g.podGroupCycles && pod.Spec.SchedulingGroup != nil) {
		return ""
	}
	if s.pilot != "" {
		if obj, exists, _ := g.members.GetByKey(s.pilotName); exists {
			if p := obj.(*corev1.Pod); p.UID == s.pilot && p.Spec.NodeName == "" && p.DeletionTimestamp == nil && len(p.Spec.SchedulingGates) == 0 {
				_, name, _ := strings.Cut(s.pilotName, "/")
				return name
			}
		}
	}
	s.pilot, s.pilotName = pod.UID, pod.Namespace+"/"+pod.Name
	return ""
}

// holdForPilot sends a refused member of a group that now waits for a pilot back through
// PreEnqueue, which holds it until the pilot finds room. Refused, it would wait among the
// scheduling queue's unschedulable pods for an event, and the queue asks each such pod's plugins
// about every pod bound meanwhile; held, only about the events TephraGang registers, none of them
// a bind. (In GI, with two never-fitting gangs of 1001 refused, that asking was half of the
// scheduler's CPU.)
func (g *groupManager) holdForPilot(ctx context.Context, key groupKey, pod *corev1.Pod) {
	hold := false
	g.groups.with(key, func(s *groupState) {
		hold = s.piloted && !s.admitted && s.pilot != pod.UID && len(pod.Spec.SchedulingGates) == 0
	})
	if hold && g.queueRunning.Load() {
		g.handle.Activate(klog.FromContext(ctx), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
	}
}
