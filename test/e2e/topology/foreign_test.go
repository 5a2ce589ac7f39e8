package topology

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// onePodOfCPU is a one-CPU pod of the test's nodes, made a member by mutate.
func onePodOfCPU(t *testing.T, env *framework.Env, ns, name string, mutate func(*corev1.Pod)) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector: map[string]string{framework.PoolLabel: pool},
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}},
		},
	}
	mutate(pod)
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// boundRacks waits until the pods of a namespace are all bound and returns their racks.
func boundRacks(t *testing.T, env *framework.Env, ns string, size int) []string {
	t.Helper()
	racks := map[string]bool{}
	framework.Eventually(t, 90*time.Second, fmt.Sprintf("%d pods bound", size), func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		clear(racks)
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			node, err := env.Kube.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			racks[node.Labels[rackLabel]] = true
		}
		return bound == size, fmt.Sprintf("%d of %d bound", bound, size)
	})
	var out []string
	for r := range racks {
		out = append(out, r)
	}
	return out
}

// An upstream PodGroup with schedulingConstraints.topology and a Volcano PodGroup with
// networkTopology {mode: hard, highestTierAllowed: 1} are each placed in one rack.
func TestForeignTopologyConstraintsPlaceInOneRack(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	const size = 5

	t.Run("upstream", func(t *testing.T) {
		ns := env.Namespace(t)
		_, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), &upstreamv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: ns},
			Spec: upstreamv1beta1.PodGroupSpec{
				SchedulingPolicy:      upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: size}},
				SchedulingConstraints: &upstreamv1beta1.PodGroupSchedulingConstraints{Topology: []upstreamv1beta1.TopologyConstraint{{Key: rackLabel}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range size {
			onePodOfCPU(t, env, ns, fmt.Sprintf("up-%d", i), func(p *corev1.Pod) {
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("up")}
			})
		}
		assert.Len(t, boundRacks(t, env, ns, size), 1, "the upstream gang is in one rack")
		// Both binaries read the upstream PodGroup in memory: no Tephra object holds its
		// translation, whose topology is the constraint's.
		_, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "up", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no Tephra PodGroup object: %v", err)
		up, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), "up", metav1.GetOptions{})
		require.NoError(t, err)
		translated, invalid := schedulingv1alpha1.FromUpstream(up, nil)
		require.Empty(t, invalid)
		assert.Equal(t, &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}, translated.Spec.Topology, "the group's topology")
	})

	t.Run("volcano", func(t *testing.T) {
		poolEmpty(t, env)
		ns := env.Namespace(t)
		scheme := runtime.NewScheme()
		utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
		c, err := client.New(env.Cluster.Config, client.Options{Scheme: scheme})
		require.NoError(t, err)
		require.NoError(t, c.Create(context.Background(), &volcanov1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: ns},
			Spec: volcanov1beta1.PodGroupSpec{MinMember: size, Queue: "default",
				NetworkTopology: &volcanov1beta1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(1)}},
		}))
		for i := range size {
			onePodOfCPU(t, env, ns, fmt.Sprintf("vc-%d", i), func(p *corev1.Pod) {
				p.Annotations = map[string]string{schedulingv1alpha1.VolcanoGroupNameAnnotation: "vc"}
			})
		}
		assert.Len(t, boundRacks(t, env, ns, size), 1, "the Volcano gang is in one rack (tier 1)")
		mirror, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "vc", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}, mirror.Spec.Topology, "the mirror's topology")
	})
}
