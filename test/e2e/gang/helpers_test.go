// Package gang checks gang scheduling end to end: TephraGang binds a PodGroup's minimum all at
// once or not at all, gangs never deadlock each other, a scheduler restart leaves no partial gang,
// and the PodGroup controller reports what happened.
package gang

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// vanillaScheduler places pods one by one, as the default scheduler does.
const vanillaScheduler = framework.VanillaScheduler

func TestMain(m *testing.M) {
	config, err := framework.SchedulerConfigWithVanillaProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m, localcluster.Options{SchedulerConfig: config}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// poolLabel keeps a test's pods on the test's own nodes.
const poolLabel = "e2e.tephra.dev/pool"

// addNode adds one more node to a pool.
func addNode(t *testing.T, env *framework.Env, pool map[string]string, name string, cpus int) {
	t.Helper()
	_, err := env.Kube.CoreV1().Nodes().Create(context.Background(), localcluster.SimulatedNode(name, localcluster.NodeShape{
		CPU: fmt.Sprint(cpus), Memory: "64Gi", Pods: 110, Labels: pool,
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	require.NoError(t, env.Cluster.WaitNodesReady(context.Background(), name))
}

type podSpec struct {
	name, group, task string
	scheduler         string
	cpu               string
	pool              map[string]string
	annotations       map[string]string
	gates             []string
}

func newPod(ns string, s podSpec) *corev1.Pod {
	labels := map[string]string{}
	if s.group != "" {
		labels[schedulingv1alpha1.PodGroupLabel] = s.group
		labels["e2e.tephra.dev/job"] = s.group
	}
	if s.task != "" {
		labels[schedulingv1alpha1.TaskLabel] = s.task
	}
	if s.scheduler == "" {
		s.scheduler = schedulingv1alpha1.SchedulerName
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: ns, Labels: labels, Annotations: s.annotations},
		Spec: corev1.PodSpec{
			SchedulerName: s.scheduler,
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  s.pool,
			Containers: []corev1.Container{{
				Name: "work", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.cpu)}},
			}},
		},
	}
	for _, gate := range s.gates {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: gate})
	}
	return pod
}

func createPodGroup(t *testing.T, env *framework.Env, ns, name string, minMember int32, mutate func(*schedulingv1alpha1.PodGroup)) {
	t.Helper()
	pg := &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, ScheduleTimeoutSeconds: ptr.To[int32](15)},
	}
	if mutate != nil {
		mutate(pg)
	}
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createPod(t *testing.T, env *framework.Env, pod *corev1.Pod) {
	t.Helper()
	_, err := env.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// jobState is what one job's pods are doing at a moment.
type jobState struct{ bound, running, succeeded, total int }

// sampleJobs counts, per job label, the pods bound, running and succeeded in a namespace.
func sampleJobs(ctx context.Context, env *framework.Env, ns string) (map[string]jobState, error) {
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	jobs := map[string]jobState{}
	for _, pod := range pods.Items {
		job := pod.Labels["e2e.tephra.dev/job"]
		s := jobs[job]
		s.total++
		if pod.Spec.NodeName != "" {
			s.bound++
		}
		switch pod.Status.Phase {
		case corev1.PodRunning:
			s.running++
		case corev1.PodSucceeded:
			s.succeeded++
		}
		jobs[job] = s
	}
	return jobs, nil
}

// boundPods counts the pods of a namespace bound to a node.
func boundPods(t *testing.T, env *framework.Env, ns string) int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func describe(jobs map[string]jobState) string {
	var parts []string
	for name, s := range jobs {
		parts = append(parts, fmt.Sprintf("%s: %d/%d bound, %d running, %d succeeded", name, s.bound, s.total, s.running, s.succeeded))
	}
	return strings.Join(parts, "; ")
}
