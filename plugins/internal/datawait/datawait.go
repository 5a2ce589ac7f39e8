// Package datawait marks the scheduling cycle of a pod that TephraIO keeps, for a while, off the
// nodes that do not cache its data (delay scheduling, docs/io.md). The nodes it refused had room
// or might have: the pod waits by choice, for room to free where its data is, so the PostFilter
// plugins evict nothing for it and record no wait of its queue's.
package datawait

import fwk "k8s.io/kube-scheduler/framework"

const key fwk.StateKey = "TephraIO/waitsForData"

type mark struct{}

func (mark) Clone() fwk.StateData { return mark{} }

// Mark marks the cycle.
func Mark(state fwk.CycleState) { state.Write(key, mark{}) }

// Marked says whether the cycle is marked (a nil state, of a call outside a cycle, is not).
func Marked(state fwk.CycleState) bool {
	if state == nil {
		return false
	}
	_, err := state.Read(key)
	return err == nil
}
