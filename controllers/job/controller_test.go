package job

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// fakePlugin records its calls and sets an environment variable on the pods.
type fakePlugin struct {
	mu    *sync.Mutex
	calls *[]string
}

func (p fakePlugin) Name() string { return "fake" }

func (p fakePlugin) record(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.calls = append(*p.calls, call)
}

func (p fakePlugin) OnPodCreate(pod *corev1.Pod, _ *batchv1alpha1.Job) error {
	p.record("OnPodCreate")
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "FAKE", Value: pod.Name})
	return nil
}

func (p fakePlugin) OnJobAdd(context.Context, *batchv1alpha1.Job) error {
	p.record("OnJobAdd")
	return nil
}

func (p fakePlugin) OnJobDelete(context.Context, *batchv1alpha1.Job) error {
	p.record("OnJobDelete")
	return nil
}

// fixture is a Reconciler on a fake client that logs the writes in order and keeps events.
type fixture struct {
	client     client.Client
	reconciler *Reconciler
	recorder   *events.FakeRecorder
	now        time.Time

	mu sync.Mutex
	// writes logs "<verb> <kind> <name>" in order.
	writes []string
	// failStatus makes status writes fail with a conflict.
	failStatus bool
	// hidePods makes the cache a write behind: lists of pods find none.
	hidePods bool
	// refuseGroups makes PodGroup creations fail as an apiserver that times out would.
	refuseGroups bool
	calls        []string
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, schedulingv1alpha1.AddToScheme(scheme))
	require.NoError(t, batchv1alpha1.AddToScheme(scheme))
	f := &fixture{recorder: events.NewFakeRecorder(100), now: t0}
	log := func(verb string, obj client.Object) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.writes = append(f.writes, fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
	}
	f.client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(objs...).
		WithStatusSubresource(&batchv1alpha1.Job{}, &schedulingv1alpha1.PodGroup{}).
		WithIndex(&corev1.Pod{}, ControllerIndex, controllerIndexValue).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, pods := list.(*corev1.PodList); pods && f.hidePods {
					return nil
				}
				return c.List(ctx, list, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, group := obj.(*schedulingv1alpha1.PodGroup); group && f.refuseGroups {
					return apierrors.NewTimeoutError("the apiserver is busy", 1)
				}
				log("create", obj)
				return c.Create(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				log("delete", obj)
				return c.Delete(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				log("patch", obj)
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if f.failStatus {
					return apierrors.NewConflict(schema.GroupResource{Group: "batch.tephra.dev", Resource: "jobs"}, obj.GetName(), fmt.Errorf("changed"))
				}
				log("status", obj)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).
		Build()
	f.reconciler = &Reconciler{
		Client: f.client, APIReader: f.client, Scheme: scheme, Recorder: f.recorder,
		Now:     func() time.Time { return f.now },
		Workers: 4,
		Plugins: func(client.Client, *runtime.Scheme, *batchv1alpha1.Job) ([]Plugin, error) {
			return []Plugin{fakePlugin{mu: &f.mu, calls: &f.calls}}, nil
		},
	}
	return f
}

func (f *fixture) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	result, err := f.reconciler.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: testNamespace, Name: "train"}})
	require.NoError(t, err)
	return result
}

func (f *fixture) job(t *testing.T) *batchv1alpha1.Job {
	t.Helper()
	job := &batchv1alpha1.Job{}
	require.NoError(t, f.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "train"}, job))
	return job
}

func (f *fixture) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, f.client.List(context.Background(), &pods, client.InNamespace(testNamespace)))
	return pods.Items
}

// deletePod deletes a pod of the job as another client would, and tells the reconciler as its
// pod handler would.
func (f *fixture) deletePod(t *testing.T, name string) {
	t.Helper()
	pod := &corev1.Pod{}
	require.NoError(t, f.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, pod))
	require.NoError(t, f.client.Delete(context.Background(), pod))
	f.reconciler.unseen.deleted(f.job(t).UID, pod)
}

// setPods sets the phase of every pod of the fixture, failed with exitCode for the names given.
func (f *fixture) setPods(t *testing.T, phase corev1.PodPhase, failing ...string) {
	t.Helper()
	for _, pod := range f.pods(t) {
		pod.Status.Phase = phase
		for _, name := range failing {
			if pod.Name == name {
				pod.Status.Phase = corev1.PodFailed
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(f.now)}}}}
			}
		}
		require.NoError(t, f.client.Status().Update(context.Background(), &pod))
	}
}

func (f *fixture) takeWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.writes
	f.writes = nil
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func newStoredJob(mutate ...func(*batchv1alpha1.Job)) *batchv1alpha1.Job {
	job := newJob(append([]func(*batchv1alpha1.Job){withPhase("", ""), func(j *batchv1alpha1.Job) {
		j.Status = batchv1alpha1.JobStatus{}
		j.CreationTimestamp = metav1.Time{}
		j.Spec.Plugins = map[string][]string{"fake": nil}
	}}, mutate...)...)
	return job
}

// A new job gets its PodGroup and its pods at once (the pods wait at PreEnqueue for a group
// created beside them), named, labelled, owned, with the job's scheduler and what the plugins add. Its status, which says Pending, waits for the pods to start
// or for firstStatusDelay, whichever comes first: the pods wait for no status write, and a job
// whose pods start at once is written once. Events say what happened. Reconciling again changes
// nothing.
func TestReconcileCreatesGroupAndPods(t *testing.T) {
	f := newFixture(t, newStoredJob())
	res := f.reconcile(t)

	writes := f.takeWrites()
	require.Len(t, writes, 7)
	assert.Contains(t, writes, "create *v1alpha1.PodGroup train")
	assert.NotContains(t, writes, "status *v1alpha1.Job train", "the status waits for the pods to start")
	assert.Equal(t, firstStatusDelay, res.RequeueAfter, "decided again when the status is due")
	assert.Empty(t, f.job(t).Status.State.Phase)

	f.reconcile(t)
	assert.Empty(t, f.takeWrites(), "nothing is written before the status is due, nor created again")
	f.now = f.now.Add(firstStatusDelay)
	f.reconcile(t)
	assert.Equal(t, []string{"status *v1alpha1.Job train"}, f.takeWrites(), "written when due")
	assert.Equal(t, []string{"OnJobAdd", "OnPodCreate", "OnPodCreate", "OnPodCreate", "OnPodCreate", "OnPodCreate", "OnPodCreate"}, f.calls)

	group := &schedulingv1alpha1.PodGroup{}
	require.NoError(t, f.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "train"}, group))
	assert.Equal(t, int32(6), group.Spec.MinMember)
	assert.Equal(t, map[string]int32{"ps": 2, "worker": 4}, group.Spec.MinTaskMember)
	assert.True(t, metav1.IsControlledBy(group, f.job(t)))

	pods := f.pods(t)
	require.Len(t, pods, 6)
	for _, pod := range pods {
		assert.True(t, metav1.IsControlledBy(&pod, f.job(t)), pod.Name)
		assert.Equal(t, "train", pod.Labels[schedulingv1alpha1.PodGroupLabel])
		assert.Equal(t, "0", pod.Labels[JobRetryLabel])
		assert.Equal(t, "tephra-scheduler", pod.Spec.SchedulerName)
		assert.Equal(t, []corev1.EnvVar{{Name: "FAKE", Value: pod.Name}}, pod.Spec.Containers[0].Env)
	}
	job := f.job(t)
	assert.Equal(t, batchv1alpha1.JobPending, job.Status.State.Phase)
	assert.Equal(t, int32(6), job.Status.MinAvailable)
	assert.Equal(t, int32(6), job.Status.Pending, "the pods just created, counted with the first status")
	assert.Equal(t, map[corev1.PodPhase]int32{corev1.PodPending: 4}, job.Status.TaskStatusCount["worker"].Phase)
	assert.Equal(t, []string{
		"Normal PhaseChanged Phase set to Pending (Created): the job was created; " +
			"created PodGroup train: minMember 6 (ps 2, worker 4) in queue default; " +
			"created 6 pods for run 0: train-ps-0, train-ps-1, train-worker-0, train-worker-1, train-worker-2, train-worker-3",
	}, f.events(), "one event for the job's first decision")

	// The cache showing the pods changes nothing: the first status counted them.
	f.reconcile(t)
	assert.Empty(t, f.takeWrites(), "nothing to do, nothing written")
	assert.Empty(t, f.events())
}

// A new group that could not be created (its pods were created beside it, and wait for it) is
// created by the next decision, which creates no pod again.
func TestReconcileCreatesAGroupItCouldNotCreateNextTime(t *testing.T) {
	f := newFixture(t, newStoredJob())
	f.refuseGroups = true
	_, err := f.reconciler.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: testNamespace, Name: "train"}})
	require.Error(t, err, "retried")
	assert.Contains(t, err.Error(), "create pod group "+testNamespace+"/train")
	assert.Len(t, f.pods(t), 6, "the pods were created beside the group")
	assert.Contains(t, f.events(), "Warning FailedCreatePodGroup creating PodGroup train: Timeout: the apiserver is busy; the job's pods wait for it, and it is tried again")
	f.takeWrites()

	f.refuseGroups = false
	f.reconcile(t)
	writes := f.takeWrites()
	assert.Contains(t, writes, "create *v1alpha1.PodGroup train")
	for _, w := range writes {
		assert.NotContains(t, w, "*v1.Pod", "no pod created again: %v", writes)
	}
	assert.Len(t, f.pods(t), 6)
}

// RestartJob writes the new retryCount with phase Restarting before deleting any pod; if that
// write is refused (the job changed), no pod is deleted.
func TestReconcileWritesTheRestartBeforeDeletingPods(t *testing.T) {
	f := newFixture(t, newStoredJob(withPolicies(onEvent(batchv1alpha1.PodFailedEvent, batchv1alpha1.RestartJobAction))))
	f.reconcile(t)
	f.setPods(t, corev1.PodRunning)
	f.reconcile(t)
	require.Equal(t, batchv1alpha1.JobRunning, f.job(t).Status.State.Phase)
	f.setPods(t, corev1.PodRunning, "train-worker-1")
	f.takeWrites()
	f.events()
	before := testutil.ToFloat64(restarts.WithLabelValues("default", "RestartJob"))

	f.failStatus = true
	f.reconcile(t)
	assert.Empty(t, f.takeWrites(), "a refused restart deletes nothing")
	assert.Len(t, f.pods(t), 6)

	f.failStatus = false
	f.reconcile(t)
	writes := f.takeWrites()
	require.Len(t, writes, 7)
	assert.Equal(t, "status *v1alpha1.Job train", writes[0])
	for _, w := range writes[1:] {
		assert.True(t, strings.HasPrefix(w, "delete *v1.Pod train-"), w)
	}
	job := f.job(t)
	assert.Equal(t, batchv1alpha1.JobRestarting, job.Status.State.Phase)
	assert.Equal(t, int32(1), job.Status.RetryCount)
	assert.Equal(t, before+1, testutil.ToFloat64(restarts.WithLabelValues("default", "RestartJob")))
	assert.Equal(t, []string{
		"Warning RestartJob pod train-worker-1 failed (exit code 1): the job policy on event PodFailed restarts the job (retry 1 of 3)",
		"Warning PhaseChanged Phase changed from Running to Restarting (PodFailed): pod train-worker-1 failed (exit code 1): the job policy on event PodFailed restarts the job (retry 1 of 3)",
	}, f.events())

	// The pods are gone: the next run starts, its pods of retry 1.
	f.reconcile(t)
	pods := f.pods(t)
	require.Len(t, pods, 6)
	for _, pod := range pods {
		assert.Equal(t, "1", pod.Labels[JobRetryLabel])
	}
	assert.Equal(t, int32(1), f.job(t).Status.RetryCount)
}

// staleReader shows a newer version of the job than the cache.
type staleReader struct{ client.Reader }

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	obj.SetResourceVersion(obj.GetResourceVersion() + "0")
	return nil
}

// When nothing needs writing, the job is checked against the apiserver before pods are
// touched: a cache that lags (say, still shows the job Running after a restart was written)
// must not create pods of an old run.
func TestReconcileDoesNotActOnAStaleJob(t *testing.T) {
	job := newStoredJob()
	f := newFixture(t, job)
	f.reconcile(t)
	f.now = f.now.Add(firstStatusDelay) // the first status is written
	f.reconcile(t)
	// A pod goes missing: the status counts one pending pod fewer, and that write proves the job
	// fresh, so the pod is created again (the status still counts 5, from before).
	f.deletePod(t, "train-ps-0")
	f.reconcile(t)
	require.Len(t, f.pods(t), 6)
	// The same pod goes missing again: now nothing needs writing, only a pod creating.
	f.deletePod(t, "train-ps-0")
	f.takeWrites()

	f.reconciler.APIReader = staleReader{f.client}
	result := f.reconcile(t)
	assert.Empty(t, f.takeWrites(), "nothing is created from a stale job")
	assert.Positive(t, result.RequeueAfter)

	f.reconciler.APIReader = f.client
	f.reconcile(t)
	assert.Equal(t, []string{"create *v1.Pod train-ps-0"}, f.takeWrites())
}

// A finished job with ttlSecondsAfterFinished is deleted once it has passed.
func TestReconcileDeletesAfterTTL(t *testing.T) {
	f := newFixture(t, newStoredJob(func(j *batchv1alpha1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](30) }))
	f.reconcile(t)
	f.setPods(t, corev1.PodSucceeded)
	result := f.reconcile(t)
	require.Equal(t, batchv1alpha1.JobCompleted, f.job(t).Status.State.Phase)
	assert.Equal(t, 30*time.Second, result.RequeueAfter)
	assert.Contains(t, f.calls, "OnJobDelete", "plugins clean up when the job finishes")

	f.now = f.now.Add(31 * time.Second)
	f.reconcile(t)
	err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "train"}, &batchv1alpha1.Job{})
	assert.True(t, apierrors.IsNotFound(err), "the job is deleted: %v", err)
}

// A job that names a plugin that does not exist fails, saying which.
func TestReconcileFailsAJobWithAnUnknownPlugin(t *testing.T) {
	f := newFixture(t, newStoredJob(func(j *batchv1alpha1.Job) { j.Spec.Plugins = map[string][]string{"horovod": nil} }))
	f.reconciler.Plugins = nil // the real plugins
	f.reconcile(t)
	job := f.job(t)
	assert.Equal(t, batchv1alpha1.JobFailed, job.Status.State.Phase)
	assert.Equal(t, ReasonPluginError, job.Status.State.Reason)
	assert.Contains(t, job.Status.State.Message, `unknown plugin "horovod"`)
	assert.Empty(t, f.pods(t))
}

// tephra_jobs counts jobs by queue and phase, from the cache at each scrape, on the leader only.
func TestJobsMetric(t *testing.T) {
	f := newFixture(t,
		newStoredJob(func(j *batchv1alpha1.Job) { j.Status.State.Phase = batchv1alpha1.JobRunning }),
		newStoredJob(func(j *batchv1alpha1.Job) { j.Name = "eval"; j.Spec.Queue = "research" }),
	)
	elected := make(chan struct{})
	collector := phaseCollector(f.client, elected)
	assert.Equal(t, 0, testutil.CollectAndCount(collector), "not the leader: nothing reported")
	close(elected)
	assert.Equal(t, 2, testutil.CollectAndCount(collector))
	assert.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(`
# HELP tephra_jobs Number of Jobs by queue and phase.
# TYPE tephra_jobs gauge
tephra_jobs{phase="Pending",queue="research"} 1
tephra_jobs{phase="Running",queue="default"} 1
`)))
}

// countingReader counts reads past the cache.
type countingReader struct {
	client.Reader
	gets *int
}

func (r countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	*r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// A job whose pods and group are as decided costs no read past the cache, and nothing is
// written.
func TestReconcileOfASteadyJobReadsNothingFromTheAPIServer(t *testing.T) {
	f := newFixture(t, newStoredJob())
	f.reconcile(t)
	f.setPods(t, corev1.PodRunning)
	f.reconcile(t)
	require.Equal(t, batchv1alpha1.JobRunning, f.job(t).Status.State.Phase)
	gets := 0
	f.reconciler.APIReader = countingReader{Reader: f.client, gets: &gets}
	f.takeWrites()
	f.reconcile(t)
	assert.Zero(t, gets)
	assert.Empty(t, f.takeWrites())
}

// A PodGroup of the job's name that another owner made is left as it is, and the job says so.
func TestReconcileLeavesAForeignPodGroupAlone(t *testing.T) {
	foreign := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: testNamespace},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2},
	}
	f := newFixture(t, newStoredJob(), foreign)
	f.reconcile(t)
	group := &schedulingv1alpha1.PodGroup{}
	require.NoError(t, f.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "train"}, group))
	assert.Equal(t, int32(2), group.Spec.MinMember, "not rewritten")
	assert.Len(t, f.pods(t), 6, "the pods are created all the same")
	assert.Contains(t, f.events(), "Warning PodGroupNotOwned PodGroup train exists and does not belong to this job: its pods join it, with its minimum")
}

// A job whose pods start before its first status is due has it written once, Running: the
// apiserver serves one update of the job, not two. Its events still say Pending, then Running.
func TestAJobWhosePodsStartAtOnceHasItsStatusWrittenOnce(t *testing.T) {
	f := newFixture(t, newStoredJob())
	f.reconcile(t)
	f.takeWrites()
	f.events()

	f.now = f.now.Add(firstStatusDelay / 2)
	f.setPods(t, corev1.PodRunning)
	f.takeWrites()
	f.reconcile(t)
	assert.Equal(t, []string{"status *v1alpha1.Job train"}, f.takeWrites())
	job := f.job(t)
	assert.Equal(t, batchv1alpha1.JobRunning, job.Status.State.Phase)
	assert.Equal(t, int32(6), job.Status.Running)
	assert.Equal(t, []string{"Normal PhaseChanged Phase changed from Pending to Running (MinAvailableRunning): 6 pods are running and 0 succeeded (minAvailable 6)"},
		f.events(), "the change from the Pending the first event announced")

	f.now = f.now.Add(firstStatusDelay)
	f.reconcile(t)
	assert.Empty(t, f.takeWrites(), "nothing more to write")
}

// Pods created that the cache has not shown yet are not created again: each would be a request
// the apiserver refuses, in a burst of Jobs when it is busiest.
func TestPodsTheCacheHasNotShownAreNotCreatedAgain(t *testing.T) {
	f := newFixture(t, newStoredJob())
	f.hidePods = true
	f.reconcile(t)
	require.Len(t, f.takeWrites(), 7, "the group and 6 pods")

	f.reconcile(t)
	assert.Empty(t, f.takeWrites(), "the pods just created count as Pending")
	f.now = f.now.Add(firstStatusDelay)
	f.reconcile(t)
	assert.Equal(t, []string{"status *v1alpha1.Job train"}, f.takeWrites())
	assert.Equal(t, int32(6), f.job(t).Status.Pending)

	f.now = f.now.Add(unseenTTL + time.Second)
	f.reconcile(t)
	var creates int
	for _, w := range f.takeWrites() {
		if strings.HasPrefix(w, "create *v1.Pod ") {
			creates++
		}
	}
	assert.Equal(t, 6, creates, "a pod the cache never showed holds its slot no longer than unseenTTL")
}

// The job's SLA waiting time reaches its PodGroup, where tephra-scheduler reads it, and follows
// later changes of the job's annotation.
func TestReconcilePassesTheSLAToTheGroup(t *testing.T) {
	f := newFixture(t, newStoredJob(func(j *batchv1alpha1.Job) {
		j.Annotations = map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: "30s"}
	}))
	f.reconcile(t)
	group := &schedulingv1alpha1.PodGroup{}
	key := client.ObjectKey{Namespace: testNamespace, Name: "train"}
	require.NoError(t, f.client.Get(context.Background(), key, group))
	assert.Equal(t, "30s", group.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation])

	job := f.job(t)
	job.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation] = "2m"
	require.NoError(t, f.client.Update(context.Background(), job))
	f.reconcile(t)
	require.NoError(t, f.client.Get(context.Background(), key, group))
	assert.Equal(t, "2m", group.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation])
}

// A job that says its pods may move (it checkpoints) says so on its PodGroup, where
// tephra-scheduler reads it, and stops saying it when the job does.
func TestReconcilePassesMovableToTheGroup(t *testing.T) {
	f := newFixture(t, newStoredJob(func(j *batchv1alpha1.Job) {
		j.Annotations = map[string]string{schedulingv1alpha1.MovableAnnotation: "true"}
	}))
	f.reconcile(t)
	group := &schedulingv1alpha1.PodGroup{}
	key := client.ObjectKey{Namespace: testNamespace, Name: "train"}
	require.NoError(t, f.client.Get(context.Background(), key, group))
	assert.True(t, schedulingv1alpha1.DeclaresMovable(group.Annotations))

	job := f.job(t)
	delete(job.Annotations, schedulingv1alpha1.MovableAnnotation)
	require.NoError(t, f.client.Update(context.Background(), job))
	f.reconcile(t)
	require.NoError(t, f.client.Get(context.Background(), key, group))
	assert.NotContains(t, group.Annotations, schedulingv1alpha1.MovableAnnotation)
}

// As a job's pods succeed, its PodGroup's minMember falls to the pods still to run, never behind
// the user's back: the group keeps the job's whole minimum in an annotation, and both objects get
// an event.
func TestLoweringMinMemberIsAnnounced(t *testing.T) {
	f := newFixture(t, newStoredJob())
	f.reconcile(t)
	f.setPods(t, corev1.PodRunning)
	f.reconcile(t)
	f.events()
	group := &schedulingv1alpha1.PodGroup{}
	key := client.ObjectKey{Namespace: testNamespace, Name: "train"}
	require.NoError(t, f.client.Get(context.Background(), key, group))
	assert.Equal(t, "6", group.Annotations[schedulingv1alpha1.JobMinMemberAnnotation])

	for _, pod := range f.pods(t) {
		if pod.Name == "train-worker-0" {
			pod.Status.Phase = corev1.PodSucceeded
			require.NoError(t, f.client.Status().Update(context.Background(), &pod))
		}
	}
	f.reconcile(t)
	require.NoError(t, f.client.Get(context.Background(), key, group))
	assert.Equal(t, int32(5), group.Spec.MinMember)
	assert.Equal(t, "6", group.Annotations[schedulingv1alpha1.JobMinMemberAnnotation], "the job's whole minimum stays")
	lowered := 0
	for _, e := range f.events() {
		if strings.Contains(e, "MinMemberLowered minMember of PodGroup train lowered from 6 to 5") {
			lowered++
		}
	}
	assert.Equal(t, 2, lowered, "an event on the job and one on its PodGroup")
}
