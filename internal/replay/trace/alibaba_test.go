package trace

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/alibaba_openb_pod_list.csv is in openb_pod_list's exact header, rows taken from
// openb_pod_list_default.csv and adjusted to have one of each case. Submit counts from the
// earliest creation_time of the imported rows, 9437497 (openb-pod-0017): openb-pod-0066 was
// created earlier but never scheduled, so it does not count. Duration is the time from
// scheduled_time to deletion_time.
func TestImportAlibabaSample(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "alibaba_openb_pod_list.csv"))
	require.NoError(t, err)
	defer f.Close()
	var report ImportReport
	jobs, problems, err := ImportAlibaba(f, ImportOptions{Report: &report})
	require.NoError(t, err)

	assert.Equal(t, []Job{
		// 8 GPUs; 327680 MiB are 320Gi.
		{Name: "openb-pod-0017", Submit: 0, Duration: 10769854 - 9437497, Queue: "burstable",
			Replicas: 1, MinReplicas: 1, GPUs: 8, MilliCPU: 88000, Memory: "320Gi", Line: 2},
		// Half a GPU (gpu_milli 500) becomes a whole one.
		{Name: "openb-pod-0022", Submit: 9679175 - 9437497, Duration: 9973826 - 9679175, Queue: "be",
			Replicas: 1, MinReplicas: 1, GPUs: 1, MilliCPU: 4000, Memory: "15258Mi", Line: 3},
		// Scheduled 5 s after its creation: Duration counts from scheduling. gpu_spec is ignored.
		{Name: "openb-pod-0035", Submit: 9967058 - 9437497, Duration: 9968575 - 9967063, Queue: "ls",
			Replicas: 1, MinReplicas: 1, GPUs: 1, MilliCPU: 16000, Memory: "32Gi", Line: 4},
		// CPU only.
		{Name: "openb-pod-0048", Submit: 9992086 - 9437497, Duration: 10013821 - 9992086, Queue: "be",
			Replicas: 1, MinReplicas: 1, GPUs: 0, MilliCPU: 8000, Memory: "30517Mi", Line: 5},
		{Name: "openb-pod-0129", Submit: 10035396 - 9437497, Duration: 10036353 - 10035396, Queue: "guaranteed",
			Replicas: 1, MinReplicas: 1, GPUs: 1, MilliCPU: 12000, Memory: "24Gi", Line: 8},
	}, jobs)
	require.NoError(t, Write(io.Discard, jobs), "the trace format takes every imported job")
	assert.Equal(t, []string{
		`line 6 (job "openb-pod-0061"): pod_phase "Pending": the pod never ran`,
		`line 7 (job "openb-pod-0066"): scheduled_time: the pod never ran`,
		`line 9 (job "openb-pod-0130"): deletion_time 10036115 - scheduled_time 10036115 = 0 s: must be more than 0`,
	}, problemTexts(problems))
	assert.ErrorIs(t, problems[0], ErrNeverRan)
	assert.ErrorIs(t, problems[1], ErrNeverRan)
	assert.NotErrorIs(t, problems[2], ErrNeverRan)
	assert.Equal(t, ImportReport{Jobs: 5, Skipped: 3, RoundedUp: 1, NeverRan: 2}, report)
}

// Without qos or name, jobs go to the default queue and are named by their row; a scheduled
// time of 0 is the trace's start, not "never scheduled", as in openb-pod-0000.
func TestImportAlibabaSparseColumns(t *testing.T) {
	trace := "cpu_milli,memory_mib,num_gpu,creation_time,deletion_time,scheduled_time\n" +
		"12000,16384,1,0,12537496,0\n" +
		"0,16384,1,5,10,5\n" +
		"1000,1024,x,5,10,5\n"
	jobs, problems, err := ImportAlibaba(strings.NewReader(trace), ImportOptions{Queue: "openb"})
	require.NoError(t, err)
	assert.Equal(t, []Job{{Name: "alibaba-0", Submit: 0, Duration: 12537496, Queue: "openb",
		Replicas: 1, MinReplicas: 1, GPUs: 1, MilliCPU: 12000, Memory: "16Gi", Line: 2}}, jobs)
	assert.Equal(t, []string{
		`line 3 (job "alibaba-1"): cpu_milli "0": must be at least 1`,
		`line 4 (job "alibaba-2"): num_gpu "x": not a whole number`,
	}, problemTexts(problems))
}

// A file without the times the importer needs is refused whole.
func TestImportAlibabaMissingColumns(t *testing.T) {
	_, _, err := ImportAlibaba(strings.NewReader("name,cpu_milli,memory_mib,num_gpu,creation_time\n"), ImportOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing required column(s) deletion_time, scheduled_time")
}
