package topology

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// labelRack sets a label on every node of a rack, or removes it (value "").
func labelRack(t *testing.T, env *framework.Env, rack, key, value string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: rackLabel + "=" + rack})
	require.NoError(t, err)
	require.NotEmpty(t, nodes.Items)
	for _, n := range nodes.Items {
		if value == "" {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
		_, err := env.Kube.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// A gang whose members read a dataset lands in the rack that caches it: on four empty racks best
// fit alone would take the first, r0; the nodes of r3 cache the dataset, and the gang of 4 goes
// there whole.
func TestAGangLandsInTheRackThatCachesItsData(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	label := datasets.NodeLabelPrefix + "wiki"
	labelRack(t, env, "r3", label, datasets.Cached)
	t.Cleanup(func() { labelRack(t, env, "r3", label, "") })

	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 4, Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 4 {
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("reader-%d", i), Namespace: ns,
				Labels:      map[string]string{schedulingv1alpha1.PodGroupLabel: "reader"},
				Annotations: map[string]string{datasets.Annotation: "wiki"}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{framework.PoolLabel: pool},
				Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"r3"}, domainsOf(t, env, ns, "reader", 4, rackLabel), "the rack that caches wiki")
}

// An upstream PodGroup that declares its members' data, once, on itself, lands in the rack that
// caches it: with the GenericWorkload gate off TephraGang places it (chooseDomain), with it on
// kube-scheduler's pod-group cycle tries the rack TephraGang offers first.
func TestAnUpstreamGangLandsInTheRackThatCachesItsData(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	label := datasets.NodeLabelPrefix + "books"
	labelRack(t, env, "r2", label, datasets.Cached)
	t.Cleanup(func() { labelRack(t, env, "r2", label, "") })

	_, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: ns, Annotations: map[string]string{datasets.Annotation: "books"}},
		Spec: upstreamv1beta1.PodGroupSpec{
			SchedulingPolicy:      upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 4}},
			SchedulingConstraints: &upstreamv1beta1.PodGroupSchedulingConstraints{Topology: []upstreamv1beta1.TopologyConstraint{{Key: rackLabel}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 4 {
		onePodOfCPU(t, env, ns, fmt.Sprintf("up-%d", i), func(p *corev1.Pod) {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("up")}
		})
	}
	assert.Equal(t, []string{"r2"}, boundRacks(t, env, ns, 4), "the rack that caches books, where best fit alone takes r0")
}
