package trace

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tephra-dev/tephra/internal/datasets"
)

// The columns of Tephra's trace format, in the order Write writes them; the fields of Job say
// what each holds. Read finds them by name, in any order and any case.
const (
	colName        = "name"
	colSubmit      = "submit"
	colDuration    = "duration"
	colQueue       = "queue"
	colReplicas    = "replicas"
	colMinReplicas = "min_replicas"
	colGPUs        = "gpus"
	colCPU         = "cpu"
	colMemory      = "memory"
	colPriority    = "priority"
	colDataset     = "dataset"
	colDatasetGB   = "dataset_gb"
)

var (
	columns         = []string{colName, colSubmit, colDuration, colQueue, colReplicas, colMinReplicas, colGPUs, colCPU, colMemory, colPriority, colDataset, colDatasetGB}
	requiredColumns = []string{colName, colSubmit, colDuration, colQueue}
)

// Defaults of the optional columns: a pod of a trace that says nothing about its CPU or memory
// asks for a core and 4Gi, a modest CPU pod.
const (
	DefaultMilliCPU = 1000
	DefaultMemory   = "4Gi"
)

// maxCores bounds the cpu column, so that a typo such as 1e30 is refused instead of
// overflowing MilliCPU.
const maxCores = 1e6

// Read reads a trace in Tephra's format: a CSV file whose header names its columns (name,
// submit, duration and queue are required; replicas, min_replicas, gpus, cpu, memory and
// priority are optional; others are ignored). err is only for a trace that cannot be read at
// all: unreadable CSV, no header, a required column missing. A malformed row is skipped and
// reported in problems, and so is a row whose name an earlier row already has. jobs are
// sorted by Submit, rows of the same Submit in file order, and have Line set.
func Read(r io.Reader) (jobs []Job, problems []RowError, err error) {
	t, err := newTable(r, columns, requiredColumns)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]int{}
	problems, err = t.scan(func() (string, error) {
		j, err := parseJob(t.cell)
		if err != nil {
			return j.Name, err
		}
		if first, dup := seen[j.Name]; dup {
			return j.Name, fmt.Errorf("name already used on line %d", first)
		}
		seen[j.Name] = t.line
		j.Line = t.line
		jobs = append(jobs, j)
		return j.Name, nil
	})
	if err != nil {
		return nil, problems, err
	}
	sortBySubmit(jobs)
	return jobs, problems, nil
}

// ReadFile is Read of the file at path.
func ReadFile(path string) (jobs []Job, problems []RowError, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	jobs, problems, err = Read(f)
	if err != nil {
		return nil, problems, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, problems, nil
}

// Write writes jobs in Tephra's format, every column in the order of the format's table: a
// zero Replicas, MinReplicas, MilliCPU or Memory is written as an empty cell, which Read takes
// for the default, and priority is empty unless HasPriority. Numbers are written without
// needless decimals (cpu in cores: 1, 0.5). Write refuses a job that Read would skip, or a
// second job of the same name, so that what it writes reads back whole. The dataset columns are
// written only for a trace in which some job reads one.
func Write(w io.Writer, jobs []Job) error {
	written := columns
	if !slices.ContainsFunc(jobs, func(j Job) bool { return j.Dataset != "" }) {
		written = columns[:len(columns)-2]
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(written); err != nil {
		return err
	}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		record := formatJob(j)[:len(written)]
		// Checking the record as Read will parse it, not the Job, is what makes the promise
		// above hold, including for floats that do not survive formatting (NaN).
		if _, err := parseJob(func(column string) string {
			if i := slices.Index(written, column); i >= 0 {
				return record[i]
			}
			return ""
		}); err != nil {
			return fmt.Errorf("job %q: %w", j.Name, err)
		}
		if seen[j.Name] {
			return fmt.Errorf("job %q: name used twice", j.Name)
		}
		seen[j.Name] = true
		if err := cw.Write(record); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteFile is Write to the file at path, created or truncated.
func WriteFile(path string, jobs []Job) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, jobs); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// formatJob is j's record, in the order of columns.
func formatJob(j Job) []string {
	record := []string{
		j.Name,
		formatFloat(j.Submit),
		formatFloat(j.Duration),
		j.Queue,
		formatOptionalInt(j.Replicas),
		formatOptionalInt(j.MinReplicas),
		strconv.Itoa(j.GPUs),
		"",
		j.Memory,
		"",
		j.Dataset,
		"",
	}
	if j.Dataset != "" {
		record[11] = formatFloat(j.DatasetGB)
	}
	if j.MilliCPU != 0 {
		record[7] = formatFloat(float64(j.MilliCPU) / 1000)
	}
	if j.HasPriority {
		record[9] = strconv.FormatInt(int64(j.Priority), 10)
	}
	return record
}

// formatFloat writes v with as few digits as read back to v: 1800, not 1800.000000.
func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// formatOptionalInt writes 0, which stands for the default, as an empty cell.
func formatOptionalInt(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

// parseJob parses one row of Tephra's format, whose cells cell returns by column name, and
// checks it; the Job has defaults in place of empty optional cells. The error names the first
// bad cell; the Job returned with it has at least the Name, if the row has one.
func parseJob(cell func(column string) string) (Job, error) {
	j := Job{Name: cell(colName)}
	if j.Name == "" {
		return j, cellError{colName, "", errRequired}
	}
	var err error
	if j.Submit, err = requiredFloat(colSubmit, cell(colSubmit)); err != nil {
		return j, err
	}
	if j.Submit < 0 {
		return j, cellError{colSubmit, cell(colSubmit), errors.New("must be at least 0")}
	}
	if j.Duration, err = requiredFloat(colDuration, cell(colDuration)); err != nil {
		return j, err
	}
	if j.Duration <= 0 {
		return j, cellError{colDuration, cell(colDuration), errors.New("must be more than 0")}
	}
	j.Queue = cell(colQueue)
	if j.Queue == "" {
		return j, cellError{colQueue, "", errRequired}
	}
	if len(validation.IsDNS1123Label(j.Queue)) > 0 {
		return j, cellError{colQueue, j.Queue,
			errors.New("must be a lowercase DNS-1123 label such as team-a: a-z, 0-9 and '-', at most 63")}
	}

	if j.Replicas, err = optionalInt(colReplicas, cell(colReplicas), 1, 1); err != nil {
		return j, err
	}
	if j.MinReplicas, err = optionalInt(colMinReplicas, cell(colMinReplicas), j.Replicas, 1); err != nil {
		return j, err
	}
	if j.MinReplicas > j.Replicas {
		return j, cellError{colMinReplicas, cell(colMinReplicas),
			fmt.Errorf("must be at most replicas (%d)", j.Replicas)}
	}
	if j.GPUs, err = optionalInt(colGPUs, cell(colGPUs), 0, 0); err != nil {
		return j, err
	}
	if j.MilliCPU, err = parseCores(cell(colCPU)); err != nil {
		return j, err
	}
	if j.Memory, err = parseMemory(cell(colMemory)); err != nil {
		return j, err
	}
	if text := cell(colPriority); text != "" {
		p, err := strconv.ParseInt(text, 10, 32)
		if err != nil {
			return j, cellError{colPriority, text, errors.New("not a 32-bit whole number")}
		}
		j.Priority, j.HasPriority = int32(p), true
	}
	if j.Dataset, j.DatasetGB, err = parseDataset(cell(colDataset), cell(colDatasetGB)); err != nil {
		return j, err
	}
	return j, nil
}

// parseDataset checks the dataset columns: a name valid in a node label (what caches it is a
// node label, data.tephra.dev/<name>) and a size of at least 0 gigabytes, or neither.
func parseDataset(name, size string) (string, float64, error) {
	if name == "" {
		if size != "" {
			return "", 0, cellError{colDatasetGB, size, errors.New("a size without a dataset")}
		}
		return "", 0, nil
	}
	if _, err := datasets.ParseNames(name); err != nil || strings.Contains(name, ",") {
		return "", 0, cellError{colDataset, name, errors.New("must be one dataset name valid in a node label (data.tephra.dev/<name>)")}
	}
	if size == "" {
		return name, 0, nil
	}
	gb, err := requiredFloat(colDatasetGB, size)
	if err != nil {
		return "", 0, err
	}
	if gb < 0 {
		return "", 0, cellError{colDatasetGB, size, errors.New("must be at least 0")}
	}
	return name, gb, nil
}

// requiredFloat parses a finite number; strconv alone would also take NaN and Inf.
func requiredFloat(column, text string) (float64, error) {
	if text == "" {
		return 0, cellError{column, "", errRequired}
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, cellError{column, text, errors.New("not a number")}
	}
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, cellError{column, text, errors.New("not a finite number")}
	}
	return v, nil
}

// optionalInt parses a whole number of at least least, or returns def for an empty cell.
func optionalInt(column, text string, def, least int) (int, error) {
	if text == "" {
		return def, nil
	}
	v, err := strconv.Atoi(text)
	if err != nil {
		return 0, cellError{column, text, errors.New("not a whole number")}
	}
	if v < least {
		return 0, cellError{column, text, fmt.Errorf("must be at least %d", least)}
	}
	return v, nil
}

// parseCores parses the cpu column, in cores, into millicores; DefaultMilliCPU if empty.
func parseCores(text string) (int64, error) {
	if text == "" {
		return DefaultMilliCPU, nil
	}
	cores, err := requiredFloat(colCPU, text)
	if err != nil {
		return 0, err
	}
	switch {
	case cores <= 0:
		return 0, cellError{colCPU, text, errors.New("must be more than 0")}
	case cores > maxCores:
		return 0, cellError{colCPU, text, fmt.Errorf("must be at most %v", maxCores)}
	case math.Round(cores*1000) < 1:
		// Kubernetes counts CPU in millicores; less would round to nothing.
		return 0, cellError{colCPU, text, errors.New("must be at least 0.001")}
	}
	return int64(math.Round(cores * 1000)), nil
}

// parseMemory checks the memory column and returns its canonical form (4096Mi is 4Gi), so that
// two spellings of a size compare equal; DefaultMemory if empty.
func parseMemory(text string) (string, error) {
	if text == "" {
		return DefaultMemory, nil
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return "", cellError{colMemory, text, errors.New("not a Kubernetes quantity such as 4Gi")}
	}
	if q.Sign() <= 0 {
		return "", cellError{colMemory, text, errors.New("must be more than 0")}
	}
	return q.String(), nil
}

// sortBySubmit orders jobs by Submit; jobs submitted together keep their order, which is the
// order of their rows.
func sortBySubmit(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
}
