package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// SchedulerMetric sums the samples tephra-scheduler serves whose line starts with series: a
// metric's name and, to pick some of its series, the start of their labels
// (`tephra_queue_refusals_total{queue="a"`).
func SchedulerMetric(t testing.TB, env *Env, series string) float64 {
	t.Helper()
	metrics, err := env.Cluster.SchedulerMetrics(context.Background())
	require.NoError(t, err)
	total := 0.0
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, series) {
			var v float64
			_, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
			require.NoError(t, err, line)
			total += v
		}
	}
	return total
}
