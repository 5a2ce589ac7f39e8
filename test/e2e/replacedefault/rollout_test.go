package replacedefault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Tephra's own pods are never held by Tephra: with Tephra as the default scheduler and the
// default queue closed, the shipped Deployments of tephra-scheduler and tephra-controllers roll
// out (a new ReplicaSet's pod is placed, then the old one goes), and none of their pods counts
// in a queue. Their system priority class is what exempts them (IsSystemPod), as it exempts
// kube-scheduler and kube-controller-manager.
//
// The local cluster runs both components as processes; here their Deployments are created as
// shipped, and kwok plays their pods.
func TestTephraRollsOutWhileTheDefaultQueueIsClosed(t *testing.T) {
	env := framework.Shared(t)
	nodes, err := env.Cluster.CreateNodes(context.Background(), "rollout", 1, localcluster.NodeShape{CPU: "8", Memory: "32Gi", Pods: 110})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), nodes[0], metav1.DeleteOptions{}) })
	changeDefaultQueue(t, env, func(spec *schedulingv1alpha1.QueueSpec) { spec.State = schedulingv1alpha1.QueueClosed })

	for _, name := range []string{localcluster.Scheduler, localcluster.Controllers} {
		t.Run(name, func(t *testing.T) {
			d, err := env.Cluster.ManifestDeployment(name)
			require.NoError(t, err)
			assert.Equal(t, systemClusterCritical, d.Spec.Template.Spec.PriorityClassName, "the shipped Deployment has a system priority")
			deployments := env.Kube.AppsV1().Deployments(d.Namespace)
			_, err = deployments.Create(context.Background(), d, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = deployments.Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)})
			})
			rolledOut(t, env, d.Namespace, name)

			// A roll-out: a change of the template makes a new ReplicaSet whose pod must be
			// placed before the old one goes (maxUnavailable 25% of one replica rounds to 0).
			patch := `{"spec":{"template":{"metadata":{"annotations":{"e2e.tephra.dev/rollout":"2"}}}}}`
			_, err = deployments.Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			require.NoError(t, err)
			rolledOut(t, env, d.Namespace, name)
		})
	}
	q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(context.Background(), schedulingv1alpha1.DefaultQueue, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, q.Status.Allocated.Cpu().MilliValue(), "the default queue counts none of Tephra's pods: %v", q.Status.Allocated)
}

// rolledOut waits until the Deployment's latest generation is available in full, with every
// replica of the new template, as `kubectl rollout status` does.
func rolledOut(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := d.Status
		want := *d.Spec.Replicas
		last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d (want %d)",
			d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want)
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want, nil
	})
	if err != nil {
		pods, _ := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
		var held []string
		if pods != nil {
			for _, p := range pods.Items {
				held = append(held, fmt.Sprintf("%s (node %q): %s", p.Name, p.Spec.NodeName, env.Events(ns, p.Name)))
			}
		}
		t.Fatalf("Deployment %s/%s did not roll out: %s; pods: %v", ns, name, last, held)
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			assert.True(t, schedulingv1alpha1.IsSystemPod(&p), "pod %s is a system pod (priority %v)", p.Name, p.Spec.Priority)
			assert.Equal(t, corev1.PodRunning, p.Status.Phase)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
