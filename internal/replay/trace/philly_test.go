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

// testdata/philly.csv is in the Pollux artifact's layout, dates and all, with a pandas index
// and a status column the importer does not know. Submit counts from the earliest timestamp,
// 2017-10-06 23:27:26 (row 4); gangs are split into pods of at most 8 GPUs; a 20-GPU job
// becomes 3 pods of 7, a GPU more than it had; the row with a negative duration is skipped.
func TestImportPhillySample(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "philly.csv"))
	require.NoError(t, err)
	defer f.Close()
	var report ImportReport
	jobs, problems, err := ImportPhilly(f, ImportOptions{Report: &report})
	require.NoError(t, err)

	assert.Equal(t, []Job{
		// No GPUs: one pod of one core and the default memory. "103959" starts with a digit.
		{Name: "philly-4", Submit: 0, Duration: 197281, Queue: "vc-103959", Replicas: 1, MinReplicas: 1,
			GPUs: 0, MilliCPU: 1000, Memory: "4Gi", Line: 6},
		// 2017-10-07 01:11:39, 1h44m13s later; 16 GPUs: 2 pods of 8, 4 cores and 16Gi a GPU.
		{Name: "philly-1", Submit: 6253, Duration: 193256, Queue: "ee9e8c", Replicas: 2, MinReplicas: 2,
			GPUs: 8, MilliCPU: 32000, Memory: "128Gi", Line: 3},
		// 2017-10-09 05:58:23, 2 days 6h30m57s later; 12 GPUs: 2 pods of 6.
		{Name: "philly-2", Submit: 196257, Duration: 24, Queue: "ee9e8c", Replicas: 2, MinReplicas: 2,
			GPUs: 6, MilliCPU: 24000, Memory: "96Gi", Line: 4},
		// 2017-10-09 06:13:03; 1 GPU.
		{Name: "philly-0", Submit: 197137, Duration: 2951, Queue: "vc-6214e9", Replicas: 1, MinReplicas: 1,
			GPUs: 1, MilliCPU: 4000, Memory: "16Gi", Line: 2},
		// 2017-10-09 07:01:55; 20 GPUs: 3 pods of 7, rounded up from 20 to 21.
		{Name: "philly-5", Submit: 200069, Duration: 66, Queue: "vc-11cb48", Replicas: 3, MinReplicas: 3,
			GPUs: 7, MilliCPU: 28000, Memory: "112Gi", Line: 7},
	}, jobs)
	require.NoError(t, Write(io.Discard, jobs), "the trace format takes every imported job")
	assert.Equal(t, []string{`line 5 (job "philly-3"): duration "-23891.0": must be more than 0`},
		problemTexts(problems))
	assert.Equal(t, ImportReport{Jobs: 5, Skipped: 1, RoundedUp: 1}, report)
}

// Timestamps may be seconds, and a name column names the jobs; without a cluster column every
// job goes to the default queue. The options change the pods' size.
func TestImportPhillySecondsAndOptions(t *testing.T) {
	trace := "num_gpus,duration,timestamp,name\n" +
		"6,100,1000.5,Resnet_50\n" +
		"1,200,1000,\n" +
		"2.0,300,999,bert\n" +
		"3,400,1001,RESNET-50\n" +
		"1.5,500,1002,half\n" +
		"1,600,yesterday,when\n"
	jobs, problems, err := ImportPhilly(strings.NewReader(trace),
		ImportOptions{Queue: "philly", CPUPerGPU: 2, MemoryPerGPU: "10G", MaxGPUsPerPod: 4})
	require.NoError(t, err)
	assert.Equal(t, []Job{
		// pandas writes 2 as 2.0 in a column with a gap; the importer takes it.
		{Name: "bert", Submit: 0, Duration: 300, Queue: "philly", Replicas: 1, MinReplicas: 1,
			GPUs: 2, MilliCPU: 4000, Memory: "20G", Line: 4},
		// At most 4 GPUs a pod: 6 GPUs are 2 pods of 3.
		{Name: "philly-1", Submit: 1, Duration: 200, Queue: "philly", Replicas: 1, MinReplicas: 1,
			GPUs: 1, MilliCPU: 2000, Memory: "10G", Line: 3},
		{Name: "resnet-50", Submit: 1.5, Duration: 100, Queue: "philly", Replicas: 2, MinReplicas: 2,
			GPUs: 3, MilliCPU: 6000, Memory: "30G", Line: 2},
	}, jobs)
	assert.Equal(t, []string{
		`line 5 (job "resnet-50"): name already used on line 2`,
		`line 6 (job "half"): num_gpus "1.5": not a whole number`,
		`line 7 (job "when"): timestamp "yesterday": neither seconds nor a date such as 2017-10-09 07:01:55`,
	}, problemTexts(problems))
}

// A file without the columns the importer needs is refused whole, and so are bad options.
func TestImportPhillyFatal(t *testing.T) {
	_, _, err := ImportPhilly(strings.NewReader("timestamp,gpu_time\n0,1\n"), ImportOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing required column(s) duration, num_gpus")

	for _, opts := range []ImportOptions{
		{Queue: "Not_A_Label"}, {CPUPerGPU: -1}, {MemoryPerGPU: "much"}, {MemoryPerGPU: "0"}, {MaxGPUsPerPod: -8},
	} {
		_, _, err := ImportPhilly(strings.NewReader("timestamp,duration,num_gpus\n"), opts)
		assert.Error(t, err, "%+v", opts)
	}
}

// A job of G GPUs becomes the fewest pods of at most 8 GPUs, each pod the same.
func TestSplitGang(t *testing.T) {
	for _, tc := range []struct{ gpus, pods, perPod int }{
		{0, 1, 0}, {1, 1, 1}, {7, 1, 7}, {8, 1, 8},
		{9, 2, 5},    // 10 GPUs: rounded up
		{12, 2, 6},   // exact
		{16, 2, 8},   // exact
		{20, 3, 7},   // 21: rounded up
		{24, 3, 8},   // exact
		{33, 5, 7},   // 35: rounded up
		{64, 8, 8},   // exact
		{100, 13, 8}, // 104: rounded up
	} {
		pods, perPod := splitGang(tc.gpus, 8)
		assert.Equal(t, []int{tc.pods, tc.perPod}, []int{pods, perPod}, "%d GPUs", tc.gpus)
		assert.GreaterOrEqual(t, pods*perPod, tc.gpus)
		assert.Less(t, pods*perPod-tc.gpus, pods)
	}
}

// Names from other traces become DNS labels; queues that would start with a digit get a prefix.
func TestDNSLabel(t *testing.T) {
	for _, tc := range []struct{ in, prefix, want string }{
		{"team-a", "vc-", "team-a"},
		{"Team_A", "", "team-a"},
		{"  --Burstable--  ", "", "burstable"},
		{"6214e9", "vc-", "vc-6214e9"},
		{"103959", "", "103959"},
		{"application_1506638472019_10238", "", "application-1506638472019-10238"},
		{"élan", "", "lan"},
		{"___", "vc-", ""},
		{strings.Repeat("a", 62) + "-b", "", strings.Repeat("a", 62)},
	} {
		assert.Equal(t, tc.want, dnsLabel(tc.in, tc.prefix), "%q", tc.in)
	}
}
