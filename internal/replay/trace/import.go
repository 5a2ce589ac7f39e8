package trace

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ImportOptions say how an importer fills in what a public trace does not record. The zero
// value takes every default.
type ImportOptions struct {
	// Queue is the queue of jobs whose row names none (default "default"). It must be a
	// lowercase DNS-1123 label.
	Queue string
	// CPUPerGPU is the cores a Philly pod asks for per GPU (default 4); a pod asks for at
	// least one core, GPU or not. Philly records GPUs only; 4 cores a GPU is the share of a
	// typical 8-GPU node of 32 to 64 cores, and keeps CPU from being the bottleneck of a replay
	// that is about GPUs.
	CPUPerGPU float64
	// MemoryPerGPU is the memory a Philly pod asks for per GPU, as a quantity (default "16Gi",
	// for the same reason); a pod asks for at least DefaultMemory.
	MemoryPerGPU string
	// MaxGPUsPerPod is the most GPUs of a Philly pod (default 8, the GPUs of a node): a job of
	// more GPUs becomes a gang of several pods.
	MaxGPUsPerPod int
	// Report, if not nil, receives what the import skipped and changed.
	Report *ImportReport
}

// ImportReport is what an import did besides the jobs: the replay prints it, so that whoever
// reads a replay's results knows how far the trace it replayed is from the original.
type ImportReport struct {
	// Jobs is the number of jobs imported; Skipped the number of rows skipped, one RowError
	// each.
	Jobs, Skipped int
	// RoundedUp counts jobs that ask for more GPUs than the original did: Philly gangs whose
	// GPUs do not split evenly into pods, and Alibaba pods that asked for a fraction of a GPU.
	RoundedUp int
	// NeverRan counts the skipped Alibaba rows of pods that never ran (Pending, or not
	// scheduled); their RowErrors wrap ErrNeverRan.
	NeverRan int
}

// Defaults of ImportOptions.
const (
	DefaultImportQueue   = "default"
	DefaultCPUPerGPU     = 4
	DefaultMemoryPerGPU  = "16Gi"
	DefaultMaxGPUsPerPod = 8
)

// importer is an import under way: options with defaults, and what the rows have given.
type importer struct {
	opts ImportOptions
	// memoryPerGPU and minMemory are MemoryPerGPU and DefaultMemory, parsed.
	memoryPerGPU, minMemory resource.Quantity
	jobs                    []Job
	// names maps each name taken to its row's line, for duplicates.
	names  map[string]int
	report ImportReport
}

// newImporter fills in opts' defaults and checks them.
func newImporter(opts ImportOptions) (*importer, error) {
	if opts.Queue == "" {
		opts.Queue = DefaultImportQueue
	}
	if len(validation.IsDNS1123Label(opts.Queue)) > 0 {
		return nil, fmt.Errorf("queue %q: must be a lowercase DNS-1123 label such as team-a", opts.Queue)
	}
	switch {
	case opts.CPUPerGPU == 0:
		opts.CPUPerGPU = DefaultCPUPerGPU
	case opts.CPUPerGPU < 0 || opts.CPUPerGPU > maxCores || math.IsNaN(opts.CPUPerGPU):
		return nil, fmt.Errorf("CPU per GPU %v: want more than 0 cores, at most %v", opts.CPUPerGPU, maxCores)
	}
	if opts.MemoryPerGPU == "" {
		opts.MemoryPerGPU = DefaultMemoryPerGPU
	}
	switch {
	case opts.MaxGPUsPerPod == 0:
		opts.MaxGPUsPerPod = DefaultMaxGPUsPerPod
	case opts.MaxGPUsPerPod < 0:
		return nil, fmt.Errorf("max GPUs per pod %d: must be at least 1", opts.MaxGPUsPerPod)
	}
	memory, err := resource.ParseQuantity(opts.MemoryPerGPU)
	if err != nil || memory.Sign() <= 0 {
		return nil, fmt.Errorf("memory per GPU %q: want a quantity more than 0, such as 16Gi", opts.MemoryPerGPU)
	}
	return &importer{opts: opts, memoryPerGPU: memory, minMemory: resource.MustParse(DefaultMemory),
		names: map[string]int{}}, nil
}

// add takes j, read from line, unless an earlier row took its name.
func (im *importer) add(j Job, line int) error {
	if first, dup := im.names[j.Name]; dup {
		return fmt.Errorf("name already used on line %d", first)
	}
	im.names[j.Name] = line
	j.Line = line
	im.jobs = append(im.jobs, j)
	return nil
}

// finish makes the jobs' Submit relative to the first submission, which public traces record
// as a date or an offset from their own origin, sorts them, and writes the report.
func (im *importer) finish(problems []RowError) []Job {
	if len(im.jobs) > 0 {
		first := im.jobs[0].Submit
		for _, j := range im.jobs {
			first = min(first, j.Submit)
		}
		for i := range im.jobs {
			im.jobs[i].Submit -= first
		}
	}
	sortBySubmit(im.jobs)
	im.report.Jobs, im.report.Skipped = len(im.jobs), len(problems)
	if im.opts.Report != nil {
		*im.opts.Report = im.report
	}
	return im.jobs
}

// podCPU is the millicores of a Philly pod of gpus GPUs.
func (im *importer) podCPU(gpus int) int64 {
	return max(DefaultMilliCPU, int64(math.Round(im.opts.CPUPerGPU*float64(gpus)*1000)))
}

// podMemory is the memory of a Philly pod of gpus GPUs, in canonical form.
func (im *importer) podMemory(gpus int) string {
	bytes := im.memoryPerGPU.Value() * int64(gpus)
	if bytes < im.minMemory.Value() {
		return DefaultMemory
	}
	return resource.NewQuantity(bytes, im.memoryPerGPU.Format).String()
}

// queue is the queue of a row whose layout calls it text: text as a DNS label, or the default
// queue if text is empty.
func (im *importer) queue(text, digitPrefix string) string {
	if q := dnsLabel(text, digitPrefix); q != "" {
		return q
	}
	return im.opts.Queue
}

// dnsLabel turns s into a lowercase DNS-1123 label, the names the replay gives queues and
// derives its objects' names from: letters lower-cased, every run of other characters one
// '-', none at either end, at most 63 characters. digitPrefix goes before a label that would
// start with a digit: DNS-1123 allows it, but names such as Philly's virtual cluster "103959"
// read better as "vc-103959", and some Kubernetes names (DNS-1035) need a letter first. ""
// if s has no ASCII letter or digit.
func dnsLabel(s, digitPrefix string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
	}
	label := b.String()
	if label == "" {
		return ""
	}
	if label[0] >= '0' && label[0] <= '9' {
		label = digitPrefix + label
	}
	if len(label) > validation.DNS1123LabelMaxLength {
		label = strings.TrimRight(label[:validation.DNS1123LabelMaxLength], "-")
	}
	return label
}

// wholeNumber parses a whole number of at least least. Unlike Tephra's format it takes 8.0
// for 8: pandas writes a column of integers as floats as soon as one cell is missing.
func wholeNumber(column, text string, least int) (int, error) {
	if text == "" {
		return 0, cellError{column, "", errRequired}
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, cellError{column, text, errors.New("not a whole number")}
	}
	if v < float64(least) {
		return 0, cellError{column, text, fmt.Errorf("must be at least %d", least)}
	}
	return int(v), nil
}
