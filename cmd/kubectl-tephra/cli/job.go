package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
)

// Volcano's Job API, which `job submit` converts.
const (
	volcanoJobAPIVersion  = "batch.volcano.sh/v1alpha1"
	volcanoSchedulerName  = "volcano"
	tephraJobAPIVersion   = "batch.tephra.dev/v1alpha1"
	jobKind               = "Job"
	describedEventsAtMost = 10
)

func newJobCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Submit, suspend, resume, delete or describe a Tephra Job",
	}
	var file string
	submit := &cobra.Command{
		Use:   "submit -f FILE",
		Short: "Create the Jobs of a file (- for stdin); Volcano Jobs are converted",
		Long: `Creates every Job of a YAML or JSON file. A Volcano Job (batch.volcano.sh/v1alpha1)
is converted: its apiVersion becomes batch.tephra.dev/v1alpha1 and the scheduler name volcano
becomes tephra-scheduler, and the command says so. A field Tephra's Job does not have is an
error that names it, before anything is created.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.submitJobs(file) },
	}
	submit.Flags().StringVarP(&file, "filename", "f", "", "the file of Jobs (- for stdin)")
	_ = submit.MarkFlagRequired("filename")

	suspend := &cobra.Command{
		Use:   "suspend NAME",
		Short: "Suspend a Job: its pods are deleted and its resources freed until it is resumed",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return o.setSuspend(args[0], true) },
	}
	resume := &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a suspended Job",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return o.setSuspend(args[0], false) },
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a Job, its pods and its PodGroup",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return o.deleteJob(args[0]) },
	}
	describe := &cobra.Command{
		Use:   "describe NAME",
		Short: "A Job's tasks, pods, restarts, the policy that fired last, and its events",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return o.describeJob(args[0]) },
	}
	cmd.AddCommand(submit, suspend, resume, del, describe)
	return cmd
}

// submitJobs creates the Jobs of a file after converting and checking all of them.
func (o *Options) submitJobs(file string) error {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(o.In)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	jobs, notes, err := decodeJobs(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := o.clients(); err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	ctx, cancel := o.context()
	defer cancel()
	for i, job := range jobs {
		explicit := o.Flags.Namespace != nil && *o.Flags.Namespace != ""
		switch {
		case job.Namespace == "" || explicit && job.Namespace == ns:
			job.Namespace = ns
		case explicit && job.Namespace != ns:
			return fmt.Errorf("job %s names namespace %s, but -n is %s", job.Name, job.Namespace, ns)
		}
		for _, note := range notes[i] {
			o.printf("%s\n", note)
		}
		created, err := o.tephra.BatchV1alpha1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		o.printf("job.batch.tephra.dev/%s created in namespace %s (queue %s)\n", created.Name, created.Namespace, created.Spec.Queue)
	}
	return nil
}

// decodeJobs reads every Job of a YAML or JSON stream, converting Volcano Jobs; notes[i] says
// what was converted in jobs[i].
func decodeJobs(data []byte) (jobs []*batchv1alpha1.Job, notes [][]string, err error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if len(obj.Object) == 0 {
			continue
		}
		var converted []string
		switch obj.GetAPIVersion() {
		case tephraJobAPIVersion:
		case volcanoJobAPIVersion:
			converted = convertVolcanoJob(obj)
		default:
			return nil, nil, fmt.Errorf("%s %s: not a Job of %s or %s", obj.GetAPIVersion(), obj.GetName(), tephraJobAPIVersion, volcanoJobAPIVersion)
		}
		if obj.GetKind() != jobKind {
			return nil, nil, fmt.Errorf("%s %s: only Jobs can be submitted", obj.GetKind(), obj.GetName())
		}
		job := &batchv1alpha1.Job{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, job, true); err != nil {
			what := "job " + obj.GetName()
			if len(converted) > 0 {
				what = "Volcano job " + obj.GetName() + " has fields Tephra's Job does not"
			}
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		jobs = append(jobs, job)
		notes = append(notes, converted)
	}
	if len(jobs) == 0 {
		return nil, nil, errors.New("no Job in the file")
	}
	return jobs, notes, nil
}

// convertVolcanoJob turns a Volcano Job into a Tephra Job in place and says what it changed.
func convertVolcanoJob(obj *unstructured.Unstructured) []string {
	name := obj.GetName()
	notes := []string{fmt.Sprintf("job %s: converted from Volcano: apiVersion %s -> %s", name, volcanoJobAPIVersion, tephraJobAPIVersion)}
	obj.SetAPIVersion(tephraJobAPIVersion)
	if scheduler, _, _ := unstructured.NestedString(obj.Object, "spec", "schedulerName"); scheduler == volcanoSchedulerName || scheduler == "" {
		_ = unstructured.SetNestedField(obj.Object, schedulingv1alpha1.SchedulerName, "spec", "schedulerName")
		notes = append(notes, fmt.Sprintf("job %s: schedulerName %s -> %s", name, orNone(scheduler), schedulingv1alpha1.SchedulerName))
	}
	tasks, _, _ := unstructured.NestedSlice(obj.Object, "spec", "tasks")
	for i := range tasks {
		task, ok := tasks[i].(map[string]any)
		if !ok {
			continue
		}
		if scheduler, _, _ := unstructured.NestedString(task, "template", "spec", "schedulerName"); scheduler == volcanoSchedulerName {
			_ = unstructured.SetNestedField(task, schedulingv1alpha1.SchedulerName, "template", "spec", "schedulerName")
			taskName, _, _ := unstructured.NestedString(task, "name")
			notes = append(notes, fmt.Sprintf("job %s: task %s: schedulerName %s -> %s", name, taskName, scheduler, schedulingv1alpha1.SchedulerName))
		}
	}
	_ = unstructured.SetNestedSlice(obj.Object, tasks, "spec", "tasks")
	return notes
}

func (o *Options) setSuspend(name string, suspend bool) error {
	ns, ctx, cancel, err := o.connect()
	if err != nil {
		return err
	}
	defer cancel()
	if !suspend {
		job, err := o.tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if queue := job.Labels[kueueQueueLabel]; queue != "" {
			return fmt.Errorf("job %s waits for Kueue in LocalQueue %s, which resumes it when it admits it (docs/kueue.md); to run it outside Kueue, remove its label %s", name, queue, kueueQueueLabel)
		}
	}
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	if _, err := o.tephra.BatchV1alpha1().Jobs(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	what := "resumed"
	if suspend {
		what = "suspended"
	}
	o.printf("job.batch.tephra.dev/%s %s\n", name, what)
	return nil
}

func (o *Options) deleteJob(name string) error {
	ns, ctx, cancel, err := o.connect()
	if err != nil {
		return err
	}
	defer cancel()
	// Foreground: the Job goes once its pods and PodGroup are gone, as `kubectl delete` would
	// leave them to the garbage collector.
	policy := metav1.DeletePropagationForeground
	if err := o.tephra.BatchV1alpha1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		return err
	}
	o.printf("job.batch.tephra.dev/%s deleted\n", name)
	return nil
}

// describeJob prints a Job as a person reads it: where it is, its tasks and pods, its group, the
// policy that fired last and its latest events.
func (o *Options) describeJob(name string) error {
	ns, ctx, cancel, err := o.connect()
	if err != nil {
		return err
	}
	defer cancel()
	job, err := o.tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pods, err := o.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + name})
	if err != nil {
		return err
	}
	now := o.Now()
	row := newJobRow(job, now)
	o.printf("Name:           %s\n", job.Name)
	o.printf("Namespace:      %s\n", job.Namespace)
	o.printf("Queue:          %s\n", job.Spec.Queue)
	phase := row.Phase
	if job.Status.State.Reason != "" {
		phase += " (" + job.Status.State.Reason + ")"
	}
	o.printf("Phase:          %s\n", phase)
	if job.Status.State.Message != "" {
		o.printf("Message:        %s\n", job.Status.State.Message)
	}
	if row.Suspended {
		o.printf("Suspended:      true\n")
	}
	o.printf("Running:        %d of minimum %d; %d pending, %d succeeded, %d failed\n", row.Running, row.MinAvailable, row.Pending, row.Succeeded, row.Failed)
	o.printf("Retries:        %d of %d\n", job.Status.RetryCount, job.Spec.MaxRetry)
	group, err := o.tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		carriers := make([]*corev1.Pod, len(pods.Items))
		for i := range pods.Items {
			carriers[i] = &pods.Items[i]
		}
		if carried := groups.OnPods(carriers); carried != nil {
			group, err = carried, nil
			o.printf("PodGroup:       %s, carried by its pod %s (%s, minMember %d)\n", group.Name, schedulingv1alpha1.CarriedBy(group), orNone(string(group.Status.Phase)), group.Spec.MinMember)
		}
	}
	switch {
	case group != nil && schedulingv1alpha1.CarriedBy(group) != "":
	case apierrors.IsNotFound(err):
		o.printf("PodGroup:       <none>\n")
	case err != nil:
		return err
	default:
		o.printf("PodGroup:       %s (%s, minMember %d)\n", group.Name, orNone(string(group.Status.Phase)), group.Spec.MinMember)
	}

	o.printf("Tasks:\n")
	byTask := map[string][]corev1.Pod{}
	for _, pod := range pods.Items {
		task := schedulingv1alpha1.TaskOf(&pod)
		byTask[task] = append(byTask[task], pod)
	}
	t := newTable(o.Out, "  NAME", "REPLICAS", "MIN", "PENDING", "RUNNING", "SUCCEEDED", "FAILED")
	for _, task := range job.Spec.Tasks {
		counts := map[corev1.PodPhase]int{}
		for _, pod := range byTask[task.Name] {
			counts[pod.Status.Phase]++
		}
		min := "-"
		if task.MinAvailable != nil {
			min = strconv.Itoa(int(*task.MinAvailable))
		}
		t.row("  "+task.Name, strconv.Itoa(int(task.Replicas)), min, strconv.Itoa(counts[corev1.PodPending]), strconv.Itoa(counts[corev1.PodRunning]),
			strconv.Itoa(counts[corev1.PodSucceeded]), strconv.Itoa(counts[corev1.PodFailed]))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if group != nil && len(group.Status.SubGroups) > 0 {
		if err := o.printSubGroups(group); err != nil {
			return err
		}
	}

	o.printf("Pods:\n")
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	if len(pods.Items) == 0 {
		o.printf("  <none>\n")
	} else {
		t = newTable(o.Out, "  NAME", "TASK", "PHASE", "NODE", "RESTARTS", "AGE")
		for _, pod := range pods.Items {
			var restarts int32
			for _, cs := range pod.Status.ContainerStatuses {
				restarts += cs.RestartCount
			}
			phase := string(pod.Status.Phase)
			if pod.DeletionTimestamp != nil {
				phase = "Terminating"
			}
			t.row("  "+pod.Name, schedulingv1alpha1.TaskOf(&pod), phase, orNone(pod.Spec.NodeName), strconv.Itoa(int(restarts)), age(pod.CreationTimestamp, now))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	events, err := o.eventsOf(ns, jobKind, name)
	if err != nil {
		return err
	}
	policy := "<none>"
	for i := len(events) - 1; i >= 0; i-- {
		if isPolicyAction(events[i].Reason) {
			policy = events[i].Reason + ": " + events[i].Message
			break
		}
	}
	o.printf("Last policy:    %s\n", policy)
	o.printEvents(events, now)
	return nil
}

// isPolicyAction says whether an event reason is a lifecycle policy's action.
func isPolicyAction(reason string) bool {
	switch batchv1alpha1.Action(reason) {
	case batchv1alpha1.RestartJobAction, batchv1alpha1.RestartTaskAction, batchv1alpha1.RestartSubGroupAction, batchv1alpha1.RestartPodAction,
		batchv1alpha1.AbortJobAction, batchv1alpha1.TerminateJobAction, batchv1alpha1.CompleteJobAction:
		return true
	}
	return false
}

// eventsOf returns an object's events, oldest first.
func (o *Options) eventsOf(ns, kind, name string) ([]corev1.Event, error) {
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	events := list.Items
	sort.SliceStable(events, func(i, j int) bool { return eventTime(&events[i]).Before(eventTime(&events[j])) })
	return events, nil
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, candidate := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if candidate.After(t) {
			t = candidate
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// printEvents prints the latest events, as kubectl describe does.
func (o *Options) printEvents(events []corev1.Event, now time.Time) {
	if len(events) == 0 {
		o.printf("Events:         <none>\n")
		return
	}
	o.printf("Events:\n")
	if len(events) > describedEventsAtMost {
		events = events[len(events)-describedEventsAtMost:]
	}
	t := newTable(o.Out, "  TYPE", "REASON", "AGE", "MESSAGE")
	for _, e := range events {
		t.row("  "+e.Type, e.Reason, ago(now.Sub(eventTime(&e))), strings.TrimSpace(e.Message))
	}
	_ = t.flush()
}

// printSubGroups shows a group's sub-groups as the PodGroup controller counted them, and how many
// of them are whole against how many the group needs (minSubGroups).
func (o *Options) printSubGroups(group *schedulingv1alpha1.PodGroup) error {
	// What preemption and reclaim take of the group once it runs: a replica, or all of it.
	disruption := "All (preemption and reclaim take the whole group)"
	if group.Spec.DisruptionMode == schedulingv1alpha1.DisruptionSingle {
		disruption = "Single (preemption and reclaim take one sub-group; the others run on)"
	}
	o.printf("Sub-groups (%d whole of the %d of %d it needs; disruption: %s):\n",
		group.Status.WholeSubGroups, schedulingv1alpha1.MinSubGroupsOf(&group.Spec), len(group.Spec.SubGroups), disruption)
	minOf := map[string]int32{}
	for _, sub := range group.Spec.SubGroups {
		minOf[sub.Name] = max(sub.MinMember, 1)
	}
	t := newTable(o.Out, "  NAME", "MIN", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "WHOLE")
	for _, sub := range group.Status.SubGroups {
		t.row("  "+sub.Name, strconv.Itoa(int(minOf[sub.Name])), strconv.Itoa(int(sub.Pending)), strconv.Itoa(int(sub.Running)),
			strconv.Itoa(int(sub.Succeeded)), strconv.Itoa(int(sub.Failed)), strconv.FormatBool(sub.Whole))
	}
	return t.flush()
}
