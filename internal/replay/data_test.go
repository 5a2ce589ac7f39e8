package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A job pulls its dataset unless every node of its minimum caches it; a node keeps what jobs
// read there, the least recently read evicted first, and nothing larger than its cache.
func TestNodeCachesKeepWhatJobsReadLeastRecentFirstOut(t *testing.T) {
	c := newNodeCaches(DataOptions{BandwidthGBps: 2, NodeCacheGB: 300})
	assert.Equal(t, 50.0, c.transfer("a", 100, []string{"n1"}), "100 GB at 2 GB/s")
	assert.Zero(t, c.transfer("", 100, []string{"n1"}), "no dataset, nothing to pull")

	added, evicted := c.keep("n1", "a", 100)
	assert.True(t, added)
	assert.Empty(t, evicted)
	assert.Zero(t, c.transfer("a", 100, []string{"n1"}))
	assert.Equal(t, 50.0, c.transfer("a", 100, []string{"n1", "n2"}), "one node of the minimum lacks it")

	c.keep("n1", "b", 150)
	added, _ = c.keep("n1", "a", 100)
	assert.False(t, added, "read again: now the most recent")
	added, evicted = c.keep("n1", "c", 100)
	assert.True(t, added)
	assert.Equal(t, []string{"b"}, evicted, "b was read least recently")
	assert.True(t, c.holds("n1", "a"))
	assert.True(t, c.holds("n1", "c"))

	added, evicted = c.keep("n1", "huge", 400)
	assert.False(t, added, "larger than the cache")
	assert.Empty(t, evicted)
}
