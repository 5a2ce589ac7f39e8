package trace

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Columns of openb_pod_list*.csv in Alibaba's cluster-trace-gpu-v2023: name, cpu_milli,
// memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
// scheduled_time. gpu_spec, the GPU models a pod may run on, is not read: the replay's nodes
// have one model.
const (
	alibabaName      = "name"
	alibabaCPU       = "cpu_milli"
	alibabaMemory    = "memory_mib"
	alibabaGPUs      = "num_gpu"
	alibabaGPUMilli  = "gpu_milli"
	alibabaQoS       = "qos"
	alibabaPhase     = "pod_phase"
	alibabaCreated   = "creation_time"
	alibabaDeleted   = "deletion_time"
	alibabaScheduled = "scheduled_time"
)

// maxMemoryMiB bounds memory_mib so that its bytes fit an int64 (a pebibyte is plenty).
const maxMemoryMiB = 1 << 30

// ErrNeverRan is why ImportAlibaba skips the row of a pod that never ran: it has no run time
// to replay. Its RowErrors wrap it, so that a caller can tell them from malformed rows.
var ErrNeverRan = errors.New("the pod never ran")

// ImportAlibaba reads an openb_pod_list file of Alibaba's cluster-trace-gpu-v2023, one pod a
// row; name, gpu_milli, qos and pod_phase may be missing, the other columns are required
// (gpu_spec is not read). Each pod becomes a job of one pod:
//
//   - Submit is creation_time less the earliest creation_time of the rows imported.
//   - Duration is deletion_time - scheduled_time, the pod's time on a node; it must be more
//     than 0. A pod still Running when the trace ended has the trace's end for deletion_time,
//     so its duration is a lower bound, as in the original.
//   - The pod asks for cpu_milli millicores, memory_mib MiB and num_gpu GPUs. A fraction of a
//     GPU (num_gpu 1, gpu_milli under 1000) becomes a whole one, since the replay has no GPU
//     sharing; ImportReport.RoundedUp counts them.
//   - Queue is qos as a DNS label (LS becomes "ls", Burstable "burstable"), or opts.Queue if
//     it is empty or missing.
//   - Name is name as a DNS label, or alibaba-<row index> (from 0, the header not counted).
//
// A pod that never ran (pod_phase Pending, or no scheduled_time; 0 is a time, the trace's
// start) is skipped with a RowError wrapping ErrNeverRan, and counted in ImportReport.NeverRan.
// A malformed row is skipped and reported, with its line. Jobs are sorted by Submit. Of
// opts, only Queue and Report apply.
func ImportAlibaba(r io.Reader, opts ImportOptions) ([]Job, []RowError, error) {
	im, err := newImporter(opts)
	if err != nil {
		return nil, nil, err
	}
	t, err := newTable(r,
		[]string{alibabaName, alibabaCPU, alibabaMemory, alibabaGPUs, alibabaGPUMilli, alibabaQoS,
			alibabaPhase, alibabaCreated, alibabaDeleted, alibabaScheduled},
		[]string{alibabaCPU, alibabaMemory, alibabaGPUs, alibabaCreated, alibabaDeleted, alibabaScheduled})
	if err != nil {
		return nil, nil, fmt.Errorf("alibaba: %w", err)
	}
	problems, err := t.scan(func() (string, error) {
		j := Job{Name: dnsLabel(t.cell(alibabaName), ""), Replicas: 1, MinReplicas: 1}
		if j.Name == "" {
			j.Name = fmt.Sprintf("alibaba-%d", t.index)
		}
		if phase := t.cell(alibabaPhase); strings.EqualFold(phase, "Pending") {
			im.report.NeverRan++
			return j.Name, cellError{alibabaPhase, phase, ErrNeverRan}
		}
		if t.cell(alibabaScheduled) == "" {
			im.report.NeverRan++
			return j.Name, cellError{alibabaScheduled, "", ErrNeverRan}
		}
		var created, deleted, scheduled float64
		for _, v := range []struct {
			column string
			dst    *float64
		}{{alibabaCreated, &created}, {alibabaDeleted, &deleted}, {alibabaScheduled, &scheduled}} {
			var err error
			if *v.dst, err = requiredFloat(v.column, t.cell(v.column)); err != nil {
				return j.Name, err
			}
		}
		j.Submit, j.Duration = created, deleted-scheduled
		if j.Duration <= 0 {
			return j.Name, fmt.Errorf("%s %s - %s %s = %s s: must be more than 0", alibabaDeleted,
				t.cell(alibabaDeleted), alibabaScheduled, t.cell(alibabaScheduled), formatFloat(j.Duration))
		}

		cpu, err := wholeNumber(alibabaCPU, t.cell(alibabaCPU), 1)
		if err != nil {
			return j.Name, err
		}
		mib, err := wholeNumber(alibabaMemory, t.cell(alibabaMemory), 1)
		if err != nil {
			return j.Name, err
		}
		if mib > maxMemoryMiB {
			return j.Name, cellError{alibabaMemory, t.cell(alibabaMemory), fmt.Errorf("must be at most %d", maxMemoryMiB)}
		}
		if j.GPUs, err = wholeNumber(alibabaGPUs, t.cell(alibabaGPUs), 0); err != nil {
			return j.Name, err
		}
		fraction := false
		if text := t.cell(alibabaGPUMilli); text != "" {
			milli, err := wholeNumber(alibabaGPUMilli, text, 0)
			if err != nil {
				return j.Name, err
			}
			fraction = j.GPUs == 1 && milli > 0 && milli < 1000
		}
		j.MilliCPU = int64(cpu)
		j.Memory = resource.NewQuantity(int64(mib)<<20, resource.BinarySI).String()
		j.Queue = im.queue(t.cell(alibabaQoS), "qos-")
		if err := im.add(j, t.line); err != nil {
			return j.Name, err
		}
		if fraction {
			im.report.RoundedUp++
		}
		return j.Name, nil
	})
	if err != nil {
		return nil, problems, fmt.Errorf("alibaba: %w", err)
	}
	return im.finish(problems), problems, nil
}
