package localcluster

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A picked port is claimed for this process until released, so that no local cluster of another
// process draws it before its component binds it; a claim whose process is gone is taken over.
func TestAPickedPortIsClaimedUntilReleased(t *testing.T) {
	port, err := freePort()
	require.NoError(t, err)
	path := filepath.Join(portClaims, strconv.Itoa(port))
	data, err := os.ReadFile(path)
	require.NoError(t, err, "the port's claim")
	require.Equal(t, strconv.Itoa(os.Getpid()), string(data))
	require.False(t, claimPort(port), "a port a live process claims is not claimed again")

	c := &Cluster{ports: map[string]int{"x": port}}
	c.releasePorts()
	_, err = os.Stat(path)
	require.True(t, os.IsNotExist(err), "the claim goes when the cluster stops")

	// A claim left by a process that is gone (pids are below 2^22 on Linux).
	require.NoError(t, os.WriteFile(path, []byte("99999999"), 0o644))
	require.True(t, claimPort(port), "a stale claim is taken over")
	releasePort(port)
}
