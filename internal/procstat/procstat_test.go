package procstat

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcParsing(t *testing.T) {
	stat := "4242 (tephra sched) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	cpu, err := parseCPUSeconds(stat)
	require.NoError(t, err)
	assert.InDelta(t, 3.0, cpu, 1e-9, "utime 250 + stime 50 ticks")

	rss, err := parsePeakRSS("Name:\ttephra-scheduler\nVmPeak:\t 900000 kB\nVmHWM:\t  102400 kB\nVmRSS:\t 90000 kB\n")
	require.NoError(t, err)
	assert.Equal(t, int64(100<<20), rss)

	stats, err := Read(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, stats.PeakRSSBytes)
}
