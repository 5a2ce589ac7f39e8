package job

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// taskView is a task of a job with its defaults applied.
type taskView struct {
	spec *batchv1alpha1.TaskSpec
	name string
	// replicas is never negative.
	replicas int32
	// min is how many of the task's pods must run at once: minAvailable, defaulting to replicas
	// (to subGroups.minSubGroups × size when set).
	min int32
	// hasTaskMinimum says whether min is a per-task minimum for the PodGroup's minTaskMember:
	// when the task sets minAvailable, or when the job's minimum takes every task's (it does by
	// default). A job minAvailable below the sum of its tasks' may be made of any of its pods.
	hasTaskMinimum bool
	// maxRetry bounds the task's restarts (RestartTask and RestartPod): the task's maxRetry, or
	// the job's when the task sets none.
	maxRetry int32
	// dependsOn names the tasks this one waits for (nil: none).
	dependsOn []string
	// waitsForAll: every pod of those tasks must run; otherwise one is enough.
	waitsForAll bool
}

// jobSpec is a job's spec with its defaults applied and checked.
type jobSpec struct {
	tasks  []taskView
	byName map[string]int
	// min is the job's minAvailable: how many pods must run at once. Defaults to the sum of the
	// tasks' minimums.
	min int32
	// minSuccess is how many pods must succeed for the job to complete (0: not set).
	minSuccess int32
	// replicas sums the tasks' replicas.
	replicas int32
	// invalid says why the job cannot run ("" if it can). The CRD rejects most such jobs; this
	// catches what a schema cannot express (dependency cycles) and objects that skipped it.
	invalid string
}

func (s *jobSpec) task(name string) (*taskView, bool) {
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return &s.tasks[i], true
}

// viewSpec applies the job's defaults and checks what the controller relies on.
func viewSpec(job *batchv1alpha1.Job) jobSpec {
	s := jobSpec{byName: map[string]int{}}
	var problems []string
	if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 {
		// The name becomes a label value and the prefix of pod and host names.
		problems = append(problems, fmt.Sprintf("job name %q cannot name its pods: %s", job.Name, errs[0]))
	}
	if len(job.Spec.Tasks) == 0 {
		problems = append(problems, "the job has no tasks")
	}
	var sumMin int32
	for i := range job.Spec.Tasks {
		spec := &job.Spec.Tasks[i]
		t := taskView{spec: spec, name: spec.Name, replicas: max(spec.Replicas, 0), maxRetry: job.Spec.MaxRetry}
		if spec.MaxRetry > 0 {
			t.maxRetry = spec.MaxRetry
		}
		t.min = t.replicas
		if sg := spec.SubGroups; sg != nil && sg.MinSubGroups != nil && sg.Size > 0 {
			// The task runs with minSubGroups of its sub-groups: their pods are its minimum.
			if n := t.replicas / sg.Size; *sg.MinSubGroups > n || *sg.MinSubGroups < 1 {
				problems = append(problems, fmt.Sprintf("task %s: subGroups.minSubGroups %d is not between 1 and its %d sub-groups", spec.Name, *sg.MinSubGroups, n))
			} else {
				t.min = *sg.MinSubGroups * sg.Size
			}
		}
		if spec.MinAvailable != nil {
			t.min = max(*spec.MinAvailable, 0)
			if t.min > t.replicas {
				problems = append(problems, fmt.Sprintf("task %s: minAvailable %d exceeds its %d replicas", spec.Name, t.min, t.replicas))
				t.min = t.replicas
			}
		}
		if spec.DependsOn != nil && len(spec.DependsOn.Name) > 0 {
			t.dependsOn = spec.DependsOn.Name
			t.waitsForAll = spec.DependsOn.Iteration != batchv1alpha1.IterationAny
		}
		if errs := validation.IsDNS1123Label(spec.Name); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("task name %q: %s", spec.Name, errs[0]))
		}
		if _, dup := s.byName[spec.Name]; dup {
			problems = append(problems, fmt.Sprintf("task %s is defined twice", spec.Name))
			continue
		}
		s.byName[spec.Name] = len(s.tasks)
		s.tasks = append(s.tasks, t)
		s.replicas += t.replicas
		sumMin += t.min
	}
	s.min = sumMin
	if job.Spec.MinAvailable != nil {
		s.min = max(*job.Spec.MinAvailable, 0)
		if s.min > s.replicas {
			problems = append(problems, fmt.Sprintf("minAvailable %d exceeds the job's %d pods", s.min, s.replicas))
		}
	}
	for i := range s.tasks {
		t := &s.tasks[i]
		t.hasTaskMinimum = t.spec.MinAvailable != nil || s.min >= sumMin
	}
	if job.Spec.MinSuccess != nil {
		s.minSuccess = max(*job.Spec.MinSuccess, 1)
		if s.minSuccess > s.replicas {
			problems = append(problems, fmt.Sprintf("minSuccess %d exceeds the job's %d pods", s.minSuccess, s.replicas))
		}
	}
	problems = append(problems, s.dependencyProblems()...)
	s.invalid = strings.Join(problems, "; ")
	return s
}

// dependencyProblems finds dependsOn entries that can never be satisfied: unknown tasks and
// cycles, which would leave the job Pending forever.
func (s *jobSpec) dependencyProblems() []string {
	var problems []string
	for _, t := range s.tasks {
		for _, dep := range t.dependsOn {
			if _, ok := s.byName[dep]; !ok {
				problems = append(problems, fmt.Sprintf("task %s depends on task %s, which the job does not have", t.name, dep))
			}
		}
	}
	// Depth-first search for a cycle, in spec order so that the message is stable.
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(s.tasks))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, s.tasks[i].name)
		for _, dep := range s.tasks[i].dependsOn {
			j, ok := s.byName[dep]
			if !ok {
				continue
			}
			switch state[j] {
			case onPath:
				start := slices.Index(path, dep)
				return append(slices.Clone(path[start:]), dep)
			case unvisited:
				if cycle := visit(j); cycle != nil {
					return cycle
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range s.tasks {
		if state[i] == unvisited {
			if cycle := visit(i); cycle != nil {
				problems = append(problems, "dependsOn forms a cycle: "+strings.Join(cycle, " → "))
				break
			}
		}
	}
	return problems
}
