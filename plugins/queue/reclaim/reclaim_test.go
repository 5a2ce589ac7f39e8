package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
)

// A preemptor whose victims are still going keeps its nomination for a while, even when its
// queue then seems to hold nothing it may evict (terminating victims are not counted): otherwise
// a pod of lower priority takes the room it made.
func TestPreemptorKeepsItsNominationWhileVictimsGo(t *testing.T) {
	l := ledger.New("default-scheduler")
	r := &run{Reclaimer: &Reclaimer{ledger: l}}
	pod := ledgertest.Pod("high", nil, "", 1)
	pod.Namespace, pod.Spec.SchedulerName, pod.Spec.Priority = "ns", "default-scheduler", ptr.To[int32](1000)
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

const gpu = ledgertest.GPU

// admitting stands for the plugin in tests whose queues nobody else waits for: the plugin's
// admission then admits whatever stays within the capabilities, and the tests set none.
type admitting struct{}

func (admitting) Admit(Queues, *quota.Node, quota.Amounts, map[string]quota.Amounts, bool) string {
	return ""
}

func (admitting) WithDemandFor(s Queues, _ string, _ quota.Amounts) Queues { return s }

func (admitting) NeedOf(*corev1.Pod, Workload) quota.Amounts { return nil }

func (admitting) QueueOf(*corev1.Pod) string { return "" }
