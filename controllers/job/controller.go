// Package job runs Tephra's batch Jobs (batch.tephra.dev/v1alpha1, Volcano's Job field for
// field). It decides, for each Job: its PodGroup (the gang the scheduler places at once), which
// pods to create and delete, which lifecycle policy applies to what happened to them (restart
// the job, a task or a pod, abort, terminate or complete the job), the job's phase, and when a
// finished job is deleted.
//
// The decisions are a pure function of the observed Job and pods (Decide, in decide.go); the
// Reconciler only applies them. Every decision that must not be taken twice (a restart counted,
// a task's generation bumped) is written to the Job before any pod is touched, and pods carry
// the run and task generation they were created for, so a controller that restarts at any
// point finishes what it started exactly once. See docs/job.md for the rules.
package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/job/plugins"
)

// ControllerName names the controller, in logs and as the reporting controller of its events.
const ControllerName = "tephra-job"

// errNamespaceTerminating: the job's namespace is being deleted, and the job with it; nothing
// new can be created in it.
var errNamespaceTerminating = errors.New("the namespace is being deleted")

// ControllerIndex is the field index of pods by the UID of their controller, when that is a
// Job, registered by SetupWithManager.
const ControllerIndex = "tephra.job.controller"

// Plugin adds to a job's pods and creates what they need (Services, Secrets, ConfigMaps); the
// plugins live in controllers/job/plugins.
type Plugin interface {
	Name() string
	// OnPodCreate changes a pod before it is created; the pod is already named, labelled and
	// owned by the job.
	OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error
	// OnJobAdd creates what the job's pods need. It is idempotent: it runs before every round of
	// pod creations.
	OnJobAdd(ctx context.Context, job *batchv1alpha1.Job) error
	// OnJobDelete removes it again once the job has finished.
	OnJobDelete(ctx context.Context, job *batchv1alpha1.Job) error
}

// PluginsFunc returns the plugins a job asks for in spec.plugins; an error means the job names a
// plugin that does not exist or gives it arguments it refuses.
type PluginsFunc func(c client.Client, scheme *runtime.Scheme, job *batchv1alpha1.Job) ([]Plugin, error)

// PluginsForJob is the plugins of controllers/job/plugins that the job asks for.
func PluginsForJob(c client.Client, scheme *runtime.Scheme, job *batchv1alpha1.Job) ([]Plugin, error) {
	ps, err := plugins.ForJob(c, scheme, job)
	if err != nil {
		return nil, err
	}
	out := make([]Plugin, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out, nil
}

// Reconciler applies the state machine's decisions to Jobs.
type Reconciler struct {
	client.Client
	// APIReader reads Jobs past the cache, to check that a decision was taken on the latest
	// version of the job before its pods are touched.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	// Recorder records events on Jobs: phase changes and actions.
	Recorder events.EventRecorder
	// Plugins gives the plugins of a job (PluginsForJob if nil).
	Plugins PluginsFunc
	// PluginClient is the client plugins read and write their objects with (Client if nil).
	// SetupWithManager gives them one that reads Secrets, ConfigMaps and Services from the
	// apiserver: a plugin reads a few of them when a job's pods are created, which does not
	// justify caching every Secret of the cluster.
	PluginClient client.Client
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Workers bounds concurrent pod creations and deletions per job (8 if 0).
	Workers int
	// ConcurrentSyncs is how many jobs are decided at once (1 if 0).
	ConcurrentSyncs int
	// GroupObjects makes every job's group a PodGroup object (Observed.GroupObjects).
	GroupObjects bool

	// gone remembers pods deleted before a decision saw them end.
	gone gonePods
	// unseen are pods created that the cache has not shown yet, and first the jobs' first
	// statuses announced and not yet written (unwritten.go).
	unseen unseenPods
	first  firstStatuses
}

// SetupWithManager indexes pods by their job, registers the job metrics, and runs the reconciler
// for every change of a Job, its pods or its PodGroup.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, ControllerIndex, controllerIndexValue); err != nil {
		return fmt.Errorf("index pods by job: %w", err)
	}
	if err := registerMetrics(mgr.GetCache(), mgr.Elected()); err != nil {
		return err
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.PluginClient == nil {
		c, err := client.New(mgr.GetConfig(), client.Options{
			Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			Cache: &client.CacheOptions{Reader: mgr.GetCache(), DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Service{}}},
		})
		if err != nil {
			return fmt.Errorf("client for job plugins: %w", err)
		}
		r.PluginClient = c
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&batchv1alpha1.Job{}).
		Watches(&corev1.Pod{}, r.podHandler()).
		Owns(&schedulingv1alpha1.PodGroup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.ConcurrentSyncs, 1)}).
		Complete(r)
}

// controllerIndexValue is the ControllerIndex value of a pod: its controller's UID if that is a
// Job.
func controllerIndexValue(obj client.Object) []string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, batchv1alpha1.GroupName+"/") {
		return nil
	}
	return []string{string(ref.UID)}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile decides what the job needs and applies it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := &batchv1alpha1.Job{}
	if err := r.Get(ctx, req.NamespacedName, job); err != nil {
		// A deleted job's pods and PodGroup go with it: they are owned by it.
		if apierrors.IsNotFound(err) {
			r.gone.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if job.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != batchv1alpha1.JobControllerManager {
		// Another controller runs it (MultiKueue on a manager cluster, which runs it on a
		// worker and writes its status here): this one creates nothing and writes nothing.
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingFields{ControllerIndex: string(job.UID)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pods of job %s: %w", req.NamespacedName, err)
	}
	now := r.now()
	nodesDown, err := r.nodesDown(ctx, pods.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	// What was written of the status, and what the decision starts from: the first status the
	// job's first decision announced, while it waits to be written.
	written := job.Status.DeepCopy()
	first, unwritten := r.first.of(job.UID)
	switch {
	case unwritten && job.Status.State.Phase == "":
		job.Status = first.status
	case unwritten:
		r.first.forget(job.UID) // written, or the job's status was set by another writer
		unwritten = false
	}
	observed := r.unseen.with(job.UID, pods.Items, now)
	d := Decide(Observed{Job: job, Pods: observed, Gone: r.gone.of(req.NamespacedName, observed, now), NodesDown: nodesDown, Now: now, GroupObjects: r.GroupObjects})

	var jobPlugins []Plugin
	if len(job.Spec.Plugins) > 0 && (len(d.Create) > 0 || d.Finished) {
		pluginsFor, pluginClient := r.Plugins, r.PluginClient
		if pluginsFor == nil {
			pluginsFor = PluginsForJob
		}
		if pluginClient == nil {
			pluginClient = r.Client
		}
		var err error
		if jobPlugins, err = pluginsFor(pluginClient, r.Scheme, job); err != nil {
			// A plugin that does not exist or refuses its arguments will not change its mind.
			return ctrl.Result{}, r.failJob(ctx, job, ReasonPluginError, fmt.Sprintf("spec.plugins: %v", err))
		}
	}
	var waiting *firstStatus
	if unwritten {
		waiting = &first
	}
	return r.apply(ctx, job, written, waiting, d, jobPlugins)
}

// apply carries out a decision: first what must be remembered (the run record, the status),
// then what touches other objects, so that a controller restarted in between redoes the second
// part from the first and never decides anything twice. A job's first decision is the exception
// (createsFirst). written is the status the apiserver holds; job's is the one decided from, the
// first status announced and not yet written if first is set.
func (r *Reconciler) apply(ctx context.Context, job *batchv1alpha1.Job, written *batchv1alpha1.JobStatus, first *firstStatus, d Decision, jobPlugins []Plugin) (ctrl.Result, error) {
	previous := job.Status.DeepCopy()
	if createsFirst(job, d) {
		change, err := r.podGroupChange(ctx, job, d.PodGroup, d.JobMinMember)
		if err != nil {
			return ctrl.Result{}, err
		}
		made, err := r.act(ctx, job, d, change, jobPlugins)
		// One event says the job's first phase and what it created: in a burst of small jobs,
		// every event is a write the apiserver serves before the next job's pods.
		r.recordDecision(job, previous, d, made)
		if err != nil {
			return ctrl.Result{}, err
		}
		// The status counts the pods just created, Pending as they are: the cache showing them
		// then changes nothing, and costs no second write.
		countCreated(&d.Status, made.pods)
		if firstMayWait(d) {
			// Announced by the event just recorded; written once the pods leave Pending, or
			// when due (unwritten.go).
			r.first.announced(job.UID, d.Status, r.now().Add(firstStatusDelay))
			return ctrl.Result{RequeueAfter: earliestRequeue(d.RequeueAfter, firstStatusDelay)}, nil
		}
		if _, err := r.writeIntent(ctx, job, written, d); err != nil {
			// A conflict: the job changed since the cache showed it, and that change is on its
			// way as an event.
			return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(err))
		}
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	if first != nil {
		if now := r.now(); mayWaitToWrite(d, *first, now) {
			change, err := r.podGroupChange(ctx, job, d.PodGroup, d.JobMinMember)
			if err != nil {
				return ctrl.Result{}, err
			}
			if !change.changed {
				return ctrl.Result{RequeueAfter: earliestRequeue(d.RequeueAfter, first.due.Sub(now))}, nil
			}
		}
	}
	wrote, err := r.writeIntent(ctx, job, written, d)
	if err != nil {
		// On a conflict, the job changed since the cache showed it; that change is on its way
		// as an event, and the next decision starts from it.
		return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(err))
	}
	r.recordDecision(job, previous, d, made{})
	change, err := r.podGroupChange(ctx, job, d.PodGroup, d.JobMinMember)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !wrote && (change.changed || len(d.Delete) > 0 || len(d.Create) > 0 || d.DeleteJob) {
		// Nothing was written, so nothing proved that the cached job is the latest: a stale job
		// (say, one that the cache still shows Running after a restart was written) must not
		// create pods of an old run.
		latest := &batchv1alpha1.Job{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), latest); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if latest.ResourceVersion != job.ResourceVersion {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
	}
	made, err := r.act(ctx, job, d, change, jobPlugins)
	r.announce(job, made)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
}

// createsFirst says whether a decision creates the job's PodGroup and pods before it writes the
// job's status: the job's first decision, which creates and remembers nothing a restarted
// controller would need (no run record, no retry, nothing deleted). Its pods then wait for no
// status write, as batch/v1's do not; a controller restarted in between sees them, with their
// names that the run fixes, and decides the same. A cache that shows the job before its first
// status was written makes a decision create what exists already, which it finds taken.
func createsFirst(job *batchv1alpha1.Job, d Decision) bool {
	return job.Status.State.Phase == "" && d.Record == nil && !d.ConsumeResume &&
		len(d.Create) > 0 && len(d.Delete) == 0 && !d.DeleteJob && !d.Finished
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// act carries out what a decision does to objects other than the job's status: its PodGroup
// (as podGroupChange found it), pods, plugins, and the job's deletion. It returns what it
// created, for the caller to announce.
func (r *Reconciler) act(ctx context.Context, job *batchv1alpha1.Job, d Decision, change groupChange, jobPlugins []Plugin) (made, error) {
	var m made
	group := change.group
	if group != nil && !metav1.IsControlledBy(group, job) && len(d.Create) > 0 {
		r.event(job, corev1.EventTypeWarning, "PodGroupNotOwned", "Create",
			"PodGroup %s exists and does not belong to this job: its pods join it, with its minimum", job.Name)
	}
	var errs []error
	// A new group is created beside the pods, not before them: its pods, created first, only
	// wait for it at TephraGang's PreEnqueue, which its creation ends at once, and a Job's first
	// pod then costs one apiserver round trip less. A group that exists is changed first: its
	// pods must not meet the minimum it had.
	var newGroup chan groupWritten
	if change.changed && group.ResourceVersion == "" && len(d.Create) > 0 {
		newGroup = make(chan groupWritten, 1)
		go func() {
			created, err := r.writePodGroup(ctx, job, group, change.previousMin)
			newGroup <- groupWritten{created, err}
		}()
	} else if change.changed {
		created, err := r.writePodGroup(ctx, job, group, change.previousMin)
		if err != nil {
			if errors.Is(err, errNamespaceTerminating) {
				return m, nil // the job goes with its namespace
			}
			// Pods without their group would only be refused by the scheduler.
			return m, err
		}
		if created {
			m.group = group
		}
	}
	errs = append(errs, r.deletePods(ctx, job, d.Delete)...)
	if len(d.Create) > 0 {
		var createErrs []error
		m.pods, createErrs = r.createPods(ctx, job, d.Create, jobPlugins)
		m.run = job.Status.RetryCount
		errs = append(errs, createErrs...)
	}
	if newGroup != nil {
		switch w := <-newGroup; {
		case w.created:
			m.group = group
		case w.err != nil && !errors.Is(w.err, errNamespaceTerminating):
			// Its pods wait for it until the next decision creates it (FailedCreatePodGroup
			// says so on the job).
			errs = append(errs, w.err)
		}
	}
	if d.Finished {
		for _, p := range jobPlugins {
			if err := p.OnJobDelete(ctx, job); err != nil {
				errs = append(errs, fmt.Errorf("plugin %s: %w", p.Name(), err))
			}
		}
	}
	if d.DeleteJob {
		errs = append(errs, r.deleteJob(ctx, job))
	}
	return m, errors.Join(errs...)
}

// groupWritten is what writing a new PodGroup came to.
type groupWritten struct {
	created bool
	err     error
}

// deleteJob deletes a finished job whose TTL expired.
func (r *Reconciler) deleteJob(ctx context.Context, job *batchv1alpha1.Job) error {
	uid := job.UID
	err := r.Delete(ctx, job, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case err == nil:
		r.event(job, corev1.EventTypeNormal, "Deleted", "TTLExpired", "the job finished %s ago (ttlSecondsAfterFinished %d): deleted it",
			r.now().Sub(job.Status.State.LastTransitionTime.Time).Round(time.Second), *job.Spec.TTLSecondsAfterFinished)
		ctrl.LoggerFrom(ctx).Info("deleted finished job", "job", client.ObjectKeyFromObject(job))
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil
	default:
		return err
	}
}

// writeIntent writes the run record (with the resume annotation consumed) and then the status,
// each with optimistic concurrency: a write from a stale cache is refused rather than counting a
// restart twice. wrote says whether anything was written.
func (r *Reconciler) writeIntent(ctx context.Context, job *batchv1alpha1.Job, written *batchv1alpha1.JobStatus, d Decision) (wrote bool, err error) {
	recordChanged := d.Record != nil && job.Annotations[RestartsAnnotation] != *d.Record
	if recordChanged || d.ConsumeResume {
		before := job.DeepCopy()
		if job.Annotations == nil {
			job.Annotations = map[string]string{}
		}
		if recordChanged {
			job.Annotations[RestartsAnnotation] = *d.Record
		}
		if d.ConsumeResume {
			delete(job.Annotations, ResumeAnnotation)
		}
		if err := r.Patch(ctx, job, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, err
		}
		wrote = true
	}
	if !equality.Semantic.DeepEqual(*written, d.Status) {
		job.Status = d.Status
		if err := r.Status().Update(ctx, job); err != nil {
			return wrote, err
		}
		wrote = true
	}
	r.first.forget(job.UID)
	return wrote, nil
}

// failJob fails a job for a reason outside the state machine (a plugin it names is unusable).
func (r *Reconciler) failJob(ctx context.Context, job *batchv1alpha1.Job, reason, message string) error {
	if Finished(job.Status.State.Phase) {
		return nil
	}
	previous := job.Status.DeepCopy()
	job.Status.State = batchv1alpha1.JobState{Phase: batchv1alpha1.JobFailed, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(r.now()).Rfc3339Copy()}
	if err := r.Status().Update(ctx, job); err != nil {
		if apierrors.IsConflict(err) {
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	r.recordDecision(job, previous, Decision{Transitions: []Transition{{From: previous.State.Phase, To: batchv1alpha1.JobFailed, Reason: reason, Message: message}}}, made{})
	return nil
}

// passedToGroup are the annotations of a job that its PodGroup carries, for tephra-scheduler reads
// them from the group: the SLA waiting time, whether the job's pods may be moved to make whole
// nodes for a waiting gang (a job that checkpoints, docs/consolidation.md), and the datasets its
// pods read (docs/io.md).
var passedToGroup = []string{schedulingv1alpha1.SLAWaitingTimeAnnotation, schedulingv1alpha1.MovableAnnotation,
	schedulingv1alpha1.DatasetsAnnotation, schedulingv1alpha1.DataLocalityAnnotation}

func (r *Reconciler) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return 8
}

func queueOf(job *batchv1alpha1.Job) string {
	if job.Spec.Queue == "" {
		return schedulingv1alpha1.DefaultQueue
	}
	return job.Spec.Queue
}

// nodesDown returns the nodes of the job's terminating pods that are gone or not Ready, from the
// cache (the Queue controller watches nodes already).
func (r *Reconciler) nodesDown(ctx context.Context, pods []corev1.Pod) (map[string]bool, error) {
	var down map[string]bool
	for i := range pods {
		name := pods[i].Spec.NodeName
		if pods[i].DeletionTimestamp == nil || name == "" {
			continue
		}
		if _, seen := down[name]; seen {
			continue
		}
		if down == nil {
			down = map[string]bool{}
		}
		node := &corev1.Node{}
		err := r.Get(ctx, client.ObjectKey{Name: name}, node)
		switch {
		case apierrors.IsNotFound(err):
			down[name] = true
		case err != nil:
			return nil, fmt.Errorf("get node %s of terminating pod %s: %w", name, pods[i].Name, err)
		default:
			down[name] = !nodeReady(node)
		}
	}
	return down, nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
