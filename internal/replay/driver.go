package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/internal/replay/report"
	"github.com/tephra-dev/tephra/internal/replay/trace"
)

// driver submits a trace's jobs at their times, watches their pods, and plays their work: it is
// the replay's model of what a job does, the same in every configuration.
type driver struct {
	config    *Configuration
	workloads *workloads
	client    kubernetes.Interface
	speedup   float64
	log       io.Writer

	// actions run the driver's writes (annotations, pods created again, deletions) off the
	// informer's goroutine, in order per job.
	actions chan action

	mu   sync.Mutex
	t0   time.Time
	jobs []*jobRun
	// byName finds a job by its Kubernetes name.
	byName map[string]*jobRun
	// lastProgress is when a job last started, ended or bound a pod: the replay gives up when
	// nothing progresses for its stall timeout while no job works.
	lastProgress time.Time
	// submitted counts the jobs created; failures says why some could not be.
	submitted int
	failures  []string
	// caches are the nodes' data caches (nil: the trace reads no dataset).
	caches *nodeCaches
}

// action is one write of the driver's.
type action struct {
	what string
	do   func(ctx context.Context) error
}

// jobRun is one trace job in one run.
type jobRun struct {
	trace trace.Job
	name  string
	// submitted is when it was created (zero: not yet).
	submitted time.Time
	pods      map[types.UID]*podRun
	order     []*podRun
	// working says that its minimum runs and its work goes on until workEnd.
	working bool
	workEnd time.Time
	// started are the times its minimum came to run.
	started []time.Time
	// done says that its work ended (a pod of it succeeded); ended is when its last pod
	// stopped holding its node then.
	done    bool
	removed bool
	ended   time.Time
	// recreated counts the pods the driver created again (bare pods: B0, B1), which name them.
	recreated int
	// transfer is the trace seconds its starts waited for its dataset (DataOptions).
	transfer float64
}

// podRun is one pod of a job.
type podRun struct {
	name  string
	index int
	// seen is when the replay first saw the pod; bound, running and ended when it was seen
	// bound, Running and no longer holding its node (terminal or gone).
	seen, bound, running, ended time.Time
	succeeded, preempted        bool
	deleting                    bool
	// node is where it was bound; evicted when it was seen evicted by the scheduler, and why (its
	// DisruptionTarget condition's message: for whom, and for which queue).
	node      string
	evicted   time.Time
	evictedBy string
	// replaced says that the driver created the pod again once it was gone (bare pods: B0, B1).
	replaced bool
	// endsAt is the end time last written into its duration annotation.
	endsAt string
}

// farFuture is the end written into the pods of a job that lost its minimum: they run on,
// holding their nodes, until the job's work starts again.
const farFuture = 100 * 365 * 24 * time.Hour

func newDriver(config *Configuration, w *workloads, client kubernetes.Interface, jobs []trace.Job, speedup float64, log io.Writer) *driver {
	d := &driver{config: config, workloads: w, client: client, speedup: speedup, log: log,
		actions: make(chan action, 100000), byName: map[string]*jobRun{}}
	for i, name := range jobNames(jobs) {
		j := &jobRun{trace: jobs[i], name: name, pods: map[types.UID]*podRun{}}
		d.jobs = append(d.jobs, j)
		d.byName[name] = j
	}
	return d
}

// watch starts the pod informer of the replay's namespace.
func (d *driver) watch(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = jobLabel }))
	informer := factory.Core().V1().Pods().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.observe(obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj any) { d.observe(obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				d.observe(pod, true)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("the pod informer did not sync")
	}
	return nil
}

// act runs the driver's writes with a few workers. A write that fails is logged: the replay goes
// on, and what it failed to do shows in the outcomes.
func (d *driver) act(ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case a, ok := <-d.actions:
					if !ok {
						return
					}
					if err := a.do(ctx); err != nil && ctx.Err() == nil {
						fmt.Fprintf(d.log, "  %s: %s: %v\n", d.config.Name, a.what, err)
					}
				}
			}
		})
	}
	return &wg
}

// submitAll creates each job at its submit time divided by the speedup, from t0.
func (d *driver) submitAll(ctx context.Context, t0 time.Time) {
	for _, j := range d.jobs {
		at := t0.Add(time.Duration(j.trace.Submit / d.speedup * float64(time.Second)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		now := time.Now()
		d.mu.Lock()
		j.submitted = now
		d.mu.Unlock()
		var err error
		for attempt := range 3 {
			if err = d.workloads.submit(ctx, j.trace, j.name); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		d.mu.Lock()
		if err != nil {
			j.submitted = time.Time{}
			d.failures = append(d.failures, fmt.Sprintf("job %s (line %d) was not submitted: %v", j.name, j.trace.Line, err))
		} else {
			d.submitted++
		}
		d.lastProgress = time.Now()
		d.mu.Unlock()
	}
}

// observe records what a pod's new state says and plays its job on.
func (d *driver) observe(pod *corev1.Pod, gone bool) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.byName[pod.Labels[jobLabel]]
	if j == nil {
		return
	}
	p := j.pods[pod.UID]
	if p == nil {
		if gone {
			return
		}
		index, _ := strconv.Atoi(pod.Labels[indexLabel])
		p = &podRun{name: pod.Name, index: index, seen: now}
		j.pods[pod.UID] = p
		j.order = append(j.order, p)
	}
	if pod.Spec.NodeName != "" && p.bound.IsZero() {
		p.bound, p.node = now, pod.Spec.NodeName
		d.lastProgress = now
	}
	if pod.Status.Phase == corev1.PodRunning && p.running.IsZero() && pod.DeletionTimestamp == nil {
		p.running = now
	}
	if pod.DeletionTimestamp != nil {
		p.deleting = true
	}
	if why, ok := preemption(pod); ok && !p.preempted {
		p.preempted, p.evicted, p.evictedBy = true, now, why
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if (terminal || gone) && p.ended.IsZero() {
		p.ended = now
		p.succeeded = pod.Status.Phase == corev1.PodSucceeded
	}
	if gone && !p.succeeded && !p.replaced && !j.done && !j.removed && !d.config.jobControllerReplacesPods() {
		p.replaced = true
		d.recreate(j, p)
	}
	d.play(j, now)
}

// preemption says whether the scheduler evicted the pod to make room for another, and why.
func preemption(pod *corev1.Pod) (why string, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			return c.Message, true
		}
	}
	return "", false
}

// recreate creates a pod again in place of one deleted before its job was done, as a job
// controller would (B0, B1: the jobs are bare pods, which no job controller replaces).
func (d *driver) recreate(j *jobRun, p *podRun) {
	j.recreated++
	podName := fmt.Sprintf("%s-%d-r%d", j.name, p.index, j.recreated)
	job, index := j.trace, p.index
	d.actions <- action{what: "creating pod " + podName + " again", do: func(ctx context.Context) error {
		return d.workloads.createPod(ctx, job, j.name, index, podName)
	}}
}

// play moves a job on from what its pods do:
//   - once every pod of its minimum runs, its work starts: its pods are told to end at
//     workEnd, the job's duration (divided by the speedup) later; a pod of the job that starts
//     running while it works is told the same;
//   - once a pod ends Succeeded while it works, the work is done, and what is left of the job
//     is deleted;
//   - if its running pods fall below its minimum while it works (a pod was preempted), the work
//     is lost: the pods left are told to run on, and the work starts again when the minimum runs
//     again;
//   - once its work is done and no pod of it holds a node, it has ended.
func (d *driver) play(j *jobRun, now time.Time) {
	if j.done {
		if j.ended.IsZero() && j.allEnded() {
			j.ended = j.lastEnd()
			d.lastProgress = now
		}
		return
	}
	var running []*podRun
	succeeded := false
	for _, p := range j.order {
		switch {
		case p.succeeded:
			succeeded = true
		case !p.running.IsZero() && p.ended.IsZero() && !p.deleting:
			running = append(running, p)
		}
	}
	switch {
	case j.working && succeeded:
		j.done, j.working = true, false
		d.lastProgress = now
		d.cacheData(j)
		d.remove(j)
		if j.allEnded() {
			j.ended = j.lastEnd()
		}
		return
	case j.working && len(running) < j.trace.MinReplicas:
		j.working = false
		d.tellEnd(j, running, now.Add(farFuture))
		return
	case !j.working && len(running) >= j.trace.MinReplicas:
		j.working = true
		// A job placed away from its data pulls it first (DataOptions).
		transfer := d.transferFor(j, running)
		j.transfer += transfer
		j.workEnd = now.Add(time.Duration((j.trace.Duration + transfer) / d.speedup * float64(time.Second)))
		j.started = append(j.started, now)
		d.lastProgress = now
	}
	if j.working {
		d.tellEnd(j, running, j.workEnd)
	}
}

// tellEnd writes the end time into the duration annotation of those pods that do not hold it
// yet; kwok ends them then (manifests/kwok/stages.yaml). An absolute time, not a duration, so
// that any other write to the pod, which makes kwok count a duration again, changes nothing.
func (d *driver) tellEnd(j *jobRun, pods []*podRun, end time.Time) {
	value := end.UTC().Format(time.RFC3339Nano)
	for _, p := range pods {
		if p.endsAt == value {
			continue
		}
		p.endsAt = value
		name := p.name
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{durationAnnotation: value}}})
		d.actions <- action{what: "telling pod " + name + " when it ends", do: func(ctx context.Context) error {
			_, err := d.client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}}
	}
}

// remove deletes what is left of a job whose work is done.
func (d *driver) remove(j *jobRun) {
	j.removed = true
	var pods []string
	for _, p := range j.order {
		if p.ended.IsZero() {
			pods = append(pods, p.name)
		}
	}
	name := j.name
	d.actions <- action{what: "deleting job " + name, do: func(ctx context.Context) error {
		return d.workloads.remove(ctx, name, pods)
	}}
}

// allEnded says that no pod of the job holds a node any more.
func (j *jobRun) allEnded() bool {
	for _, p := range j.order {
		if p.ended.IsZero() && !p.bound.IsZero() {
			return false
		}
	}
	return true
}

func (j *jobRun) lastEnd() time.Time {
	var last time.Time
	for _, p := range j.order {
		if p.ended.After(last) {
			last = p.ended
		}
	}
	return last
}

// progress says whether every job has ended, whether any job works, and when the replay last
// progressed.
func (d *driver) progress() (allEnded, working bool, submitted int, last time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	allEnded = true
	for _, j := range d.jobs {
		if j.ended.IsZero() {
			allEnded = false
		}
		if j.working {
			working = true
		}
	}
	return allEnded, working, d.submitted, d.lastProgress
}

// run is what the replay observed, in trace seconds from t0, until end.
func (d *driver) run(end time.Time) report.Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := func(t time.Time) float64 {
		if t.IsZero() {
			return math.NaN()
		}
		return t.Sub(d.t0).Seconds() * d.speedup
	}
	out := report.Run{Config: d.config.Name, Title: d.config.Title, End: at(end)}
	for _, j := range d.jobs {
		submit := at(j.submitted)
		if j.submitted.IsZero() {
			// Never created (the replay stopped first, or the apiserver refused it): it never
			// ran, as of its time in the trace.
			submit = j.trace.Submit
		}
		job := report.Job{
			Name: j.name, Queue: j.trace.Queue, Submit: submit, Duration: j.trace.Duration,
			Replicas: j.trace.Replicas, MinReplicas: j.trace.MinReplicas, GPUs: j.trace.GPUs,
			Ended: at(j.ended), Dataset: j.trace.Dataset, Transfer: j.transfer,
		}
		for _, s := range j.started {
			job.Started = append(job.Started, at(s))
		}
		for _, p := range j.order {
			pod := report.Pod{Name: p.name, Node: p.node, Seen: at(p.seen), Bound: at(p.bound), Running: at(p.running), Ended: at(p.ended), Preempted: p.preempted}
			if p.preempted {
				pod.Eviction = &report.Eviction{At: at(p.evicted), Why: p.evictedBy}
			}
			job.Pods = append(job.Pods, pod)
		}
		out.Jobs = append(out.Jobs, job)
	}
	return out
}
