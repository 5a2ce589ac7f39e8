package elastic

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// priorityClass creates a PriorityClass for the test's jobs and deletes it when the test ends.
func (c *cluster) priorityClass(t *testing.T, name string, value int32) {
	t.Helper()
	framework.PriorityClass(t, c.env, name, value)
}

// Volcano's preemption scenario, translated: a low-priority job of 4 one-GPU pods (minimum 2)
// fills 4 GPUs; a high-priority job of 4 (minimum 2) arrives in the same queue. Evicting the low
// job's 2 elastic pods makes room for the high job's minimum. The high job's elastic members evict
// nobody (docs/elastic.md), and the low job's minimum is never broken: exactly 2 evictions, once.
func TestGangPreemptsOnlyWhatItsMinimumNeeds(t *testing.T) {
	c := newClusterOf(t, "minonly", 2)
	c.priorityClass(t, "e2e-minonly-high", 1000)
	c.priority = map[string]string{"high": "e2e-minonly-high"}
	c.job(t, "low", c.q1, 2, 4)
	c.waitBound(t, map[string]int{"low": 4}, time.Minute)
	lowest := c.watchMinimum("low")
	c.job(t, "high", c.q1, 2, 4)
	c.waitBound(t, map[string]int{"low": 2, "high": 2}, time.Minute)
	c.holdBound(t, map[string]int{"low": 2, "high": 2}, 10*time.Second)
	assert.Equal(t, 2, c.waitEvictions(t, 2), "exactly the 2 GPUs the high job's minimum needs were freed")
	assert.GreaterOrEqual(t, lowest()["low"], 2, "the low job's minimum was never broken")
}

// Two low-priority gangs of 2 (minimum 2) fill 4 GPUs; a high-priority gang of 2 arrives. One
// victim gang frees room for both members: exactly one gang is evicted, and the other keeps
// running.
func TestOneVictimGangForAWholeGang(t *testing.T) {
	c := newClusterOf(t, "onevictim", 2)
	c.priorityClass(t, "e2e-onevictim-high", 1000)
	c.priority = map[string]string{"p": "e2e-onevictim-high"}
	c.jobs(t, jobSpec{"v1", c.q1, 2, 2}, jobSpec{"v2", c.q1, 2, 2})
	c.waitBound(t, map[string]int{"v1": 2, "v2": 2}, time.Minute)
	c.job(t, "p", c.q1, 2, 2)
	c.waitBound(t, map[string]int{"p": 2}, time.Minute)
	c.holdBound(t, map[string]int{"p": 2}, 10*time.Second)
	got, err := c.bound(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, got["v1"]+got["v2"], "one victim gang keeps running (bound: %v)", got)
	assert.Equal(t, 2, c.waitEvictions(t, 2), "exactly one gang of 2 was evicted")
}
