package reclaim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/internal/quota"
)

// drainUnit is a 1-GPU job of another queue that started ran ago.
func drainUnit(now time.Time, ran time.Duration) *unit {
	pod := &corev1.Pod{Status: corev1.PodStatus{StartTime: &metav1.Time{Time: now.Add(-ran)}}}
	return &unit{pods: []*corev1.Pod{pod}, kind: kindReclaim, freed: quota.Amounts{"nvidia.com/gpu": 1}}
}

// A node is drainable when the units patience spared make room on top of those chosen, and only
// then; the node held is the one whose victims would throw away least, then the one with fewest.
func TestDrainHoldsTheNodeWhoseVictimsLoseLeast(t *testing.T) {
	now := time.Now()
	p := &patience{on: true, since: now, size: 0.5, now: now, total: quota.Amounts{"nvidia.com/gpu": 8}, names: []corev1.ResourceName{"nvidia.com/gpu"}}
	r := &run{Reclaimer: &Reclaimer{}, drainable: map[string]drainOption{}}
	// fitsAfter makes a node fit once n units are taken.
	fitsAfter := func(n int) (func(*unit) (bool, error), func() bool) {
		taken := 0
		return func(*unit) (bool, error) { taken++; return true, nil }, func() bool { return taken >= n }
	}

	take, fits := fitsAfter(2)
	require.NoError(t, r.noteDrainable("old", nil, []*unit{drainUnit(now, 2*time.Hour), drainUnit(now, 2*time.Hour)}, p, take, fits))
	take, fits = fitsAfter(2)
	require.NoError(t, r.noteDrainable("young", nil, []*unit{drainUnit(now, time.Hour), drainUnit(now, time.Hour), drainUnit(now, time.Hour)}, p, take, fits))
	take, fits = fitsAfter(3)
	require.NoError(t, r.noteDrainable("short", nil, []*unit{drainUnit(now, time.Minute), drainUnit(now, time.Minute)}, p, take, fits))
	assert.NotContains(t, r.drainable, "short", "the spared units there do not make room")
	assert.Equal(t, 2, r.drainable["young"].units, "only the units needed count")
	target, _ := r.drainTarget()
	assert.Equal(t, "young", target)

	take, fits = fitsAfter(1)
	require.NoError(t, r.noteDrainable("equal", []*unit{drainUnit(now, 30*time.Minute)}, []*unit{drainUnit(now, 90*time.Minute)}, p, take, fits))
	assert.Equal(t, r.drainable["young"].lost, r.drainable["equal"].lost, "the chosen units' work counts too")
	target, _ = r.drainTarget()
	assert.Equal(t, "equal", target, "as much lost on either: the name decides")

	// A unit reclaim may not take (its queue would fall below its share) is no part of a drain.
	refused := drainUnit(now, time.Minute)
	taken := 0
	take = func(u *unit) (bool, error) {
		if u == refused {
			return false, nil
		}
		taken++
		return true, nil
	}
	require.NoError(t, r.noteDrainable("refused", nil, []*unit{refused, drainUnit(now, time.Minute)}, p, take, func() bool { return taken >= 2 }))
	assert.NotContains(t, r.drainable, "refused")

	none, _ := (&run{Reclaimer: &Reclaimer{}, drainable: map[string]drainOption{}}).drainTarget()
	assert.Empty(t, none)
}
