package trace

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// problemTexts are the messages of problems, the way a user sees them.
func problemTexts(problems []RowError) []string {
	texts := make([]string, len(problems))
	for i, p := range problems {
		texts[i] = p.Error()
	}
	return texts
}

// testdata/trace.csv has its header in another order and case, an unknown column, and a bad
// row of each kind: every good row is read, defaults filled in, sorted by submit; every bad row
// is skipped and reported at its line.
func TestReadSample(t *testing.T) {
	jobs, problems, err := ReadFile(filepath.Join("testdata", "trace.csv"))
	require.NoError(t, err)

	assert.Equal(t, []Job{
		{Name: "train-a", Submit: 0, Duration: 3600, Queue: "team-a", Replicas: 2, MinReplicas: 2,
			GPUs: 8, MilliCPU: 32000, Memory: "128Gi", Line: 2},
		{Name: "cpu-only", Submit: 5, Duration: 120, Queue: "team-b", Replicas: 1, MinReplicas: 1,
			GPUs: 0, MilliCPU: 2000, Memory: "4Gi", Priority: -5, HasPriority: true, Line: 8},
		{Name: "eval-b", Submit: 10.5, Duration: 600, Queue: "team-b", Replicas: 1, MinReplicas: 1,
			GPUs: 1, MilliCPU: 500, Memory: "4Gi", Line: 3},
		{Name: "gang", Submit: 20, Duration: 1800, Queue: "team-c", Replicas: 4, MinReplicas: 2,
			GPUs: 4, MilliCPU: 16000, Memory: "64Gi", Priority: 100, HasPriority: true, Line: 5},
		// Submitted with gang, and after it in the file: it stays after it.
		{Name: "tie", Submit: 20, Duration: 60, Queue: "team-a", Replicas: 1, MinReplicas: 1,
			GPUs: 0, MilliCPU: 1000, Memory: "4Gi", Line: 12},
	}, jobs)

	assert.Equal(t, []string{
		`line 4 (job "bad-number"): submit "abc": not a number`,
		`line 6 (job "too-many"): min_replicas "3": must be at most replicas (2)`,
		`line 7 (job "train-a"): name already used on line 2`,
		`line 9 (job "negative"): duration "-3": must be more than 0`,
		`line 10 (job "Bad_Queue"): queue "Team_A": must be a lowercase DNS-1123 label such as team-a: a-z, 0-9 and '-', at most 63`,
		`line 11: has 3 fields, the header 11`,
	}, problemTexts(problems))
}

// Each cell that breaks a rule of the format is named, with the rule.
func TestReadRowErrors(t *testing.T) {
	const header = "name,submit,duration,queue,replicas,min_replicas,gpus,cpu,memory,priority\n"
	for _, tc := range []struct{ row, want string }{
		{",0,60,q,,,,,,", `line 2: name: required, but empty`},
		{"j,,60,q,,,,,,", `line 2 (job "j"): submit: required, but empty`},
		{"j,-1,60,q,,,,,,", `line 2 (job "j"): submit "-1": must be at least 0`},
		{"j,NaN,60,q,,,,,,", `line 2 (job "j"): submit "NaN": not a finite number`},
		{"j,1e400,60,q,,,,,,", `line 2 (job "j"): submit "1e400": not a finite number`},
		{"j,0,0,q,,,,,,", `line 2 (job "j"): duration "0": must be more than 0`},
		{"j,0,60,,,,,,,", `line 2 (job "j"): queue: required, but empty`},
		{"j,0,60,q,0,,,,,", `line 2 (job "j"): replicas "0": must be at least 1`},
		{"j,0,60,q,1.5,,,,,", `line 2 (job "j"): replicas "1.5": not a whole number`},
		{"j,0,60,q,2,0,,,,", `line 2 (job "j"): min_replicas "0": must be at least 1`},
		{"j,0,60,q,,2,,,,", `line 2 (job "j"): min_replicas "2": must be at most replicas (1)`},
		{"j,0,60,q,,,-1,,,", `line 2 (job "j"): gpus "-1": must be at least 0`},
		{"j,0,60,q,,,,0,,", `line 2 (job "j"): cpu "0": must be more than 0`},
		{"j,0,60,q,,,,0.0001,,", `line 2 (job "j"): cpu "0.0001": must be at least 0.001`},
		{"j,0,60,q,,,,500m,,", `line 2 (job "j"): cpu "500m": not a number`},
		{"j,0,60,q,,,,,4 GB,", `line 2 (job "j"): memory "4 GB": not a Kubernetes quantity such as 4Gi`},
		{"j,0,60,q,,,,,0,", `line 2 (job "j"): memory "0": must be more than 0`},
		{"j,0,60,q,,,,,,3000000000", `line 2 (job "j"): priority "3000000000": not a 32-bit whole number`},
	} {
		t.Run(tc.row, func(t *testing.T) {
			jobs, problems, err := Read(strings.NewReader(header + tc.row + "\n"))
			require.NoError(t, err)
			assert.Empty(t, jobs)
			assert.Equal(t, []string{tc.want}, problemTexts(problems))
		})
	}
}

// A trace Read cannot make sense of at all is an error, not a list of bad rows.
func TestReadFatal(t *testing.T) {
	for _, tc := range []struct{ name, trace, want string }{
		{"empty", "", "empty file: want a CSV header"},
		{"missing columns", "name,submit,queue\njob,0,q\n",
			`header "name,submit,queue": missing required column(s) duration`},
		{"nothing known", "a,b\n", `header "a,b": missing required column(s) name, submit, duration, queue`},
		{"column twice", "name,submit,duration,queue,Queue\n", "header: column queue appears twice"},
		{"stray quote", "name,submit,duration,queue\nj\"ob,0,60,q\n", `bare " in non-quoted-field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(strings.NewReader(tc.trace))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Spreadsheets begin a CSV with a byte order mark and pad cells; neither hides a column.
func TestReadHeaderSpelling(t *testing.T) {
	jobs, problems, err := Read(strings.NewReader("\ufeffNAME , Submit,Duration,QUEUE\n j , 1 , 2 , q \n"))
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Equal(t, []Job{{Name: "j", Submit: 1, Duration: 2, Queue: "q", Replicas: 1, MinReplicas: 1,
		MilliCPU: 1000, Memory: "4Gi", Line: 2}}, jobs)
}

// RowError names the job when the row has one, and unwraps to the cause.
func TestRowError(t *testing.T) {
	cause := errors.New("boom")
	assert.Equal(t, `line 7 (job "x"): boom`, RowError{Line: 7, Name: "x", Err: cause}.Error())
	assert.Equal(t, `line 7: boom`, RowError{Line: 7, Err: cause}.Error())
	assert.ErrorIs(t, RowError{Line: 7, Err: cause}, cause)
}

// roundTripJobs have every column set or defaulted, and numbers that formatting could spoil.
var roundTripJobs = []Job{
	{Name: "a", Submit: 0, Duration: 0.001, Queue: "team-a", Replicas: 1, MinReplicas: 1,
		MilliCPU: 250, Memory: "512Mi"},
	{Name: "b with spaces, and a comma", Submit: 0.1, Duration: 1234567.891, Queue: "0-q",
		Replicas: 16, MinReplicas: 4, GPUs: 8, MilliCPU: 96000, Memory: "1Ti", Priority: -2147483648,
		HasPriority: true},
	{Name: "c", Submit: 0.1, Duration: 1.0 / 3, Queue: "q", Replicas: 3, MinReplicas: 3, GPUs: 1,
		MilliCPU: 1001, Memory: "1500M", Priority: 0, HasPriority: true},
}

// What Write writes, Read reads back the same.
func TestWriteReadRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, roundTripJobs))
	jobs, problems, err := Read(&buf)
	require.NoError(t, err)
	assert.Empty(t, problems)
	want := make([]Job, len(roundTripJobs))
	for i, j := range roundTripJobs {
		j.Line = i + 2
		want[i] = j
	}
	assert.Equal(t, want, jobs)

	path := filepath.Join(t.TempDir(), "trace.csv")
	require.NoError(t, WriteFile(path, roundTripJobs))
	jobs, problems, err = ReadFile(path)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Equal(t, want, jobs)
}

// Write writes every column in the format's order, numbers without needless decimals, and
// zero values that stand for a default as empty cells.
func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, []Job{
		{Name: "full", Submit: 12.5, Duration: 3600, Queue: "team-a", Replicas: 4, MinReplicas: 2,
			GPUs: 8, MilliCPU: 1500, Memory: "64Gi", Priority: 10, HasPriority: true},
		{Name: "bare", Submit: 0, Duration: 60, Queue: "team-b"},
	}))
	assert.Equal(t, "name,submit,duration,queue,replicas,min_replicas,gpus,cpu,memory,priority\n"+
		"full,12.5,3600,team-a,4,2,8,1.5,64Gi,10\n"+
		"bare,0,60,team-b,,,0,,,\n", buf.String())
}

// Write refuses what Read would skip, so that a written trace reads back whole.
func TestWriteRefusesBadJobs(t *testing.T) {
	good := Job{Name: "j", Submit: 0, Duration: 60, Queue: "q"}
	for _, tc := range []struct {
		name string
		jobs []Job
		want string
	}{
		{"zero duration", []Job{{Name: "j", Queue: "q"}}, `job "j": duration "0": must be more than 0`},
		{"NaN submit", []Job{{Name: "j", Submit: math.NaN(), Duration: 1, Queue: "q"}},
			`job "j": submit "NaN": not a finite number`},
		{"bad queue", []Job{{Name: "j", Duration: 1, Queue: "Q"}}, `job "j": queue "Q": must be a lowercase DNS-1123 label`},
		{"min above replicas", []Job{{Name: "j", Duration: 1, Queue: "q", Replicas: 1, MinReplicas: 2}},
			`job "j": min_replicas "2": must be at most replicas (1)`},
		{"bad memory", []Job{{Name: "j", Duration: 1, Queue: "q", Memory: "lots"}}, `job "j": memory "lots"`},
		{"twice", []Job{good, good}, `job "j": name used twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tc.jobs)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Summarize counts pods and GPU time over every job, whatever their order.
func TestSummarize(t *testing.T) {
	s := Summarize([]Job{
		{Submit: 100, Duration: 10, Queue: "b", Replicas: 2, GPUs: 4},
		{Submit: 300, Duration: 50, Queue: "a", Replicas: 1, GPUs: 0},
		{Submit: 200, Duration: 20, Queue: "b", Replicas: 3, GPUs: 1},
	})
	assert.Equal(t, Summary{
		Jobs: 3, Pods: 6, GPUPods: 5, Span: 300,
		GPUSeconds: 2*4*10 + 3*1*20,
		Queues:     []string{"a", "b"},
	}, s)
	assert.InDelta(t, 140.0/(2*300), s.Load(2), 1e-12)
	assert.Zero(t, s.Load(0))
	assert.Zero(t, Summarize(nil).Load(8))
}

// A trace's optional dataset columns read and write back whole; a bad cell is refused with its
// row, the rest of the trace read.
func TestTheDatasetColumns(t *testing.T) {
	jobs := []Job{
		{Name: "reads", Submit: 1, Duration: 60, Queue: "team-a", Replicas: 1, MinReplicas: 1, Memory: DefaultMemory, MilliCPU: DefaultMilliCPU, Dataset: "imagenet", DatasetGB: 150},
		{Name: "none", Submit: 2, Duration: 60, Queue: "team-a", Replicas: 1, MinReplicas: 1, Memory: DefaultMemory, MilliCPU: DefaultMilliCPU},
	}
	var b strings.Builder
	require.NoError(t, Write(&b, jobs))
	assert.Contains(t, b.String(), "dataset,dataset_gb\n")
	assert.Contains(t, b.String(), ",imagenet,150\n")
	back, problems, err := Read(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Empty(t, problems)
	assert.Equal(t, "imagenet", back[0].Dataset)
	assert.Equal(t, 150.0, back[0].DatasetGB)
	assert.Empty(t, back[1].Dataset)

	bad := "name,submit,duration,queue,dataset,dataset_gb\n" +
		"a,0,60,team-a,Not_Valid!,10\n" +
		"b,0,60,team-a,imagenet,-1\n" +
		"c,0,60,team-a,,10\n" +
		"d,0,60,team-a,coco,\n"
	back, problems, err = Read(strings.NewReader(bad))
	require.NoError(t, err)
	require.Len(t, problems, 3)
	assert.Contains(t, problems[0].Error(), "must be one dataset name valid in a node label")
	assert.Contains(t, problems[1].Error(), "must be at least 0")
	assert.Contains(t, problems[2].Error(), "a size without a dataset")
	require.Len(t, back, 1)
	assert.Equal(t, "coco", back[0].Dataset, "a dataset of unknown size reads as 0 GB")
}
