package cli

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// jobRow is one Tephra Job as `kubectl tephra jobs` shows it.
type jobRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Queue     string `json:"queue"`
	// Running pods against the minimum that must run at once.
	Running      int32  `json:"running"`
	MinAvailable int32  `json:"minAvailable"`
	Pending      int32  `json:"pending"`
	Succeeded    int32  `json:"succeeded"`
	Failed       int32  `json:"failed"`
	Retries      int32  `json:"retries"`
	Suspended    bool   `json:"suspended"`
	Age          string `json:"age"`
	Reason       string `json:"reason,omitempty"`
}

func newJobsCommand(o *Options) *cobra.Command {
	return newListCommand(o, "jobs", "Tephra Jobs: phase, queue, running pods against their minimum, age", "jobs",
		o.jobRows, func(rows []jobRow, all, wide bool) error { return printJobs(o, rows, all, wide) })
}

func (o *Options) jobRows(all bool) ([]jobRow, error) {
	ns, err := o.listNamespace(all)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.tephra.BatchV1alpha1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b batchv1alpha1.Job) int { return byNamespaceAndName(&a, &b) })
	rows := make([]jobRow, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, newJobRow(&list.Items[i], o.Now()))
	}
	return rows, nil
}

func newJobRow(j *batchv1alpha1.Job, now time.Time) jobRow {
	phase := string(j.Status.State.Phase)
	if phase == "" {
		phase = string(batchv1alpha1.JobPending)
	}
	return jobRow{
		Namespace: j.Namespace, Name: j.Name, Phase: phase, Queue: j.Spec.Queue,
		Running: j.Status.Running, MinAvailable: j.Status.MinAvailable, Pending: j.Status.Pending,
		Succeeded: j.Status.Succeeded, Failed: j.Status.Failed, Retries: j.Status.RetryCount,
		Suspended: j.Spec.Suspend != nil && *j.Spec.Suspend,
		Age:       age(j.CreationTimestamp, now), Reason: j.Status.State.Reason,
	}
}

func printJobs(o *Options, rows []jobRow, all, wide bool) error {
	header := []string{"NAME", "PHASE", "QUEUE", "RUNNING/MIN", "AGE"}
	if all {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		// AGE stays last, as in the narrow table.
		header = append(header[:len(header)-1], "PENDING", "SUCCEEDED", "FAILED", "RETRIES", "REASON", "AGE")
	}
	t := newTable(o.Out, header...)
	for _, r := range rows {
		cells := []string{r.Name, r.Phase, r.Queue, fmt.Sprintf("%d/%d", r.Running, r.MinAvailable)}
		if all {
			cells = append([]string{r.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, strconv.Itoa(int(r.Pending)), strconv.Itoa(int(r.Succeeded)), strconv.Itoa(int(r.Failed)), strconv.Itoa(int(r.Retries)), orNone(r.Reason))
		}
		cells = append(cells, r.Age)
		t.row(cells...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.ErrOut, "No Tephra Jobs found.")
		return nil
	}
	return t.flush()
}
