// Package admission carries TephraQueue's word on a pod to the other Tephra plugins of the same
// scheduling cycle. kube-scheduler runs every PreFilter plugin when one answers Unschedulable (so
// that preemption may find room later in the cycle), so TephraGang's PreFilter runs for a member
// that its queue has just turned away. Such a member must not make or keep a reservation: nodes
// held for a group that its queue will not admit now hold the cluster idle for nobody, and the
// pods they keep off may be the very ones the queue waits to admit (make replay found the two
// rules waiting on each other).
package admission

import fwk "k8s.io/kube-scheduler/framework"

const refusedKey fwk.StateKey = "TephraQueue/refused"

type refused struct{ reason string }

func (r *refused) Clone() fwk.StateData { return r }

// MarkRefused records, in the pod's cycle, that its queue turned it away, and why.
func MarkRefused(state fwk.CycleState, reason string) {
	if state != nil {
		state.Write(refusedKey, &refused{reason})
	}
}

// Refused says whether the pod's queue turned it away in this cycle, and why.
func Refused(state fwk.CycleState) (string, bool) {
	if state == nil {
		return "", false
	}
	data, err := state.Read(refusedKey)
	if err != nil {
		return "", false
	}
	r, ok := data.(*refused)
	return r.reason, ok
}
