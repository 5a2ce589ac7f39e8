package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
)

// A pod spared victims until a time already past is not woken at once: woken, it met the same
// refusal and was woken again, some 45 times a second on the replayed Philly day (d861b1d), when
// patience gave the time a victim could be reclaimed alone rather than with those taken before it.
func TestASparedJobWhoseTimeHasPassedWakesNobody(t *testing.T) {
	now := time.Now()
	q := &Reclaimer{}
	spared := &protection{}
	pod := ledgertest.Pod("waiting", nil, "", 1)
	victim := &unit{pods: []*corev1.Pod{ledgertest.Pod("v", nil, "n1", 1)}, kind: kindReclaim}

	spared.spare(victim, now.Add(-time.Second), spareCost)
	note := q.sparedJobsNote(klog.Background(), spared, []*corev1.Pod{pod}, now)
	assert.Contains(t, note, "1 job(s) it could reclaim had run longer, for their size, than it has waited (reclaim patience)")
	assert.NotContains(t, note, "may be reclaimed in")
	assert.Empty(t, q.wakers.timers, "no wake-up for a time past")

	spared = &protection{}
	spared.spare(victim, now.Add(time.Minute), spareCost)
	note = q.sparedJobsNote(klog.Background(), spared, []*corev1.Pod{pod}, now)
	assert.Contains(t, note, "the first may be reclaimed in 1m0s")
	assert.Len(t, q.wakers.timers, 1)
	q.wakers.timers[pod.UID].timer.Stop()
}
