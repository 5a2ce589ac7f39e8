package topology

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A queue over its share fills every rack; a topology gang of 8 of a queue below its share
// reclaims its 8 CPUs from one rack only (evictions spread over racks would free room no rack
// can use), and runs there.
func TestReclaimForATopologyGangEvictsInOneDomain(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ctx := context.Background()
	for _, name := range []string{"hog", "topo"} {
		_, err := env.Tephra.SchedulingV1alpha1().Queues().Create(ctx, &schedulingv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.QueueSpec{Parent: "root", Weight: 1},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	hogs := env.Namespace(t)
	const cluster = 64
	for i := range cluster {
		onePodOfCPU(t, env, hogs, fmt.Sprintf("hog-%d", i), func(p *corev1.Pod) {
			p.Labels = map[string]string{schedulingv1alpha1.QueueLabel: "hog"}
		})
	}
	racksOf := map[string]string{} // hog pod -> rack
	framework.Eventually(t, 2*time.Minute, "the hog queue fills every rack", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(hogs).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			node, err := env.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			racksOf[p.Name] = node.Labels[rackLabel]
		}
		return len(racksOf) == cluster, fmt.Sprintf("%d of %d bound", len(racksOf), cluster)
	})

	ns := env.Namespace(t)
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "topo", Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 8, Queue: "topo", Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 8 {
		onePodOfCPU(t, env, ns, fmt.Sprintf("topo-%d", i), func(p *corev1.Pod) {
			p.Labels = map[string]string{schedulingv1alpha1.PodGroupLabel: "topo"}
		})
	}
	racks := boundRacks(t, env, ns, 8)
	require.Len(t, racks, 1, "the gang runs in one rack")

	pods, err := env.Kube.CoreV1().Pods(hogs).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	left := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			left[p.Name] = true
		}
	}
	evictedFrom := map[string]int{}
	for name, rack := range racksOf {
		if !left[name] {
			evictedFrom[rack]++
		}
	}
	assert.Equal(t, map[string]int{racks[0]: 8}, evictedFrom, "8 pods of the hog queue evicted, all in the gang's rack")
}
