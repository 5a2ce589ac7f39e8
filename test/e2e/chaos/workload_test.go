package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const (
	// simDuration makes a simulated pod end (Succeeded) that long after it starts
	// (manifests/kwok/stages.yaml); without it a pod runs until deleted.
	simDuration = "sim.tephra.dev/duration"
	// roundLabel marks the pods and Jobs of one round, the work in flight during one fault.
	roundLabel = "e2e.tephra.dev/round"
	// unit is the reclaim pool's own resource: only queues A and B ask for it, so their deserved
	// shares of it involve nothing else in the cluster.
	unit corev1.ResourceName = "e2e.tephra.dev/chaos-unit"
)

// The work's sizes.
const (
	// Four nodes of 4 CPUs hold two gangs of 48 members of 125m (6 CPUs each) and leave 4 CPUs,
	// too few for a round's third gang: any member of it bound, or of a gang left partly bound,
	// shows. The members are many so that binding them takes long enough for a fault to land
	// in the middle.
	gangNodes, gangNodeCPU = 4, 4
	gangSize               = 48
	gangCPU                = "125m"
	gangsPerRound          = 3
	wholeGangsThatFit      = 2
	// Two nodes of 4 units: queue A's Job borrows all 8 while B waits for nothing; each round B
	// asks for 4, its deserved half, which reclaim takes from A's elastic pods.
	reclaimNodes, unitsPerNode = 2, 4
	hogPods                    = 8
	reclaimers                 = 4
	// The gangs set no ready timeout (docs/gang.md): a gang that a fault leaves partly bound
	// must be repaired by the scheduler itself, which rolls such members back once the group's
	// next attempt fails (docs/operations.md).
	// The JobFlow's chain of steps, long enough to be running through the faults.
	flowSteps, stepDuration = 6, "20s"
)

// workload is the work a test keeps in flight while it breaks the infrastructure.
type workload struct {
	env                             *framework.Env
	ns                              string
	name                            string // the test's prefix for queues and pools
	queueA                          string // borrows the whole reclaim pool
	queueB                          string // reclaims its deserved half every round
	gangs                           string // the queue of the rounds' gangs
	gangPool, reclaimPool, flowPool map[string]string
	flows                           bool // a JobFlow and a CronJob run too
	rec                             *recorder
	marker                          types.UID // a ConfigMap that must survive etcd's restarts
	rounds                          int
	faultsOver                      time.Time
}

// startWorkload sets up the pools, queues and the work that runs throughout a test: queue A's Job
// holding the whole reclaim pool, and with flows a JobFlow and a CronJob.
func startWorkload(t *testing.T, env *framework.Env, name string, flows bool) *workload {
	t.Helper()
	ctx := context.Background()
	w := &workload{
		env: env, ns: env.Namespace(t), name: name, flows: flows,
		queueA: name + "-a", queueB: name + "-b", gangs: name + "-gangs",
	}
	w.gangPool = env.Pool(t, name+"-gang", gangNodes, gangNodeCPU)
	w.reclaimPool = map[string]string{framework.PoolLabel: name + "-reclaim"}
	nodes, err := env.Cluster.CreateNodes(ctx, name+"-reclaim", reclaimNodes, localcluster.NodeShape{
		CPU: "4", Memory: "16Gi", Pods: 110, Labels: w.reclaimPool, Extended: map[corev1.ResourceName]int64{unit: unitsPerNode},
	})
	t.Cleanup(func() {
		for _, node := range nodes {
			_ = env.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})
	require.NoError(t, err)
	if flows {
		w.flowPool = env.Pool(t, name+"-flow", 1, 8)
	}
	// A's capability is the pool and B's its half: a scheduler whose ledger counted a pod twice
	// after a fault would refuse their pods, which the rounds would show.
	w.createQueue(t, w.queueA, schedulingv1alpha1.QueueOpen, corev1.ResourceList{unit: *resource.NewQuantity(hogPods, resource.DecimalSI)})
	// A round's work is created in closed queues and let go at once by opening them (round).
	w.createQueue(t, w.queueB, schedulingv1alpha1.QueueClosed, corev1.ResourceList{unit: *resource.NewQuantity(reclaimers, resource.DecimalSI)})
	w.createQueue(t, w.gangs, schedulingv1alpha1.QueueClosed, nil)

	marker, err := env.Kube.CoreV1().ConfigMaps(w.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survives-etcd"}, Data: map[string]string{"written": "before the faults"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	w.marker = marker.UID
	w.rec = startRecorder(t, env, w.ns)
	w.syncSimulatedPods(t)

	hog := w.job("hog", w.queueA, hogPods, w.reclaimPool, corev1.ResourceList{unit: *resource.NewQuantity(1, resource.DecimalSI)}, "")
	hog.Spec.MinAvailable = ptr.To[int32](1) // all but one elastic: reclaim may take them
	_, err = env.Tephra.BatchV1alpha1().Jobs(w.ns).Create(ctx, hog, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "queue A's Job running on the whole reclaim pool", func() (bool, string) {
		running, state := w.hogRunning(ctx)
		return running == hogPods, state
	})

	if flows {
		w.startFlow(t)
		w.startCronJob(t)
	}
	return w
}

// syncSimulatedPods has the simulated nodes sync their pods every few seconds, as kubelets do,
// until the test ends: kwok alone drops a pod's next step when the apiserver answers its update
// with an error it does not retry, which faults of etcd and the apiserver cause
// (localcluster.SyncSimulatedPods).
func (w *workload) syncSimulatedPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if n, err := w.env.Cluster.SyncSimulatedPods(ctx, w.ns); err == nil && n > 0 {
				t.Logf("the simulated nodes synced %d pods kwok had left behind", n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
}

func (w *workload) createQueue(t *testing.T, name string, state schedulingv1alpha1.QueueState, capability corev1.ResourceList) {
	t.Helper()
	_, err := w.env.Tephra.SchedulingV1alpha1().Queues().Create(context.Background(), &schedulingv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue, Weight: 1, Capability: capability, State: state},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = w.env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// podTemplate is a simulated pod: it asks for requests (extended resources get equal limits)
// on pool's nodes, and runs for duration ("": until deleted).
func podTemplate(pool map[string]string, requests corev1.ResourceList, duration string, labels map[string]string) corev1.PodTemplateSpec {
	limits := corev1.ResourceList{}
	for name, q := range requests {
		if strings.Contains(string(name), "/") {
			limits[name] = q
		}
	}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  pool,
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
	if duration != "" {
		template.Annotations = map[string]string{simDuration: duration}
	}
	return template
}

// job is a Tephra Job of one task of replicas pods.
func (w *workload) job(name, queue string, replicas int32, pool map[string]string, requests corev1.ResourceList, duration string) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec:       w.jobSpec(queue, replicas, pool, requests, duration, nil),
	}
}

func (w *workload) jobSpec(queue string, replicas int32, pool map[string]string, requests corev1.ResourceList, duration string, labels map[string]string) batchv1alpha1.JobSpec {
	return batchv1alpha1.JobSpec{
		Queue:    queue,
		MaxRetry: 0,
		Tasks: []batchv1alpha1.TaskSpec{{
			Name: "work", Replicas: replicas,
			Template: podTemplate(pool, requests, duration, labels),
		}},
	}
}

func cpu(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
}

// startFlow creates a JobFlow whose steps run one after another, each a Job of one pod, as the
// pipeline of manifests/examples/jobflow.yaml but longer, so that it runs through the faults.
func (w *workload) startFlow(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	jf := &batchv1alpha1.JobFlow{ObjectMeta: metav1.ObjectMeta{Name: "pipeline"}}
	for i := range flowSteps {
		step := fmt.Sprintf("step-%d", i)
		_, err := w.env.Tephra.BatchV1alpha1().JobTemplates(w.ns).Create(ctx, &batchv1alpha1.JobTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: step},
			Spec:       w.jobSpec(schedulingv1alpha1.DefaultQueue, 1, w.flowPool, cpu("100m"), stepDuration, nil),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		flow := batchv1alpha1.Flow{Name: step}
		if i > 0 {
			flow.DependsOn = &batchv1alpha1.FlowDependsOn{Targets: []string{fmt.Sprintf("step-%d", i-1)}}
		}
		jf.Spec.Flows = append(jf.Spec.Flows, flow)
	}
	_, err := w.env.Tephra.BatchV1alpha1().JobFlows(w.ns).Create(ctx, jf, metav1.CreateOptions{})
	require.NoError(t, err)
}

// startCronJob creates the nightly example's CronJob (manifests/examples/cronjob.yaml) scheduled
// every minute instead, with shorter runs, and keeping every run so that none is deleted.
func (w *workload) startCronJob(t *testing.T) {
	t.Helper()
	spec := w.jobSpec(schedulingv1alpha1.DefaultQueue, 2, w.flowPool, cpu("100m"), stepDuration, nil)
	spec.MinAvailable = ptr.To[int32](2)
	_, err := w.env.Tephra.BatchV1alpha1().CronJobs(w.ns).Create(context.Background(), &batchv1alpha1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "retrain"},
		Spec: batchv1alpha1.CronJobSpec{
			Schedule:                   "* * * * *",
			ConcurrencyPolicy:          batchv1alpha1.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: ptr.To[int32](100),
			FailedJobsHistoryLimit:     ptr.To[int32](100),
			JobTemplate:                batchv1alpha1.JobTemplateSpec{Spec: spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// fault is one way of breaking the infrastructure; it returns once the fault is over (the
// component started again, the partition healed).
type fault struct {
	name string
	do   func(t *testing.T, ctx context.Context)
}

// round puts new work in flight (three gangs, two of which fit, and queue B's demand that
// reclaim must meet), breaks the infrastructure while the gangs bind, and checks what a user sees
// once things settle.
func (w *workload) round(t *testing.T, f fault) {
	ctx := framework.Context(t, 10*time.Minute)
	w.rounds++
	r := fmt.Sprint(w.rounds)
	labels := map[string]string{roundLabel: r}
	exitsBefore := len(w.env.Cluster.Exits())
	audited, err := w.env.Cluster.AuditedRequests()
	require.NoError(t, err)
	auditBefore := len(audited)

	// The work is created in closed queues (B's and the gangs'), so that none of it starts
	// before all of it exists: a gang's members bind within a fraction of a second, and the
	// fault must find them doing so. Two gangs are Tephra Jobs, one a PodGroup of bare pods.
	groups := []string{"g" + r + "-job-a", "g" + r + "-job-b", "g" + r + "-pods"}
	defer w.cleanRound(t, r, groups)
	for _, name := range groups[:2] {
		job := w.job(name, w.gangs, gangSize, w.gangPool, cpu(gangCPU), "")
		job.Labels = labels
		job.Spec.Tasks[0].Template.Labels = labels
		_, err := w.env.Tephra.BatchV1alpha1().Jobs(w.ns).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = w.env.Tephra.SchedulingV1alpha1().PodGroups(w.ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: groups[2], Labels: labels},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: gangSize, Queue: w.gangs},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range gangSize {
		w.createPod(t, ctx, fmt.Sprintf("%s-%d", groups[2], i),
			podTemplate(w.gangPool, cpu(gangCPU), "", map[string]string{schedulingv1alpha1.PodGroupLabel: groups[2], roundLabel: r}))
	}
	for i := range reclaimers {
		w.createPod(t, ctx, fmt.Sprintf("b%s-%d", r, i), podTemplate(w.reclaimPool, corev1.ResourceList{unit: *resource.NewQuantity(1, resource.DecimalSI)}, "10s",
			map[string]string{schedulingv1alpha1.QueueLabel: w.queueB, roundLabel: r}))
	}
	framework.Eventually(t, time.Minute, "round "+r+"'s pods created", func() (bool, string) {
		pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + r})
		if err != nil {
			return false, err.Error()
		}
		want := gangsPerRound*gangSize + reclaimers
		return len(pods.Items) == want, fmt.Sprintf("%d of %d", len(pods.Items), want)
	})

	// Opened, B's pods ask reclaim for their share and the gangs bind; the fault hits as soon as
	// the first member is bound.
	firstBind := w.watchFirstBind(ctx, r)
	w.setState(t, ctx, w.queueB, schedulingv1alpha1.QueueOpen)
	w.setState(t, ctx, w.gangs, schedulingv1alpha1.QueueOpen)
	var hit string
	select {
	case hit = <-firstBind:
	case <-time.After(2 * time.Minute):
		t.Fatalf("round %s: no gang member bound 2 minutes after its queue opened", r)
	}
	f.do(t, ctx)
	t.Logf("round %s: %s; it hit with %s", r, f.name, hit)
	w.faultsOver = time.Now()

	w.settle(t, ctx, r, groups)
	for _, exit := range w.env.Cluster.Exits()[exitsBefore:] {
		t.Logf("round %s: %s exited (%s) and was started again; its last lines:\n%s", r, exit.Component, exit.Status, exit.LastLines)
	}

	// Reclaim took at least B's share from A, and only from A (checkAudit: the scheduler deleted
	// nothing else but members of rolled-back gangs). It should take exactly B's share, no more,
	// but while victims are still terminating it takes more: TestReclaimTakesNoMoreWhileVictimsTerminate.
	requests, err := w.env.Cluster.AuditedRequests()
	require.NoError(t, err)
	evicted, rolledBack, unready := 0, 0, 0
	for _, req := range requests[auditBefore:] {
		if req.Verb != "delete" || req.Resource != "pods" || req.Subresource != "" || req.Namespace != w.ns || req.Code >= 300 {
			continue
		}
		switch {
		case req.User == schedulerUser && strings.HasPrefix(req.Name, "hog-"):
			evicted++
		case req.User == schedulerUser:
			rolledBack++
		case req.User == controllersUser:
			unready++
		}
	}
	// B's pods run 10 s each: when a fault holds the scheduler back longer, the last of them may
	// start on the room of one that has ended, and reclaim needs to take room only for those that
	// run at once.
	atOnce, runs := w.mostRunningAtOnce(t, ctx, r)
	t.Logf("round %s: reclaim evicted %d of queue A's pods for queue B's %d, at most %d running at once (%s); %d gang members were rolled back, %d evicted at their ready timeout",
		r, evicted, reclaimers, atOnce, runs, rolledBack, unready)
	assert.GreaterOrEqual(t, evicted, atOnce, "round %s: pods of queue A's Job reclaimed for queue B's pods that ran at once", r)
	w.checkJobPods(t, ctx)
	marker, err := w.env.Kube.CoreV1().ConfigMaps(w.ns).Get(ctx, "survives-etcd", metav1.GetOptions{})
	require.NoError(t, err, "the ConfigMap written before the faults")
	assert.Equal(t, w.marker, marker.UID, "the ConfigMap written before the faults is the same object")
}

// cleanRound deletes the round's gangs, so that the next round's bind on an empty pool, and
// closes the queues that let its work go. It reports failures without stopping the test, since
// it also runs after a round failed.
func (w *workload) cleanRound(t *testing.T, r string, groups []string) {
	ctx := framework.Context(t, 3*time.Minute)
	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	for _, name := range groups[:2] {
		assert.NoError(t, w.env.Tephra.BatchV1alpha1().Jobs(w.ns).Delete(ctx, name, background))
	}
	assert.NoError(t, w.env.Kube.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: schedulingv1alpha1.PodGroupLabel + "=" + groups[2]}))
	assert.NoError(t, w.env.Tephra.SchedulingV1alpha1().PodGroups(w.ns).Delete(ctx, groups[2], metav1.DeleteOptions{}))
	w.setState(t, ctx, w.queueB, schedulingv1alpha1.QueueClosed)
	w.setState(t, ctx, w.gangs, schedulingv1alpha1.QueueClosed)
	framework.Eventually(t, 2*time.Minute, "round "+r+"'s gangs gone", func() (bool, string) {
		pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + r})
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, pod := range pods.Items {
			if pod.Spec.NodeSelector[framework.PoolLabel] == w.gangPool[framework.PoolLabel] {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods left", left)
	})
}

func (w *workload) setState(t *testing.T, ctx context.Context, queue string, state schedulingv1alpha1.QueueState) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"state":%q}}`, state)
	_, err := w.env.Tephra.SchedulingV1alpha1().Queues().Patch(ctx, queue, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	assert.NoError(t, err, "queue %s %s", queue, state)
}

func (w *workload) createPod(t *testing.T, ctx context.Context, name string, template corev1.PodTemplateSpec) {
	t.Helper()
	_, err := w.env.Kube.CoreV1().Pods(w.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: template.Labels, Annotations: template.Annotations},
		Spec:       template.Spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// watchFirstBind returns a channel that gets, once a member of the round's gangs is bound (as
// the apiserver's cache shows it, read closely so that the fault lands while the others bind),
// what the round's work was doing then, for the log.
func (w *workload) watchFirstBind(ctx context.Context, r string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		for ctx.Err() == nil {
			pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + r, ResourceVersion: "0"})
			if err == nil {
				bound, _ := membersByGroup(pods.Items)
				if len(bound) > 0 {
					ch <- w.describeInFlight(pods.Items, bound)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ch
}

// describeInFlight says how much of each gang is bound, and what reclaim has done for B yet.
func (w *workload) describeInFlight(pods []corev1.Pod, bound map[string]int) string {
	var groups []string
	for group, n := range bound {
		groups = append(groups, fmt.Sprintf("%s %d/%d", group, n, gangSize))
	}
	sort.Strings(groups)
	b := 0
	for _, pod := range pods {
		if pod.Labels[schedulingv1alpha1.QueueLabel] == w.queueB && pod.Spec.NodeName != "" {
			b++
		}
	}
	return fmt.Sprintf("members bound [%s] and %d of queue B's %d pods", strings.Join(groups, ", "), b, reclaimers)
}

// settle waits until every component is healthy again and the round's work has come out as it
// must, and fails with what it saw last if it does not.
func (w *workload) settle(t *testing.T, ctx context.Context, r string, groups []string) {
	t.Helper()
	for _, name := range []string{localcluster.Etcd, localcluster.APIServer, localcluster.ControllerManager, localcluster.Kwok} {
		wait, cancel := context.WithTimeout(ctx, 3*time.Minute)
		require.NoError(t, w.env.Cluster.WaitHealthy(wait, name), "%s healthy", name)
		cancel()
	}
	// Tephra's processes may have exited (a lease lost); the cluster starts them again, as the
	// kubelet would, and nothing else does.
	for _, component := range []string{localcluster.Scheduler, localcluster.Controllers} {
		for _, name := range w.env.Cluster.ReplicaNames(component) {
			wait, cancel := context.WithTimeout(ctx, 3*time.Minute)
			require.NoError(t, w.env.Cluster.WaitHealthy(wait, name), "%s healthy", name)
			cancel()
		}
	}
	framework.Eventually(t, 4*time.Minute, "round "+r+" settled", func() (bool, string) {
		return w.settled(ctx, r, groups)
	})
}

// mostRunningAtOnce is how many of a round's queue B pods ran at the same time, from when their
// container started to when it finished (all have, once the round settled), and their runs.
func (w *workload) mostRunningAtOnce(t *testing.T, ctx context.Context, r string) (int, string) {
	t.Helper()
	pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + r + "," + schedulingv1alpha1.QueueLabel + "=" + w.queueB})
	require.NoError(t, err)
	type run struct{ start, end time.Time }
	var runs []run
	var described []string
	for _, pod := range pods.Items {
		for _, c := range pod.Status.ContainerStatuses {
			term := c.State.Terminated
			if term == nil || pod.Status.StartTime == nil {
				continue
			}
			// kwok's terminated state has no startedAt: the pod's start is its container's.
			start := pod.Status.StartTime.Time
			if !term.StartedAt.IsZero() {
				start = term.StartedAt.Time
			}
			runs = append(runs, run{start, term.FinishedAt.Time})
			described = append(described, fmt.Sprintf("%s %s-%s", pod.Name, start.Format("15:04:05"), term.FinishedAt.Format("15:04:05")))
		}
	}
	require.Len(t, runs, reclaimers, "round %s: every pod of queue B ran to its end: %v", r, described)
	most := 0
	for _, a := range runs {
		n := 0
		for _, b := range runs {
			if !b.start.After(a.start) && b.end.After(a.start) {
				n++
			}
		}
		most = max(most, n)
	}
	sort.Strings(described)
	return most, strings.Join(described, ", ")
}

// settled says whether the round's work came out as it must: queue B's pods all ran and
// succeeded, queue A is back on the whole pool, two of the three gangs run whole and the third
// has nothing bound, no PodGroup is partly bound, and every queue's status equals a recount.
func (w *workload) settled(ctx context.Context, r string, groups []string) (bool, string) {
	pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	pgs, err := w.env.Tephra.SchedulingV1alpha1().PodGroups(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	var problems []string

	succeeded := 0
	var bStates []string
	for _, pod := range pods.Items {
		if pod.Labels[schedulingv1alpha1.QueueLabel] == w.queueB && pod.Labels[roundLabel] == r {
			bStates = append(bStates, pod.Name+"="+string(pod.Status.Phase))
			if pod.Status.Phase == corev1.PodSucceeded {
				succeeded++
			}
		}
	}
	if succeeded != reclaimers {
		sort.Strings(bStates)
		problems = append(problems, fmt.Sprintf("queue B's pods: %d of %d succeeded %v", succeeded, reclaimers, bStates))
	}
	if running, state := w.hogRunning(ctx); running != hogPods {
		problems = append(problems, state)
	}

	bound, running := membersByGroup(pods.Items)
	whole := 0
	var gangStates []string
	for _, name := range groups {
		gangStates = append(gangStates, fmt.Sprintf("%s %d bound, %d running", name, bound[name], running[name]))
		switch {
		case running[name] >= gangSize && bound[name] == running[name]:
			whole++
		case bound[name] != 0:
			problems = append(problems, fmt.Sprintf("gang %s neither whole nor unbound", name))
		}
	}
	if whole != wholeGangsThatFit {
		problems = append(problems, fmt.Sprintf("%d gangs whole, %d fit: %s", whole, wholeGangsThatFit, strings.Join(gangStates, "; ")))
	}
	problems = append(problems, partialGangs(pgs.Items, bound)...)
	if mismatch, err := accountingMismatch(ctx, w.env); err != nil {
		problems = append(problems, err.Error())
	} else if mismatch != "" {
		problems = append(problems, mismatch)
	}
	return len(problems) == 0, strings.Join(problems, "\n")
}

// membersByGroup counts, per PodGroup name, the members bound to a node and still live (not
// ended, not being deleted), and those of them Running.
func membersByGroup(pods []corev1.Pod) (bound, running map[string]int) {
	bound, running = map[string]int{}, map[string]int{}
	for _, pod := range pods {
		group := pod.Labels[schedulingv1alpha1.PodGroupLabel]
		if group == "" || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		bound[group]++
		if pod.Status.Phase == corev1.PodRunning {
			running[group]++
		}
	}
	return bound, running
}

// partialGangs lists the PodGroups with some but fewer than minMember members bound.
func partialGangs(pgs []schedulingv1alpha1.PodGroup, bound map[string]int) []string {
	var out []string
	for _, pg := range pgs {
		if n := bound[pg.Name]; n > 0 && n < int(pg.Spec.MinMember) {
			out = append(out, fmt.Sprintf("PodGroup %s partly bound: %d of minMember %d (%s)", pg.Name, n, pg.Spec.MinMember, conditionsOf(pg)))
		}
	}
	return out
}

func conditionsOf(pg schedulingv1alpha1.PodGroup) string {
	var out []string
	for _, c := range pg.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %s; %s", pg.Status.Phase, strings.Join(out, "; "))
}

// hogRunning counts the pods of queue A's Job bound and Running.
func (w *workload) hogRunning(ctx context.Context) (int, string) {
	pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=hog"})
	if err != nil {
		return 0, err.Error()
	}
	running := 0
	var states []string
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
			running++
		} else {
			states = append(states, fmt.Sprintf("%s %s on %q", pod.Name, pod.Status.Phase, pod.Spec.NodeName))
		}
	}
	sort.Strings(states)
	return running, fmt.Sprintf("queue A's Job: %d of %d running; others: %v", running, hogPods, states)
}

// jobRetryLabel is the retry of its Job a pod was created for (docs/job.md).
const jobRetryLabel = "batch.tephra.dev/job-retry"

// checkJobPods checks that the Job controller created no pod beyond its Jobs' replicas and
// restarted no Job: none of this work fails or has a policy, so every pod is of retry 0, and a pod
// taken away is created again under its own name and index.
func (w *workload) checkJobPods(t *testing.T, ctx context.Context) {
	t.Helper()
	jobs, err := w.env.Tephra.BatchV1alpha1().Jobs(w.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	replicas := map[string]int32{}
	for _, job := range jobs.Items {
		replicas[job.Name] = job.Spec.Tasks[0].Replicas
		assert.Zero(t, job.Status.RetryCount, "Job %s restarted (%s)", job.Name, job.Status.State.Message)
	}
	pods, err := w.env.Kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel})
	require.NoError(t, err)
	for _, pod := range pods.Items {
		job := pod.Labels[batchv1alpha1.JobNameLabel]
		var index int32
		_, err := fmt.Sscan(pod.Labels[batchv1alpha1.TaskIndexLabel], &index)
		assert.NoError(t, err, "pod %s's index", pod.Name)
		if n, ok := replicas[job]; ok {
			assert.Less(t, index, n, "pod %s beyond Job %s's %d replicas", pod.Name, job, n)
		}
		assert.Equal(t, "0", pod.Labels[jobRetryLabel], "pod %s of a Job that never restarted", pod.Name)
	}
}

// finish checks, once the faults are over, what the whole test must have kept: the JobFlow and
// the CronJob did their work once, nothing was created twice, and the only exits of Tephra's
// components were leases lost.
func (w *workload) finish(t *testing.T) {
	t.Helper()
	ctx := framework.Context(t, 6*time.Minute)
	if w.flows {
		w.checkFlow(t, ctx)
		w.checkCronJob(t, ctx)
	}
	w.rec.stop()
	checkAudit(t, w.env, w.ns)
	w.rec.checkOneUIDPerName(t, "Job")
	w.rec.checkOneUIDPerName(t, "PodGroup")
	for _, exit := range w.env.Cluster.Exits() {
		lines := strings.ToLower(exit.LastLines)
		assert.True(t, strings.Contains(lines, "leaderelection lost") || strings.Contains(lines, "leader election lost"),
			"%s exited (%s) for another reason than its lease lost; its last lines:\n%s", exit.Component, exit.Status, exit.LastLines)
	}
}

// checkFlow waits for the JobFlow to succeed and checks that each step's Job was created once,
// after the step before it ended.
func (w *workload) checkFlow(t *testing.T, ctx context.Context) {
	t.Helper()
	var jf *batchv1alpha1.JobFlow
	framework.Eventually(t, 4*time.Minute, "the JobFlow succeeded", func() (bool, string) {
		var err error
		jf, err = w.env.Tephra.BatchV1alpha1().JobFlows(w.ns).Get(ctx, "pipeline", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		for _, s := range jf.Status.JobStatusList {
			states = append(states, s.Flow+"="+s.State)
		}
		return jf.Status.State.Phase == batchv1alpha1.FlowSucceed, fmt.Sprintf("%s %v", jf.Status.State.Phase, states)
	})
	jobs, err := w.env.Tephra.BatchV1alpha1().Jobs(w.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobFlowLabel + "=pipeline"})
	require.NoError(t, err)
	require.Len(t, jobs.Items, flowSteps, "one Job per step")
	ended := map[string]*metav1.Time{}
	for _, s := range jf.Status.JobStatusList {
		ended[s.Flow] = s.EndTimestamp
	}
	for _, job := range jobs.Items {
		flow := job.Labels[batchv1alpha1.FlowLabel]
		assert.Equal(t, batchv1alpha1.JobCompleted, job.Status.State.Phase, job.Name)
		assert.Equal(t, []types.UID{job.UID}, w.rec.uids("Job", job.Name), "Job %s: the only object ever seen under its name", job.Name)
		var i int
		_, _ = fmt.Sscanf(flow, "step-%d", &i)
		if i > 0 {
			before := ended[fmt.Sprintf("step-%d", i-1)]
			require.NotNil(t, before, "step-%d ended", i-1)
			assert.False(t, job.CreationTimestamp.Before(before), "%s created at %s, before step-%d ended at %s", job.Name, job.CreationTimestamp, i-1, before)
		}
	}
}

// checkCronJob stops the CronJob, waits for its last run to end, and checks that it ran after the
// faults too, that each run is the one Job of its scheduled minute, created once, and that runs
// never overlapped (Forbid).
func (w *workload) checkCronJob(t *testing.T, ctx context.Context) {
	t.Helper()
	list := func() []batchv1alpha1.Job {
		jobs, err := w.env.Tephra.BatchV1alpha1().Jobs(w.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.CronJobLabel + "=retrain"})
		require.NoError(t, err)
		sort.Slice(jobs.Items, func(i, j int) bool { return jobs.Items[i].Name < jobs.Items[j].Name })
		return jobs.Items
	}
	// A run scheduled after the last fault shows the CronJob working again without help.
	framework.Eventually(t, 3*time.Minute, "a run scheduled after the faults", func() (bool, string) {
		var names []string
		for _, job := range list() {
			names = append(names, job.Name)
			at, err := time.Parse(time.RFC3339, job.Annotations[batchv1alpha1.ScheduledTimeAnnotation])
			if err == nil && at.After(w.faultsOver) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("runs %v, faults over at %s", names, w.faultsOver.Format(time.RFC3339))
	})
	_, err := w.env.Tephra.BatchV1alpha1().CronJobs(w.ns).Patch(ctx, "retrain", types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "every run ended", func() (bool, string) {
		var active []string
		for _, job := range list() {
			switch job.Status.State.Phase {
			case batchv1alpha1.JobCompleted, batchv1alpha1.JobFailed, batchv1alpha1.JobTerminated:
			default:
				active = append(active, job.Name+"="+string(job.Status.State.Phase))
			}
		}
		return len(active) == 0, fmt.Sprint(active)
	})
	jobs := list()
	require.NotEmpty(t, jobs)
	scheduled := map[string]string{}
	for i, job := range jobs {
		at, err := time.Parse(time.RFC3339, job.Annotations[batchv1alpha1.ScheduledTimeAnnotation])
		require.NoError(t, err, "run %s's scheduled time", job.Name)
		assert.Equal(t, fmt.Sprintf("retrain-%d", at.Unix()/60), job.Name, "a run is named after its scheduled minute")
		assert.Empty(t, scheduled[at.String()], "two runs for %s", at)
		scheduled[at.String()] = job.Name
		assert.Equal(t, batchv1alpha1.JobCompleted, job.Status.State.Phase, job.Name)
		assert.Equal(t, []types.UID{job.UID}, w.rec.uids("Job", job.Name), "run %s: the only object ever seen under its name", job.Name)
		if i > 0 {
			prev := jobs[i-1]
			assert.False(t, job.CreationTimestamp.Before(&prev.Status.State.LastTransitionTime),
				"run %s created at %s while %s ran until %s (concurrencyPolicy Forbid)", job.Name, job.CreationTimestamp, prev.Name, prev.Status.State.LastTransitionTime)
		}
	}
	t.Logf("CronJob runs: %v", scheduled)
}
