// Package kueue checks Tephra under Kueue end to end: a real Kueue (localcluster.KueueVersion,
// built from its module and installed from its own manifests, with Tephra's Job named among its
// external frameworks) admits Tephra Jobs against ClusterQueue quota, and Tephra gangs and places
// what it admitted. Tephra's controllers and scheduler run as installed, with their
// ServiceAccounts and RBAC.
package kueue

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/cmd/kubectl-tephra/cli"
	"github.com/tephra-dev/tephra/controllers/kueue"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const simDuration = "sim.tephra.dev/duration"

var dyn dynamic.Interface

func TestMain(m *testing.M) {
	opts := localcluster.Options{
		// Tephra with the kueue component (Kueue may read Tephra Jobs), as docs/kueue.md says.
		Manifests: localcluster.KustomizeManifests(filepath.Join("test", "e2e", "kueue", "testdata")),
		Kueue:     &localcluster.KueueOptions{ExternalFrameworks: []string{"Job.v1alpha1.batch.tephra.dev"}},
		// TestTheAdaptersRBACIsWhatItUses reads tephra-controllers' requests.
		AuditTephra: true,
	}
	os.Exit(framework.Main(m, opts, func(env *framework.Env) error {
		ctx := context.Background()
		var err error
		if dyn, err = dynamic.NewForConfig(env.Cluster.Config); err != nil {
			return err
		}
		if err := localcluster.WaitDefaultQueues(ctx, env.Cluster.Config); err != nil {
			return err
		}
		// One ResourceFlavor for every test's ClusterQueue, and two priorities.
		if _, err := dyn.Resource(flavors).Create(ctx, object("ResourceFlavor", "", defaultFlavor, map[string]any{}), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ResourceFlavor %s: %w", defaultFlavor, err)
		}
		for name, value := range map[string]int32{lowPriority: 100, highPriority: 1000} {
			if _, err := env.Kube.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		_, err = env.Cluster.CreateNodes(ctx, "kueue-node", 2, localcluster.NodeShape{CPU: "16", Memory: "64Gi", Pods: 110})
		return err
	}))
}

var (
	clusterQueues = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	localQueues   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
	flavors       = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	workloads     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
)

const (
	defaultFlavor = "default-flavor"
	lowPriority   = "kueue-e2e-low"
	highPriority  = "kueue-e2e-high"
)

// queueWithQuota makes a ClusterQueue named after the test with cpus of quota (preempting lower
// priorities within it) and a LocalQueue "lq" for it in ns.
func queueWithQuota(t *testing.T, ns string, cpus int) string {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	name := ns
	cq := object("ClusterQueue", "", name, map[string]any{
		"namespaceSelector": map[string]any{},
		"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{"cpu", "memory"},
			"flavors": []any{map[string]any{
				"name": defaultFlavor,
				"resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": fmt.Sprint(cpus)},
					map[string]any{"name": "memory", "nominalQuota": "64Gi"},
				},
			}},
		}},
	})
	_, err := dyn.Resource(clusterQueues).Create(ctx, cq, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dyn.Resource(clusterQueues).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	_, err = dyn.Resource(localQueues).Namespace(ns).Create(ctx, object("LocalQueue", ns, "lq", map[string]any{"clusterQueue": name}), metav1.CreateOptions{})
	require.NoError(t, err)
	return "lq"
}

func object(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// kueueJob is a Tephra Job of one task of pods pods of a CPU each, running for duration ("" for
// until deleted), in LocalQueue queue.
func kueueJob(name, queue string, pods int32, duration string) *batchv1alpha1.Job {
	annotations := map[string]string{}
	if duration != "" {
		annotations[simDuration] = duration
	}
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kueue.QueueNameLabel: queue}},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{
			Name: "worker", Replicas: pods,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "busybox",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
						}},
					}},
				},
			},
		}}},
	}
}

// jobPods lists a Job's pods that are not being deleted, and how many of them are bound.
func jobPods(t *testing.T, env *framework.Env, ns, job string) (live, bound int) {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		owner := metav1.GetControllerOf(&p)
		if owner == nil || owner.Name != job || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live++
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return live, bound
}

// workloadOf returns the Job's Workload.
func workloadOf(t *testing.T, ns string, job *batchv1alpha1.Job) *unstructured.Unstructured {
	t.Helper()
	wl, err := dyn.Resource(workloads).Namespace(ns).Get(context.Background(), kueue.WorkloadName(job), metav1.GetOptions{})
	require.NoError(t, err)
	return wl
}

func admittedWorkloads(t *testing.T, cq string) int64 {
	t.Helper()
	u, err := dyn.Resource(clusterQueues).Get(context.Background(), cq, metav1.GetOptions{})
	require.NoError(t, err)
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "admittedWorkloads")
	return n
}

// A Tephra Job waits suspended, with no pods, while its ClusterQueue's quota is used; once the
// Job that holds it ends, Kueue admits the waiting one, which runs as a whole gang; when it ends
// in turn, its quota returns.
func TestATephraJobWaitsSuspendedForQuotaAndRunsWholeOnceItFrees(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	lq := queueWithQuota(t, ns, 4)

	first := env.CreateJob(t, ns, kueueJob("first", lq, 4, "20s"))
	framework.Eventually(t, 2*time.Minute, "the first job to run its 4 pods", func() (bool, string) {
		_, bound := jobPods(t, env, ns, "first")
		return bound == 4, fmt.Sprintf("%d bound; events: %s", bound, env.Events(ns, "first"))
	})
	require.True(t, ptr.Deref(first.Spec.Suspend, false), "the webhook creates a Job that names a LocalQueue suspended")

	second := env.CreateJob(t, ns, kueueJob("second", lq, 4, "5s"))
	require.True(t, ptr.Deref(second.Spec.Suspend, false))
	framework.Eventually(t, time.Minute, "the second job's Workload to wait for quota", func() (bool, string) {
		wl, err := dyn.Resource(workloads).Namespace(ns).Get(context.Background(), kueue.WorkloadName(second), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, reason, message := framework.Condition(wl, "QuotaReserved")
		return status == "False", fmt.Sprintf("QuotaReserved %s %s: %s", status, reason, message)
	})
	// While the first holds the quota, the second stays suspended and has no pod.
	for range 10 {
		live, _ := jobPods(t, env, ns, "second")
		require.Zero(t, live, "a Job Kueue has not admitted has no pods")
		require.True(t, ptr.Deref(env.GetJob(t, ns, "second").Spec.Suspend, false))
		if _, bound := jobPods(t, env, ns, "first"); bound < 4 {
			break
		}
		time.Sleep(time.Second)
	}

	framework.Eventually(t, 2*time.Minute, "the second job to run all 4 pods once the first ended", func() (bool, string) {
		_, bound := jobPods(t, env, ns, "second")
		job := env.GetJob(t, ns, "second")
		return bound == 4, fmt.Sprintf("%d bound, phase %s; events: %s", bound, job.Status.State.Phase, env.Events(ns, "second"))
	})
	status, _, _ := framework.Condition(workloadOf(t, ns, first), "Finished")
	require.Equal(t, "True", status, "the first job's Workload finished when the job completed")

	framework.Eventually(t, 2*time.Minute, "the second job to complete and its quota to return", func() (bool, string) {
		job := env.GetJob(t, ns, "second")
		finished, _, _ := framework.Condition(workloadOf(t, ns, second), "Finished")
		admitted := admittedWorkloads(t, ns)
		return job.Status.State.Phase == batchv1alpha1.JobCompleted && finished == "True" && admitted == 0,
			fmt.Sprintf("phase %s, Workload finished %q, ClusterQueue admitted workloads %d", job.Status.State.Phase, finished, admitted)
	})
}

// Kueue preempts a running low-priority Job for a high-priority one: the low one is suspended and
// all its pods go together; its quota is released and it waits to be admitted again, while the
// high one runs whole.
func TestKueuePreemptionSuspendsTheJobAndFreesItsPodsWhole(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	lq := queueWithQuota(t, ns, 4)

	low := kueueJob("low", lq, 4, "")
	low.Spec.PriorityClassName = lowPriority
	low = env.CreateJob(t, ns, low)
	framework.Eventually(t, 2*time.Minute, "the low-priority job to run its 4 pods", func() (bool, string) {
		_, bound := jobPods(t, env, ns, "low")
		return bound == 4, fmt.Sprintf("%d bound; events: %s", bound, env.Events(ns, "low"))
	})

	high := kueueJob("high", lq, 4, "")
	high.Spec.PriorityClassName = highPriority
	env.CreateJob(t, ns, high)
	framework.Eventually(t, 2*time.Minute, "the high-priority job to run its 4 pods in the low one's place", func() (bool, string) {
		_, highBound := jobPods(t, env, ns, "high")
		lowLive, _ := jobPods(t, env, ns, "low")
		return highBound == 4 && lowLive == 0, fmt.Sprintf("high %d bound, low %d live; low's events: %s", highBound, lowLive, env.Events(ns, "low"))
	})
	lowNow := env.GetJob(t, ns, "low")
	require.True(t, ptr.Deref(lowNow.Spec.Suspend, false), "Kueue's preemption suspends the job")
	// Kueue's event is written after the eviction it goes with.
	framework.WaitEventOnAny(t, env, ns, []string{"low"}, "Kueue evicted Workload")
	wl := workloadOf(t, ns, low)
	reserved, _, _ := framework.Condition(wl, "QuotaReserved")
	require.Equal(t, "False", reserved, "the preempted Workload's quota is released")
	_, hasAdmission, _ := unstructured.NestedMap(wl.Object, "status", "admission")
	require.False(t, hasAdmission)
	requeued, _, _ := framework.Condition(wl, "Requeued")
	require.Equal(t, "True", requeued, "a preempted Workload waits to be admitted again")
}

// A Job that names a LocalQueue that does not exist waits suspended, and an event on it says why.
func TestAJobNamingAMissingLocalQueueWaitsWithAnEvent(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := env.CreateJob(t, ns, kueueJob("lost", "no-such-queue", 1, "5s"))
	framework.Eventually(t, time.Minute, "an event that the LocalQueue does not exist", func() (bool, string) {
		events := env.Events(ns, "lost")
		return strings.Contains(events, "no-such-queue") && strings.Contains(events, kueue.ReasonWaitingForKueue), events
	})
	live, _ := jobPods(t, env, ns, "lost")
	require.Zero(t, live)
	require.True(t, ptr.Deref(env.GetJob(t, ns, job.Name).Spec.Suspend, false))

	// kubectl tephra says why, and will not resume it past Kueue.
	out, _, err := kubectlTephra(env, ns, "why", "job/lost")
	require.NoError(t, err)
	require.Contains(t, out, "WaitingForKueue")
	require.Contains(t, out, "LocalQueue no-such-queue")
	_, _, err = kubectlTephra(env, ns, "job", "resume", "lost")
	require.ErrorContains(t, err, "waits for Kueue in LocalQueue no-such-queue")
	require.True(t, ptr.Deref(env.GetJob(t, ns, job.Name).Spec.Suspend, false))
}

// kubectlTephra runs `kubectl tephra ARGS -n NS`.
func kubectlTephra(env *framework.Env, ns string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", env.Cluster.Kubeconfig, "-n", ns}, args...))
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

// spec.managedBy names Tephra's Job controller or MultiKueue; anything else is refused at
// admission, and it cannot change.
func TestAnUnknownManagerIsRefused(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	job := kueueJob("managed", "lq", 1, "5s")
	delete(job.Labels, kueue.QueueNameLabel)
	job.Spec.ManagedBy = ptr.To("example.com/other")
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "managedBy must be tephra.dev/job-controller")

	job.Spec.ManagedBy = ptr.To(batchv1alpha1.JobControllerManager)
	env.CreateJob(t, ns, job)
	_, err = env.Tephra.BatchV1alpha1().Jobs(ns).Patch(context.Background(), job.Name, types.MergePatchType,
		[]byte(`{"spec":{"managedBy":"`+batchv1alpha1.MultiKueueManager+`"}}`), metav1.PatchOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "managedBy is immutable")
}

// The adapter's ClusterRole (tephra-controllers-kueue) grants exactly what it uses: a Job with a
// WorkloadPriorityClass and one with a PriorityClass run through Kueue and finish, and every verb
// of the role then appears in the apiserver's audit log of tephra-controllers' requests (the
// suite fails on any request it was refused).
func TestTheAdaptersRBACIsWhatItUses(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 4*time.Minute)
	lq := queueWithQuota(t, ns, 4)
	wpc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
		"metadata": map[string]any{"name": "kueue-e2e-batch"}, "value": int64(50),
	}}
	_, err := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloadpriorityclasses"}).
		Create(ctx, wpc, metav1.CreateOptions{})
	require.NoError(t, err)

	labelled := kueueJob("by-label", lq, 1, "2s")
	labelled.Labels[kueue.PriorityClassLabel] = "kueue-e2e-batch"
	labelled = env.CreateJob(t, ns, labelled)
	byClass := kueueJob("by-class", lq, 1, "2s")
	byClass.Spec.PriorityClassName = lowPriority
	byClass = env.CreateJob(t, ns, byClass)
	for _, job := range []*batchv1alpha1.Job{labelled, byClass} {
		framework.Eventually(t, 2*time.Minute, "job "+job.Name+" to complete and its Workload to finish", func() (bool, string) {
			phase := env.GetJob(t, ns, job.Name).Status.State.Phase
			wl, err := dyn.Resource(workloads).Namespace(ns).Get(context.Background(), kueue.WorkloadName(job), metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("phase %s, Workload: %v", phase, err)
			}
			finished, _, _ := framework.Condition(wl, "Finished")
			return phase == batchv1alpha1.JobCompleted && finished == "True" && len(wl.GetFinalizers()) == 0,
				fmt.Sprintf("phase %s, finished %q, finalizers %v", phase, finished, wl.GetFinalizers())
		})
	}
	priority, _, _ := unstructured.NestedInt64(workloadOf(t, ns, labelled).Object, "spec", "priority")
	require.Equal(t, int64(50), priority, "the WorkloadPriorityClass a Job names by label gives its Workload's priority")
	priority, _, _ = unstructured.NestedInt64(workloadOf(t, ns, byClass).Object, "spec", "priority")
	require.Equal(t, int64(100), priority, "else the PriorityClass of its pods")

	requests, err := env.Cluster.AuditedRequests()
	require.NoError(t, err)
	role := env.Cluster.ManifestObject("ClusterRole", "", "tephra-controllers-kueue")
	require.NotNil(t, role, "the manifests hold the adapter's ClusterRole")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var unused []string
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
		for _, group := range groups {
			for _, res := range resources {
				for _, verb := range verbs {
					// client-go's informers list within their watch where the apiserver allows.
					listedByWatch := verb == "list" && usedBy(requests, controllersUser, group, res, "watch")
					// Asked by the apiserver for an owner reference (OwnerReferencesPermissionEnforcement)
					// when the adapter adopts a prebuilt Workload: test/e2e/multikueue.
					adoption := group == "kueue.x-k8s.io" && res == "workloads" && verb == "delete"
					// Read only for a ClusterQueue with admission checks: test/e2e/multikueue.
					multiKueueChecks := group == "kueue.x-k8s.io" && res == "admissionchecks"
					if !usedBy(requests, controllersUser, group, res, verb) && !listedByWatch && !adoption && !multiKueueChecks {
						unused = append(unused, group+" "+res+" "+verb)
					}
				}
			}
		}
	}
	require.Empty(t, unused, "the Kueue adapter never made these requests: drop them from manifests/rbac/, or exercise them here")

	// Kueue itself reads Tephra Jobs with manifests/components/kueue's role, and is refused nothing.
	kueueLog, err := os.ReadFile(env.Cluster.LogPath(localcluster.Kueue))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(kueueLog), "\n") {
		require.NotContains(t, line, "forbidden", "Kueue was refused a request")
	}
}

const controllersUser = "system:serviceaccount:tephra-system:tephra-controllers"

func usedBy(requests []localcluster.APIRequest, user, group, res, verb string) bool {
	resource, sub, _ := strings.Cut(res, "/")
	for _, r := range requests {
		if r.User == user && r.Verb == verb && r.APIGroup == group && r.Resource == resource && r.Subresource == sub && r.Code != 403 {
			return true
		}
	}
	return false
}
