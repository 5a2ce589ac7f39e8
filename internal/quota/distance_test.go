package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func cpu(milli int64) Amounts { return Amounts{corev1.ResourceCPU: milli} }

// Volcano's "Reclaim Case 10": 4 one-CPU nodes, default and q2 hold 2 pods each (deserved 1.5),
// q3 asks for 1 (deserved 1). Taking one pod from default (or q2) for q3 converges; moving it
// back, or on to q2, does not.
func TestMoveConvergesWithWholePods(t *testing.T) {
	total := cpu(4000)
	deserved := map[string]Amounts{"default": cpu(1500), "q2": cpu(1500), "q3": cpu(1000)}
	res := []corev1.ResourceName{corev1.ResourceCPU}

	alloc := map[string]Amounts{"default": cpu(2000), "q2": cpu(2000), "q3": cpu(0)}
	assert.InDelta(t, 0.5, Distance(alloc, deserved, total, res, []string{"default", "q2", "q3"}), 1e-9)
	assert.True(t, MoveConverges(alloc, deserved, total, res, map[string]Amounts{"default": cpu(1000)}, "q3", cpu(1000)))

	after := map[string]Amounts{"default": cpu(1000), "q2": cpu(2000), "q3": cpu(1000)}
	assert.InDelta(t, 0.25, Distance(after, deserved, total, res, []string{"default", "q2", "q3"}), 1e-9)
	assert.False(t, MoveConverges(after, deserved, total, res, map[string]Amounts{"q3": cpu(1000)}, "default", cpu(1000)), "the reverse move")
	assert.False(t, MoveConverges(after, deserved, total, res, map[string]Amounts{"q2": cpu(1000)}, "default", cpu(1000)), "a sideways move that only swaps who is over")
	assert.False(t, MoveConverges(after, deserved, total, res, map[string]Amounts{"q2": cpu(1000)}, "q3", cpu(1000)), "q3 is at its share")
}

// A victim much bigger than the preemptor's pod does not converge: the victim's queue would fall
// further below its share than the preemptor's queue rises towards its own.
func TestMoveConvergesRefusesOversizedVictims(t *testing.T) {
	total := cpu(8000)
	deserved := map[string]Amounts{"big": cpu(4000), "small": cpu(4000)}
	res := []corev1.ResourceName{corev1.ResourceCPU}
	alloc := map[string]Amounts{"big": cpu(5000), "small": cpu(3000)}
	assert.True(t, MoveConverges(alloc, deserved, total, res, map[string]Amounts{"big": cpu(1000)}, "small", cpu(1000)))
	assert.False(t, MoveConverges(alloc, deserved, total, res, map[string]Amounts{"big": cpu(4000)}, "small", cpu(1000)))
}
