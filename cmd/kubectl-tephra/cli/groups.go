package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// groupRow is one pod group as `kubectl tephra groups` shows it. Every group tephra-scheduler
// schedules is a Tephra PodGroup: its own, a Tephra Job's, or the translation of another API's
// group (upstream's PodGroup, Volcano's, scheduler-plugins', a JobSet's, a LeaderWorkerSet's),
// which From names as `kubectl get` would: kind.group/name. An upstream PodGroup's group has no
// Tephra object: it is translated here as both binaries translate it, in the phase its pods make
// it. Nor has a one-pod Tephra Job's group: its pod carries it, and the row is read from the pod.
type groupRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// From is the object the group stands for ("" for a PodGroup made as itself).
	From      string `json:"from,omitempty"`
	Queue     string `json:"queue"`
	Phase     string `json:"phase"`
	Running   int32  `json:"running"`
	MinMember int32  `json:"minMember"`
	SubGroups int    `json:"subGroups,omitempty"`
	Age       string `json:"age"`
}

func newGroupsCommand(o *Options) *cobra.Command {
	return newListCommand(o, "groups", "Pod groups of every kind Tephra schedules (its own, Tephra Jobs', upstream's, Volcano's, scheduler-plugins', JobSets', LeaderWorkerSets'): where each comes from, queue, phase, running pods against the minimum, age", "groups",
		o.groupRows, func(rows []groupRow, all, wide bool) error { return printGroups(o, rows, all, wide) })
}

func (o *Options) groupRows(all bool) ([]groupRow, error) {
	ns, err := o.listNamespace(all)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.tephra.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	upstream, err := o.upstreamGroups(ns, list.Items, nil)
	if err != nil {
		return nil, err
	}
	list.Items = append(list.Items, upstream...)
	carried, err := o.carriedGroups(ns, list.Items)
	if err != nil {
		return nil, err
	}
	list.Items = append(list.Items, carried...)
	slices.SortFunc(list.Items, func(a, b schedulingv1alpha1.PodGroup) int { return byNamespaceAndName(&a, &b) })
	rows := make([]groupRow, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, newGroupRow(&list.Items[i], o.Now()))
	}
	return rows, nil
}

// carriedGroups are the groups of one that pods carry (a one-pod Tephra Job's,
// schedulingv1alpha1.GroupOnPod) where no group of theirs is among objects.
func (o *Options) carriedGroups(ns string, objects []schedulingv1alpha1.PodGroup) ([]schedulingv1alpha1.PodGroup, error) {
	ctx, cancel := o.context()
	defer cancel()
	pods, err := o.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedulingv1alpha1.PodGroupLabel})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, g := range objects {
		seen[g.Namespace+"/"+g.Name] = true
	}
	var out []schedulingv1alpha1.PodGroup
	for i := range pods.Items {
		g, ok := schedulingv1alpha1.GroupOnPod(&pods.Items[i])
		if !ok || seen[g.Namespace+"/"+g.Name] {
			continue
		}
		seen[g.Namespace+"/"+g.Name] = true
		out = append(out, *g)
	}
	return out, nil
}

func newGroupRow(g *schedulingv1alpha1.PodGroup, now time.Time) groupRow {
	phase := string(g.Status.Phase)
	if phase == "" {
		phase = string(schedulingv1alpha1.PodGroupPending)
	}
	return groupRow{
		Namespace: g.Namespace, Name: g.Name, From: groupSource(g), Queue: g.Spec.Queue, Phase: phase,
		Running: g.Status.Running, MinMember: g.Spec.MinMember, SubGroups: len(g.Spec.SubGroups),
		Age: age(g.CreationTimestamp, now),
	}
}

// groupSource names the object a group stands for, kind.group/name as `kubectl get` takes it
// (Tephra's Job is job.batch.tephra.dev, upstream's PodGroup podgroup.scheduling.k8s.io): its
// controller, if it has one.
func groupSource(g *schedulingv1alpha1.PodGroup) string {
	ref := metav1.GetControllerOf(g)
	if ref == nil {
		return ""
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ""
	}
	kind := strings.ToLower(ref.Kind)
	if gv.Group != "" {
		kind += "." + gv.Group
	}
	return kind + "/" + ref.Name
}

func printGroups(o *Options, rows []groupRow, all, wide bool) error {
	header := []string{"NAME", "FROM", "QUEUE", "PHASE", "RUNNING/MIN", "AGE"}
	if all {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header[:len(header)-1], "SUBGROUPS", "AGE")
	}
	t := newTable(o.Out, header...)
	for _, r := range rows {
		cells := []string{r.Name, orNone(r.From), r.Queue, r.Phase, fmt.Sprintf("%d/%d", r.Running, r.MinMember)}
		if all {
			cells = append([]string{r.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, strconv.Itoa(r.SubGroups))
		}
		cells = append(cells, r.Age)
		t.row(cells...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.ErrOut, "No pod groups found.")
		return nil
	}
	return t.flush()
}
