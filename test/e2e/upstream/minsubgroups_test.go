package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	upstreamv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// boundOf counts the bound pods of each child PodGroup (spec.schedulingGroup) in ns.
func boundOf(t *testing.T, env *framework.Env, ns string) map[string]int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
			continue
		}
		out[*p.Spec.SchedulingGroup.PodGroupName]++
	}
	return out
}

// An upstream composite of three gangs of 2 (one CPU a pod) that needs 2 of them
// (gang.minGroupCount 2), on a node of 5 CPUs: two gangs bind, the third binds none of its pods
// though one of them would fit; a second node, and the third binds whole.
func TestUpstreamCompositeRunsWithMinGroupCountChildren(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	nodes := env.Pool(t, "up-mingroup", 1, 5)
	gang := upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 2}}
	children := []string{"trio-a", "trio-b", "trio-c"}
	var templates []upstreamv1beta1.PodGroupTemplate
	for _, c := range children {
		templates = append(templates, upstreamv1beta1.PodGroupTemplate{Name: c, SchedulingPolicy: gang})
	}
	_, err := env.Kube.SchedulingV1beta1().Workloads(ns).Create(ctx, &upstreamv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "trio", Namespace: ns},
		Spec: upstreamv1beta1.WorkloadSpec{CompositePodGroupTemplates: []upstreamv1beta1.CompositePodGroupTemplate{{
			Name:              "trio",
			SchedulingPolicy:  upstreamv1beta1.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1beta1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			PodGroupTemplates: templates,
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, &upstreamv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "trio", Namespace: ns},
		Spec: upstreamv1alpha3.CompositePodGroupSpec{
			WorkloadRef:      &upstreamv1alpha3.WorkloadReference{WorkloadName: "trio", TemplateName: "trio"},
			SchedulingPolicy: upstreamv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, c := range children {
		_, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, &upstreamv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: ns},
			Spec: upstreamv1beta1.PodGroupSpec{
				ParentCompositePodGroupName: ptr.To("trio"),
				WorkloadRef:                 &upstreamv1beta1.WorkloadReference{WorkloadName: "trio", TemplateName: c},
				SchedulingPolicy:            gang,
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range 2 {
			linkedPod(t, env, ns, fmt.Sprintf("%s-%d", c, i), c, "1", nodes)
		}
	}
	framework.Eventually(t, time.Minute, "two children bound whole", func() (bool, string) {
		bound := boundOf(t, env, ns)
		whole := 0
		for _, n := range bound {
			if n == 2 {
				whole++
			}
		}
		return whole == 2, fmt.Sprintf("bound %v", bound)
	})
	// Long enough for several cycles: the third child's pods stay unbound, though one would fit.
	for range 20 {
		bound := boundOf(t, env, ns)
		require.Len(t, bound, 2, "no pod of the third child is bound: %v", bound)
		time.Sleep(250 * time.Millisecond)
	}
	pg, err := mirror(ctx, env, ns, "trio")
	require.NoError(t, err)
	assert.Equal(t, ptr.To[int32](2), pg.Spec.MinSubGroups)
	assert.Equal(t, int32(4), pg.Spec.MinMember)

	addNode(t, env, nodes, "up-mingroup-extra", 2)
	framework.Eventually(t, time.Minute, "the third child bound whole", func() (bool, string) {
		bound := boundOf(t, env, ns)
		return len(bound) == 3 && bound["trio-a"] == 2 && bound["trio-b"] == 2 && bound["trio-c"] == 2, fmt.Sprintf("bound %v", bound)
	})
}
