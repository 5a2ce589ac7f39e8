package queue

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
)

// The Queue controller and the resize webhook of one manager read upstream PodGroups through one
// Upstream, whose translations they share; another manager's cache has its own.
func TestTheControllersShareOneUpstreamPerCache(t *testing.T) {
	c := &informertest.FakeInformers{}
	controller, err := upstreamFromCache(c, true)
	require.NoError(t, err)
	webhook, err := upstreamFromCache(c, true)
	require.NoError(t, err)
	assert.Same(t, controller, webhook)

	other, err := upstreamFromCache(&informertest.FakeInformers{}, true)
	require.NoError(t, err)
	assert.NotSame(t, controller, other, "another manager")
	noWorkloads, err := upstreamFromCache(c, false)
	require.NoError(t, err)
	assert.NotSame(t, controller, noWorkloads, "Workloads not served: another reader")
}
