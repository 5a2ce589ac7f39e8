// Package job checks Tephra's Job controller end to end, on a real control plane with simulated
// nodes: the pods and PodGroup a Job gets, what its plugins put in them, its lifecycle policies,
// suspend and resume, TTL, dependsOn, events, and a controller restart in the middle of a
// restart. Pods run as kwok simulates them: sim.tephra.dev/duration and exit-code say how long
// and how they end.
package job

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Simulation annotations of manifests/kwok/stages.yaml.
const (
	simDuration = "sim.tephra.dev/duration"
	simExitCode = "sim.tephra.dev/exit-code"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{}, func(env *framework.Env) error {
		ctx := context.Background()
		if err := localcluster.WaitDefaultQueues(ctx, env.Cluster.Config); err != nil {
			return err
		}
		// Room for every test's pods at once: the tests run in parallel.
		_, err := env.Cluster.CreateNodes(ctx, "job-node", 4, localcluster.NodeShape{CPU: "32", Memory: "128Gi", Pods: 110})
		return err
	}))
}

// simTask is a task of replicas pods asking for 100m CPU, that run for duration ("" for until
// deleted) and end with exitCode.
func simTask(name string, replicas int32, duration string, exitCode int) batchv1alpha1.TaskSpec {
	annotations := map[string]string{}
	if duration != "" {
		annotations[simDuration] = duration
	}
	if exitCode != 0 {
		annotations[simExitCode] = fmt.Sprint(exitCode)
	}
	return batchv1alpha1.TaskSpec{
		Name:     name,
		Replicas: replicas,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations, Labels: map[string]string{"e2e.tephra.dev/task": name}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				}},
			},
		},
	}
}

func newJob(name string, tasks ...batchv1alpha1.TaskSpec) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1alpha1.JobSpec{MaxRetry: 3, Tasks: tasks},
	}
}

func onEvent(e batchv1alpha1.Event, a batchv1alpha1.Action) batchv1alpha1.LifecyclePolicy {
	return batchv1alpha1.LifecyclePolicy{Event: e, Action: a}
}

func onExit(code int32, a batchv1alpha1.Action) batchv1alpha1.LifecyclePolicy {
	return batchv1alpha1.LifecyclePolicy{ExitCode: &code, Action: a}
}

// loadExample reads an example Job of manifests/examples.
func loadExample(t *testing.T, file string) *batchv1alpha1.Job {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "manifests", "examples", file))
	require.NoError(t, err)
	job := &batchv1alpha1.Job{}
	require.NoError(t, yaml.UnmarshalStrict(data, job))
	return job
}

// patchJob applies a JSON merge patch to a Job.
func patchJob(t *testing.T, env *framework.Env, ns, name, patch string) {
	t.Helper()
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// describeJob is a job's state and pods, for failure messages.
func describeJob(env *framework.Env, ns, name string) string {
	job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	s := job.Status
	var pods []string
	list, _ := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + name})
	if list != nil {
		for _, p := range list.Items {
			state := string(p.Status.Phase)
			if p.DeletionTimestamp != nil {
				state += "(deleting)"
			}
			pods = append(pods, p.Name+"="+state)
		}
	}
	sort.Strings(pods)
	return fmt.Sprintf("phase %s (%s: %s), retryCount %d, pods [%s], events %v",
		s.State.Phase, s.State.Reason, s.State.Message, s.RetryCount, strings.Join(pods, " "), jobEvents(env, ns, name))
}

// waitJob polls the job until cond holds, failing the test after timeout with what it was.
func waitJob(t *testing.T, env *framework.Env, ns, name string, timeout time.Duration, what string, cond func(*batchv1alpha1.Job) bool) *batchv1alpha1.Job {
	t.Helper()
	var last *batchv1alpha1.Job
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = job
		return cond(job), nil
	})
	if err != nil {
		t.Fatalf("job %s/%s: waited %v for %s: %s", ns, name, timeout, what, describeJob(env, ns, name))
	}
	return last
}

// waitPhase waits for a job's phase. A job that ended (Completed or Failed) must agree with its
// PodGroup, as a person reading `kubectl get pg` expects: the group has the same phase, and its
// minMember is the job's unless its MinMemberLowered condition says why not.
func waitPhase(t *testing.T, env *framework.Env, ns, name string, timeout time.Duration, phase batchv1alpha1.JobPhase) *batchv1alpha1.Job {
	t.Helper()
	job := waitJob(t, env, ns, name, timeout, "phase "+string(phase), func(j *batchv1alpha1.Job) bool { return j.Status.State.Phase == phase })
	if phase == batchv1alpha1.JobCompleted || phase == batchv1alpha1.JobFailed {
		requireGroupAgrees(t, env, job)
	}
	return job
}

func requireGroupAgrees(t *testing.T, env *framework.Env, job *batchv1alpha1.Job) {
	t.Helper()
	want := schedulingv1alpha1.PodGroupCompleted
	if job.Status.State.Phase == batchv1alpha1.JobFailed {
		want = schedulingv1alpha1.PodGroupFailed
	}
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("PodGroup %s to agree with its %s job", job.Name, job.Status.State.Phase), func() (bool, string) {
		group, err := env.Tephra.SchedulingV1alpha1().PodGroups(job.Namespace).Get(context.Background(), job.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// A one-pod job's pod carries its group: its phase is the pod's.
			for _, pod := range jobPods(t, env, job.Namespace, job.Name) {
				if carried, ok := schedulingv1alpha1.GroupOnPod(&pod); ok {
					return carried.Status.Phase == want, fmt.Sprintf("the group its pod %s carries is %s (want %s)", pod.Name, carried.Status.Phase, want)
				}
			}
			return true, "" // deleted with its job (TTL)
		}
		if err != nil {
			return false, err.Error()
		}
		if !metav1.IsControlledBy(group, job) {
			return true, "" // someone else's group
		}
		lowered := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupMinMemberLowered)
		minimumSaid := group.Spec.MinMember == job.Status.MinAvailable ||
			(lowered != nil && lowered.Status == metav1.ConditionTrue && strings.Contains(lowered.Message, fmt.Sprintf("below the job's minimum of %d", job.Status.MinAvailable)))
		if want == schedulingv1alpha1.PodGroupCompleted && strings.Contains(env.Events(job.Namespace, job.Name), " to Failed:") {
			return false, "the group of a completed job went through Failed: " + env.Events(job.Namespace, job.Name)
		}
		return group.Status.Phase == want && minimumSaid,
			fmt.Sprintf("group phase %s (want %s), minMember %d (job's %d), MinMemberLowered %+v", group.Status.Phase, want, group.Spec.MinMember, job.Status.MinAvailable, lowered)
	})
}

// jobPods lists a job's pods by name.
func jobPods(t *testing.T, env *framework.Env, ns, job string) map[string]corev1.Pod {
	t.Helper()
	list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + job})
	require.NoError(t, err)
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// livePods lists a job's pods that are not being deleted, with their UIDs.
func livePods(t *testing.T, env *framework.Env, ns, job string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for name, p := range jobPods(t, env, ns, job) {
		if p.DeletionTimestamp == nil {
			out[name] = p.UID
		}
	}
	return out
}

func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// simulate patches a pod to end after duration with exitCode, as if its program did.
func simulate(t *testing.T, env *framework.Env, ns, pod, duration string, exitCode int) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		simDuration: duration, simExitCode: fmt.Sprint(exitCode),
	}}})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// jobEvents lists the events on a job as "Type Reason: message", oldest first.
func jobEvents(env *framework.Env, ns, name string) []string {
	list, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Job,involvedObject.name=" + name,
	})
	if err != nil {
		return []string{err.Error()}
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
	var out []string
	for _, e := range items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// countEvents counts the job's events whose "Type Reason: message" starts with prefix, as they
// stand now.
func countEvents(env *framework.Env, ns, name, prefix string) int {
	n := 0
	for _, e := range jobEvents(env, ns, name) {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// eventsWritten is how long a test waits for an event the controller has decided on to be
// written: a recorder writes each event from a goroutine of its own after the status it goes with,
// so a test that saw the status may list the events before the last of them is there.
const eventsWritten = 30 * time.Second

// eventCount counts the job's events that start with prefix once there are want of them, or
// once eventsWritten has passed; the caller asserts the count.
func eventCount(t *testing.T, env *framework.Env, ns, name, prefix string, want int) int {
	t.Helper()
	n := 0
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, eventsWritten, true, func(context.Context) (bool, error) {
		n = countEvents(env, ns, name, prefix)
		return n >= want, nil
	})
	return n
}

// phaseChanges lists the job's phase transitions from its PhaseChanged events, as "From→To",
// once the last of them is to the job's phase now (or once eventsWritten has passed).
func phaseChanges(t *testing.T, env *framework.Env, ns, name string) []string {
	t.Helper()
	var changes []string
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, eventsWritten, true, func(ctx context.Context) (bool, error) {
		job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		changes = phaseChangeEvents(env, ns, name)
		return len(changes) > 0 && strings.HasSuffix(changes[len(changes)-1], "→"+string(job.Status.State.Phase)), nil
	})
	return changes
}

func phaseChangeEvents(env *framework.Env, ns, name string) []string {
	var out []string
	for _, e := range jobEvents(env, ns, name) {
		rest, ok := strings.CutPrefix(e, "Normal PhaseChanged: ")
		if !ok {
			rest, ok = strings.CutPrefix(e, "Warning PhaseChanged: ")
		}
		if !ok {
			continue
		}
		var from, to string
		if _, err := fmt.Sscanf(rest, "Phase changed from %s to %s", &from, &to); err == nil {
			out = append(out, from+"→"+to)
		} else if _, err := fmt.Sscanf(rest, "Phase set to %s", &to); err == nil {
			out = append(out, "→"+to)
		}
	}
	return out
}

// envOf returns the value of a variable in a pod's first container ("" if unset).
func envOf(pod corev1.Pod, name string) string {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

func mountPaths(pod corev1.Pod) []string {
	var out []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		out = append(out, m.MountPath)
	}
	slices.Sort(out)
	return out
}
