package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// SubGroupName names the k-th sub-group of a task (spec.tasks[].subGroups): "<task>-<k>".
func SubGroupName(task string, k int32) string {
	return fmt.Sprintf("%s-%d", task, k)
}

// PodName is the name of a job's pod: <job>-<task>-<index>. Fixed names make creation
// idempotent: a pod created twice is refused the second time.
func PodName(job, task string, index int32) string {
	return fmt.Sprintf("%s-%s-%d", job, task, index)
}

// NewPod builds the pod of a task's slot from the task's template: named, labelled and owned
// by the job, with the job's scheduler and priority class. retry and generation say which run
// of the job and of the task it is created for. Plugins add to it afterwards.
func NewPod(job *batchv1alpha1.Job, task *batchv1alpha1.TaskSpec, index, retry, generation int32) *corev1.Pod {
	tmpl := task.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(job.Name, task.Name, index),
			Namespace:   job.Namespace,
			Labels:      tmpl.Labels,
			Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job")),
			},
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[schedulingv1alpha1.PodGroupLabel] = job.Name
	pod.Labels[schedulingv1alpha1.TaskLabel] = task.Name
	pod.Labels[batchv1alpha1.JobNameLabel] = job.Name
	pod.Labels[batchv1alpha1.TaskIndexLabel] = strconv.Itoa(int(index))
	if sg := task.SubGroups; sg != nil && sg.Size > 0 {
		pod.Labels[schedulingv1alpha1.SubGroupLabel] = SubGroupName(task.Name, index/sg.Size)
	}
	pod.Labels[JobRetryLabel] = strconv.Itoa(int(retry))
	pod.Labels[TaskGenerationLabel] = strconv.Itoa(int(generation))
	pod.Spec.SchedulerName = job.Spec.SchedulerName
	if pod.Spec.SchedulerName == "" {
		pod.Spec.SchedulerName = schedulingv1alpha1.SchedulerName
	}
	if job.Spec.PriorityClassName != "" {
		pod.Spec.PriorityClassName = job.Spec.PriorityClassName
		// The admission plugin fills priority from the class; a template's own value would be
		// refused as disagreeing with it.
		pod.Spec.Priority = nil
	}
	return pod
}

// podKind says what a pod observed for a job is to the state machine.
type podKind int

const (
	// current pods belong to the job's current run and task generation, in a slot of the spec.
	current podKind = iota
	// stale pods are of an earlier run or task generation, of a task or index the spec no
	// longer has, or unrecognisable: they are deleted and count for nothing.
	stale
)

// observedPod is a pod with what its labels say about it.
type observedPod struct {
	*corev1.Pod
	kind  podKind
	task  string
	index int32
}

func (p observedPod) terminating() bool { return p.DeletionTimestamp != nil }

// live pods are not finished: pending, running or unknown.
func (p observedPod) live() bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func (p observedPod) running() bool {
	return p.Status.Phase == corev1.PodRunning && !p.terminating()
}

// classify sorts the job's pods into current and stale for the job's run retry, in name order so
// that decisions are stable.
func classify(job *batchv1alpha1.Job, spec *jobSpec, retry int32, rec runRecord, pods []corev1.Pod) []observedPod {
	out := make([]observedPod, 0, len(pods))
	for i := range pods {
		pod := &pods[i]
		p := observedPod{Pod: pod, kind: stale, task: pod.Labels[schedulingv1alpha1.TaskLabel]}
		index, okIndex := parseCount(pod.Labels, batchv1alpha1.TaskIndexLabel)
		podRetry, okRetry := parseCount(pod.Labels, JobRetryLabel)
		gen, okGen := parseCount(pod.Labels, TaskGenerationLabel)
		p.index = index
		if t, ok := spec.task(p.task); ok && okIndex && okRetry && okGen &&
			index < t.replicas && pod.Name == PodName(job.Name, p.task, index) &&
			podRetry == retry && gen == rec.generation(p.task) {
			p.kind = current
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b observedPod) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// podRequests is what one pod of the task asks for, as the scheduler counts it.
func podRequests(task *batchv1alpha1.TaskSpec) corev1.ResourceList {
	return resourcehelper.PodRequests(&corev1.Pod{Spec: task.Template.Spec}, resourcehelper.PodResourcesOptions{})
}

// podGroupSpec is the PodGroup spec for the job's minimum that is still to be placed. need
// maps each task to how many more of its pods must run at once: its minimum for the tasks
// that may start (not waiting for dependencies), less its pods that already succeeded, because
// Tephra's gang counts only live pods and a finished pod will not run again. jobNeed is the job's
// minimum less all its succeeded pods. ok is false when nothing is left to place: the group's
// current minimum should then be left alone (minMember must be at least 1).
func podGroupSpec(job *batchv1alpha1.Job, spec *jobSpec, need map[string]int32, jobNeed int32) (schedulingv1alpha1.PodGroupSpec, bool) {
	out := schedulingv1alpha1.PodGroupSpec{
		Queue:               job.Spec.Queue,
		PriorityClassName:   job.Spec.PriorityClassName,
		ReadyTimeoutSeconds: job.Spec.ReadyTimeoutSeconds,
		Topology:            job.Spec.Topology.DeepCopy(),

		RuntimeEstimateSeconds: job.Spec.RuntimeEstimateSeconds,
	}
	if out.Queue == "" {
		out.Queue = schedulingv1alpha1.DefaultQueue
	}
	var sumNeed int32
	minResources := corev1.ResourceList{}
	// Requests of the pods that may make up the rest of minMember beyond the task minimums.
	var rest []corev1.ResourceList
	for i := range spec.tasks {
		t := &spec.tasks[i]
		n := need[t.name]
		sumNeed += n
		requests := podRequests(t.spec)
		counted := int32(0)
		if t.hasTaskMinimum && n > 0 {
			if out.MinTaskMember == nil {
				out.MinTaskMember = map[string]int32{}
			}
			out.MinTaskMember[t.name] = n
			for range n {
				addResources(minResources, requests)
			}
			counted = n
		}
		for ; counted < n; counted++ {
			rest = append(rest, requests)
		}
	}
	out.MinMember = min(jobNeed, sumNeed)
	if out.MinMember < 1 {
		return out, false
	}
	out.SubGroups, out.MinSubGroups = subGroupsOf(spec, need)
	if len(out.SubGroups) > 0 {
		// Without sub-groups left to place (their pods succeeded) the group can only go whole,
		// and the PodGroup refuses Single.
		out.DisruptionMode = job.Spec.DisruptionMode
	}
	// minResources must not exceed what the minimum really needs, or the scheduler would refuse
	// a group that fits: beyond the task minimums, count for each resource the smallest requests
	// that could complete minMember.
	var fromTasks int32
	for _, n := range out.MinTaskMember {
		fromTasks += n
	}
	if extra := int(out.MinMember - fromTasks); extra > 0 {
		names := map[corev1.ResourceName]bool{}
		for _, r := range rest {
			for name := range r {
				names[name] = true
			}
		}
		for name := range names {
			values := make([]resource.Quantity, len(rest))
			for i, r := range rest {
				values[i] = r[name]
			}
			slices.SortFunc(values, func(a, b resource.Quantity) int { return a.Cmp(b) })
			sum := minResources[name]
			for _, q := range values[:min(extra, len(values))] {
				sum.Add(q)
			}
			minResources[name] = sum
		}
	}
	for name, q := range minResources {
		if q.IsZero() {
			delete(minResources, name)
		}
	}
	if len(minResources) > 0 {
		out.MinResources = minResources
	}
	return out, true
}

func addResources(sum, add corev1.ResourceList) {
	for name, q := range add {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
}

// forceStuck force-deletes the job's pods whose deletion's grace period is over on a node that
// is gone or not Ready: no kubelet will confirm their end, and a pod's fixed name keeps its slot
// (and a restarting job) waiting until the object is gone. Such a pod still on its grace period
// is looked at again when it ends.
func (m *machine) forceStuck(p *plan) {
	for _, pod := range m.pods {
		if !pod.terminating() || !m.o.NodesDown[pod.Spec.NodeName] || pod.Spec.NodeName == "" {
			continue
		}
		if left := pod.DeletionTimestamp.Sub(m.o.Now); left > 0 {
			p.requeueAfter(left)
			continue
		}
		p.deletes = append(p.deletes, PodDeletion{Name: pod.Name, UID: pod.UID, Reason: ReasonNodeDown, Force: true})
	}
}

// subGroupsOf is the sub-groups of the tasks that split their pods (spec.tasks[].subGroups)
// and whose whole minimum is still to be placed. A task some of whose pods succeeded needs only
// the pods still to run, which no longer make whole sub-groups: its pods are then counted by the
// task's minimum alone. minSubGroups is the group's minimum of them when a task sets one (the
// job's only task with sub-groups), else nil: all.
func subGroupsOf(spec *jobSpec, need map[string]int32) (out []schedulingv1alpha1.SubGroup, minSubGroups *int32) {
	for i := range spec.tasks {
		t := &spec.tasks[i]
		sg := t.spec.SubGroups
		if sg == nil || sg.Size <= 0 || need[t.name] != t.min || t.min == 0 {
			continue
		}
		minMember := sg.Size
		if sg.MinMember != nil {
			minMember = min(*sg.MinMember, sg.Size)
		}
		for k := range t.replicas / sg.Size {
			out = append(out, schedulingv1alpha1.SubGroup{Name: SubGroupName(t.name, k), MinMember: minMember, Topology: sg.Topology.DeepCopy()})
		}
		if sg.MinSubGroups != nil && *sg.MinSubGroups < t.replicas/sg.Size {
			minSubGroups = ptr.To(*sg.MinSubGroups)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, minSubGroups
}

// deletePods deletes pods by name and UID: a pod of the same name created since is not touched.
func (r *Reconciler) deletePods(ctx context.Context, job *batchv1alpha1.Job, deletions []PodDeletion) []error {
	var mu sync.Mutex
	var errs []error
	workqueue.ParallelizeUntil(ctx, r.workers(), len(deletions), func(i int) {
		del := deletions[i]
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: del.Name, Namespace: job.Namespace}}
		opts := []client.DeleteOption{client.Preconditions{UID: &del.UID}}
		if del.Force {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		r.gone.deleting(del.UID, r.now())
		err := r.Delete(ctx, pod, opts...)
		if err == nil && del.Force {
			r.event(job, corev1.EventTypeWarning, "ForceDeleted", "Delete",
				"pod %s: its grace period is over and its node is gone or not Ready, so no kubelet will confirm its end: deleted it at once", del.Name)
		}
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return
		}
		mu.Lock()
		errs = append(errs, fmt.Errorf("delete pod %s (%s): %w", del.Name, del.Reason, err))
		mu.Unlock()
	})
	if len(errs) > 0 {
		r.event(job, corev1.EventTypeWarning, "FailedDelete", "Delete", "%v", errors.Join(errs...))
	}
	return errs
}

// createPods runs the plugins' OnJobAdd and creates the pods of the slots, and returns those it
// created. A slot whose name is already taken (the cache had not shown the pod yet) is simply
// skipped.
func (r *Reconciler) createPods(ctx context.Context, job *batchv1alpha1.Job, slots []Slot, jobPlugins []Plugin) ([]createdPod, []error) {
	for _, p := range jobPlugins {
		if err := p.OnJobAdd(ctx, job); err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil, nil // the namespace, and the job with it, is going away
			}
			err = fmt.Errorf("plugin %s: %w", p.Name(), err)
			r.event(job, corev1.EventTypeWarning, "PluginFailed", "Create", "%v; pods are not created until it succeeds", err)
			return nil, []error{err}
		}
	}
	spec := viewSpec(job)
	topology, problems := TaskTopologyOf(job)
	if len(problems) > 0 {
		r.event(job, corev1.EventTypeWarning, "InvalidTaskTopology", "Create", "%s; those parts are ignored", strings.Join(problems, "; "))
	}
	var mu sync.Mutex
	var errs []error
	var created []createdPod
	var taken []string
	create := func(slot Slot) {
		t, ok := spec.task(slot.Task)
		if !ok {
			return
		}
		pod := NewPod(job, t.spec, slot.Index, job.Status.RetryCount, slot.Generation)
		if groupOnPod(job, r.GroupObjects) {
			carryGroup(pod, job)
		}
		applyTaskTopology(pod, job, slot.Task, topology)
		for _, p := range jobPlugins {
			if err := p.OnPodCreate(pod, job); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("plugin %s on pod %s: %w", p.Name(), pod.Name, err))
				mu.Unlock()
				return
			}
		}
		err := r.Create(ctx, pod)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			r.unseen.created(job.UID, pod, r.now())
			created = append(created, createdPod{name: pod.Name, task: slot.Task})
		case apierrors.IsAlreadyExists(err):
			taken = append(taken, pod.Name)
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// The namespace, and the job with it, is going away: nothing to create or report.
		default:
			errs = append(errs, fmt.Errorf("create pod %s: %w", pod.Name, err))
		}
	}
	for _, wave := range creationWaves(slots, topology) {
		workqueue.ParallelizeUntil(ctx, r.workers(), len(wave), func(i int) { create(wave[i]) })
	}
	if len(taken) > 0 {
		r.warnIfNotOurs(ctx, job, taken)
	}
	if len(errs) > 0 {
		r.event(job, corev1.EventTypeWarning, "FailedCreate", "Create", "%v", errors.Join(errs...))
	}
	return created, errs
}

// warnIfNotOurs tells the user when a pod name the job needs is held by a pod it does not own:
// the job cannot start that pod until it is gone.
func (r *Reconciler) warnIfNotOurs(ctx context.Context, job *batchv1alpha1.Job, names []string) {
	for _, name := range names {
		pod := &corev1.Pod{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, pod); err != nil {
			continue
		}
		if !metav1.IsControlledBy(pod, job) && pod.DeletionTimestamp == nil {
			r.event(job, corev1.EventTypeWarning, "PodNameTaken", "Create",
				"pod %s exists and does not belong to this job: delete it so that the job can create its own", name)
		}
	}
}
