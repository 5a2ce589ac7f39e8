package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/tephra-dev/tephra/internal/ledger"
)

// A preemptor whose victims are still going keeps its nomination for a while, even when its
// queue then seems to hold nothing it may evict (terminating victims are not counted): otherwise
// a pod of lower priority takes the room it made.
func TestPreemptorKeepsItsNominationWhileVictimsGo(t *testing.T) {
	l := ledger.New("default-scheduler")
	r := &reclaimRun{reclaimer: &reclaimer{q: &Queue{ledger: l}}}
	pod := schedulerPod("high", "ns", "default-scheduler", 1000)
	pod.Spec.NodeName = ""
	l.Observe(pod, func(string, string) string { return "" })
	assert.Empty(t, r.lastPreemptionPending(pod), "a pod that never preempted has nothing pending")

	l.Nominate(pod.UID, "node", time.Now())
	assert.Contains(t, r.lastPreemptionPending(pod), "is still taking effect")

	l.Nominate(pod.UID, "node", time.Now().Add(-victimsGrace))
	assert.Empty(t, r.lastPreemptionPending(pod), "after the grace the pod may give its nomination up")

	// A node held while it drains has no victims going: the pod may reclaim as soon as its
	// patience ends.
	l.Hold(pod.UID, "node", time.Now())
	assert.Empty(t, r.lastPreemptionPending(pod))
	e, _ := l.Entry(pod.UID)
	assert.True(t, e.Nominated, "the hold counts as the queue's, as a nomination does")
}
