package job

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Volcano's annotations for task topology, read when spec.taskTopology is not set:
// "ps,worker;ps,evaluator" lists two sets of tasks, "ps,worker,chief" an order.
const (
	VolcanoTaskAffinityAnnotation     = "volcano.sh/task-topology-affinity"
	VolcanoTaskAntiAffinityAnnotation = "volcano.sh/task-topology-anti-affinity"
	VolcanoTaskOrderAnnotation        = "volcano.sh/task-topology-task-order"
)

// taskTopologyWeight is the weight of the preferred inter-pod (anti-)affinity terms that carry a
// job's task topology: the largest there is, so that it outweighs the resource scores (which
// would spread, or pack, pods on their own) without ever filtering a node out.
const taskTopologyWeight = 100

// TaskTopologyOf is the job's task topology: spec.taskTopology, else Volcano's annotations.
// problems lists what in the annotations names no task of the job or cannot be read; those parts
// are left out. The spec's own names are checked by the CRD.
func TaskTopologyOf(job *batchv1alpha1.Job) (topology *batchv1alpha1.TaskTopology, problems []string) {
	if job.Spec.TaskTopology != nil {
		return job.Spec.TaskTopology, nil
	}
	a := job.Annotations
	if a[VolcanoTaskAffinityAnnotation] == "" && a[VolcanoTaskAntiAffinityAnnotation] == "" && a[VolcanoTaskOrderAnnotation] == "" {
		return nil, nil
	}
	known := func(name string) bool {
		return slices.ContainsFunc(job.Spec.Tasks, func(t batchv1alpha1.TaskSpec) bool { return t.Name == name })
	}
	sets := func(key string) []batchv1alpha1.TaskSet {
		var out []batchv1alpha1.TaskSet
		for _, group := range strings.Split(a[key], ";") {
			set, ok := taskList(group, known)
			if !ok {
				problems = append(problems, fmt.Sprintf("annotation %s: %q names a task the job does not have", key, group))
				continue
			}
			if len(set) > 0 {
				out = append(out, set)
			}
		}
		return out
	}
	topology = &batchv1alpha1.TaskTopology{
		Affinity:     sets(VolcanoTaskAffinityAnnotation),
		AntiAffinity: sets(VolcanoTaskAntiAffinityAnnotation),
	}
	order, ok := taskList(a[VolcanoTaskOrderAnnotation], known)
	if !ok {
		problems = append(problems, fmt.Sprintf("annotation %s: %q names a task the job does not have", VolcanoTaskOrderAnnotation, a[VolcanoTaskOrderAnnotation]))
	} else {
		topology.Order = order
	}
	return topology, problems
}

// taskList reads "a,b,c" into distinct task names; ok is false if one is not a task of the job.
func taskList(s string, known func(string) bool) (names []string, ok bool) {
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.Contains(names, name) {
			continue
		}
		if !known(name) {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}

// applyTaskTopology adds to a pod of the task the preferred inter-pod affinity that carries the
// topology: toward the job's pods of every task it shares an affinity set with (its own task
// included, so that whichever pod is placed first draws the others), away from those of every
// task it shares an anti-affinity set with. kube-scheduler's InterPodAffinity scores them per
// node; the gang and its topology domain still decide which nodes are possible.
func applyTaskTopology(pod *corev1.Pod, job *batchv1alpha1.Job, task string, topology *batchv1alpha1.TaskTopology) {
	if topology == nil {
		return
	}
	affine := tasksSharingASet(topology.Affinity, task)
	anti := tasksSharingASet(topology.AntiAffinity, task)
	if len(affine) == 0 && len(anti) == 0 {
		return
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	term := func(tasks []string) corev1.WeightedPodAffinityTerm {
		return corev1.WeightedPodAffinityTerm{
			Weight: taskTopologyWeight,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{batchv1alpha1.JobNameLabel: job.Name},
					MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: schedulingv1alpha1.TaskLabel, Operator: metav1.LabelSelectorOpIn, Values: tasks,
					}},
				},
			},
		}
	}
	if len(affine) > 0 {
		if pod.Spec.Affinity.PodAffinity == nil {
			pod.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		pa := pod.Spec.Affinity.PodAffinity
		pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution, term(affine))
	}
	if len(anti) > 0 {
		if pod.Spec.Affinity.PodAntiAffinity == nil {
			pod.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		pa := pod.Spec.Affinity.PodAntiAffinity
		pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution, term(anti))
	}
}

// tasksSharingASet lists, sorted, the tasks of every set that holds task, task included.
func tasksSharingASet(sets []batchv1alpha1.TaskSet, task string) []string {
	var out []string
	for _, set := range sets {
		if !slices.Contains(set, task) {
			continue
		}
		for _, t := range set {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// creationWaves splits slots into the waves their pods are created in: first the tasks of the
// topology's order, one wave each in that order, then every other task. A wave is created only
// after the previous one, so its pods enter the scheduling queue earlier and, in a gang (whose
// members are sorted by when they were queued), are placed first.
func creationWaves(slots []Slot, topology *batchv1alpha1.TaskTopology) [][]Slot {
	if topology == nil || len(topology.Order) == 0 {
		return [][]Slot{slots}
	}
	rank := func(task string) int {
		if i := slices.Index(topology.Order, task); i >= 0 {
			return i
		}
		return len(topology.Order)
	}
	waves := make([][]Slot, len(topology.Order)+1)
	for _, s := range slots {
		r := rank(s.Task)
		waves[r] = append(waves[r], s)
	}
	return slices.DeleteFunc(waves, func(w []Slot) bool { return len(w) == 0 })
}
