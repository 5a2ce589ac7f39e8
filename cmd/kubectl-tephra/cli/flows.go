package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

const jobFlowKind = "JobFlow"

// flowRow is one JobFlow as `kubectl tephra flows` shows it.
type flowRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Flows     int32  `json:"flows"`
	Completed int32  `json:"completed"`
	Running   int32  `json:"running"`
	Failed    int32  `json:"failed"`
	// Waiting counts the flows waiting for their targets (or their template); Skipped those
	// that will not run.
	Waiting int    `json:"waiting"`
	Skipped int    `json:"skipped"`
	Age     string `json:"age"`
	Message string `json:"message,omitempty"`
}

func newFlowsCommand(o *Options) *cobra.Command {
	return newListCommand(o, "flows", "JobFlows: phase, flows completed, running, failed, waiting and skipped, age", "jobflows",
		o.flowRows, func(rows []flowRow, all, wide bool) error { return printFlows(o, rows, all, wide) })
}

func (o *Options) flowRows(all bool) ([]flowRow, error) {
	ns, err := o.listNamespace(all)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.tephra.BatchV1alpha1().JobFlows(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b batchv1alpha1.JobFlow) int { return byNamespaceAndName(&a, &b) })
	rows := make([]flowRow, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, newFlowRow(&list.Items[i], o.Now()))
	}
	return rows, nil
}

func newFlowRow(jf *batchv1alpha1.JobFlow, now time.Time) flowRow {
	s := jf.Status
	phase := string(s.State.Phase)
	if phase == "" {
		phase = string(batchv1alpha1.FlowPending)
	}
	r := flowRow{
		Namespace: jf.Namespace, Name: jf.Name, Phase: phase, Flows: int32(len(jf.Spec.Flows)),
		Completed: s.Completed, Running: s.Running, Failed: s.Failed, Age: age(jf.CreationTimestamp, now), Message: s.State.Message,
	}
	for _, e := range s.JobStatusList {
		switch e.State {
		case batchv1alpha1.FlowJobWaiting:
			r.Waiting++
		case batchv1alpha1.FlowJobSkipped:
			r.Skipped++
		}
	}
	return r
}

func printFlows(o *Options, rows []flowRow, all, wide bool) error {
	header := []string{"NAME", "PHASE", "COMPLETED", "RUNNING", "FAILED", "WAITING", "SKIPPED", "AGE"}
	if all {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header[:len(header)-1], "MESSAGE", "AGE")
	}
	t := newTable(o.Out, header...)
	for _, r := range rows {
		cells := []string{r.Name, r.Phase, fmt.Sprintf("%d/%d", r.Completed, r.Flows), fmt.Sprint(r.Running), fmt.Sprint(r.Failed), fmt.Sprint(r.Waiting), fmt.Sprint(r.Skipped)}
		if all {
			cells = append([]string{r.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, orNone(r.Message))
		}
		t.row(append(cells, r.Age)...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.ErrOut, "No JobFlows found.")
		return nil
	}
	return t.flush()
}

func newFlowCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flow",
		Short: "Describe a JobFlow",
	}
	describe := &cobra.Command{
		Use:   "describe NAME",
		Short: "A JobFlow's flows: what each waits for, its Job and that Job's state, or why it was skipped; and its events",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return o.describeFlow(args[0]) },
	}
	cmd.AddCommand(describe)
	return cmd
}

func (o *Options) describeFlow(name string) error {
	ns, ctx, cancel, err := o.connect()
	if err != nil {
		return err
	}
	defer cancel()
	jf, err := o.tephra.BatchV1alpha1().JobFlows(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := o.Now()
	row := newFlowRow(jf, now)
	o.printf("Name:           %s\n", jf.Name)
	o.printf("Namespace:      %s\n", jf.Namespace)
	phase := row.Phase
	if jf.Status.State.Reason != "" {
		phase += " (" + jf.Status.State.Reason + ")"
	}
	o.printf("Phase:          %s\n", phase)
	if row.Message != "" {
		o.printf("Message:        %s\n", row.Message)
	}
	retain := jf.Spec.JobRetainPolicy
	if retain == "" {
		retain = batchv1alpha1.RetainJobs
	}
	o.printf("Retain policy:  %s (the Jobs are %s with the JobFlow)\n", retain, map[bool]string{true: "deleted", false: "kept"}[retain == batchv1alpha1.DeleteJobs])
	states := map[string]batchv1alpha1.FlowJobStatus{}
	for _, e := range jf.Status.JobStatusList {
		states[e.Flow] = e
	}
	o.printf("Flows:\n")
	t := newTable(o.Out, "  FLOW", "AFTER", "JOB", "STATE", "RESTARTS", "DETAIL")
	for _, f := range jf.Spec.Flows {
		after := "-"
		if f.DependsOn != nil && len(f.DependsOn.Targets) > 0 {
			after = strings.Join(f.DependsOn.Targets, ",")
			if c := f.DependsOn.Condition; c != "" && c != batchv1alpha1.FlowOnCompleted {
				after += " " + string(c)
			}
		}
		e, ok := states[f.Name]
		state, job, restarts := "<unknown>", "-", "-"
		if ok {
			state = e.State
			if e.CreationTimestamp != nil {
				job, restarts = e.Name, fmt.Sprint(e.RestartCount)
			}
		}
		t.row("  "+f.Name, after, job, state, restarts, orNone(e.Message))
	}
	if err := t.flush(); err != nil {
		return err
	}
	events, err := o.eventsOf(ns, jobFlowKind, name)
	if err != nil {
		return err
	}
	o.printEvents(events, now)
	return nil
}
