// Package bench_test runs the benchmark as `make bench-smoke` does, on real local control planes.
package bench_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tephra-dev/tephra/internal/bench"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// TestSmoke runs `make bench-smoke`'s smoke mode: every configuration, on 100 nodes, must bind
// every pod of every scenario (but the never-fitting gangs'). It checks completion, not speed.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four local control planes (run without -short)")
	}
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var log bytes.Buffer
	s := bench.SmokeSettings(filepath.Join(root, "bench-out"))
	s.Log = &log
	res, err := bench.Run(ctx, s)
	if err != nil {
		t.Log(log.String())
	}
	require.NoError(t, err)
	var table strings.Builder
	res.WriteText(&table)
	t.Log(table.String())
	if failures := res.Failures(); len(failures) > 0 {
		t.Log(log.String())
		t.Fatalf("configurations did not complete (logs under %s):\n%s", res.Dir, strings.Join(failures, "\n"))
	}
}
