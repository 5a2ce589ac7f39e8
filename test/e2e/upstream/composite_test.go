package upstream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// compositeWorkload creates upstream's objects for a Workload with one composite template of two
// gangs, a prefill set of 2 and a decode set of 3, both needed (minGroupCount 2): the Workload,
// its CompositePodGroup and the two child PodGroups that name it their parent.
func compositeWorkload(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	compositeWorkloadOf(t, env, ns, name, "", nil)
}

// compositeWorkloadOf is compositeWorkload with the composite's (and its children's) priority
// class and the composite's disruption mode.
func compositeWorkloadOf(t *testing.T, env *framework.Env, ns, name, priorityClass string, disruption *upstreamv1alpha3.CompositeDisruptionMode) {
	t.Helper()
	ctx := context.Background()
	gang := func(n int32) upstreamv1beta1.PodGroupSchedulingPolicy {
		return upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: n}}
	}
	_, err := env.Kube.SchedulingV1beta1().Workloads(ns).Create(ctx, &upstreamv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: upstreamv1beta1.WorkloadSpec{CompositePodGroupTemplates: []upstreamv1beta1.CompositePodGroupTemplate{{
			Name:             "serve",
			SchedulingPolicy: upstreamv1beta1.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1beta1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			PodGroupTemplates: []upstreamv1beta1.PodGroupTemplate{
				{Name: "prefill", SchedulingPolicy: gang(2)},
				{Name: "decode", SchedulingPolicy: gang(3)},
			},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, &upstreamv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: upstreamv1alpha3.CompositePodGroupSpec{
			WorkloadRef:       &upstreamv1alpha3.WorkloadReference{WorkloadName: name, TemplateName: "serve"},
			SchedulingPolicy:  upstreamv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			DisruptionMode:    disruption,
			PriorityClassName: priorityClass,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, child := range []struct {
		name string
		size int32
	}{{"prefill", 2}, {"decode", 3}} {
		_, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, &upstreamv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + child.name, Namespace: ns},
			Spec: upstreamv1beta1.PodGroupSpec{
				ParentCompositePodGroupName: ptr.To(name),
				WorkloadRef:                 &upstreamv1beta1.WorkloadReference{WorkloadName: name, TemplateName: child.name},
				SchedulingPolicy:            gang(child.size),
				PriorityClassName:           priorityClass,
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// An upstream Workload with a composite template of two gangs (prefill 2, decode 3, one CPU a
// pod) on 4 free CPUs binds neither, although either gang alone fits; a node added binds both.
// mirror is the Tephra PodGroup object a CompositePodGroup is mirrored into.
func mirror(ctx context.Context, env *framework.Env, ns, name string) (*schedulingv1alpha1.PodGroup, error) {
	return env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
}

// The composite is mirrored as one Tephra PodGroup with a sub-group per child, and the children's
// pods are labelled its members: with the gates off in the scheduler TephraGang places it whole
// by its sub-groups; with them on, kube-scheduler's pod-group cycle does, and Tephra's plugins in
// it keep that.
func TestUpstreamCompositeOfTwoGangsBindsBothOrNeither(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	nodes := env.Pool(t, "up-composite", 1, 4)
	compositeWorkload(t, env, ns, "serve")
	for i := range 2 {
		linkedPod(t, env, ns, fmt.Sprintf("prefill-%d", i), "serve-prefill", "1", nodes)
	}
	for i := range 3 {
		linkedPod(t, env, ns, fmt.Sprintf("decode-%d", i), "serve-decode", "1", nodes)
	}
	// Long enough for several pod-group cycles to have tried and refused.
	for range 40 {
		require.Equal(t, 0, boundPods(t, env, ns), "no pod of a composite that is not whole is bound")
		time.Sleep(250 * time.Millisecond)
	}
	addNode(t, env, nodes, "up-composite-extra", 1)
	framework.Eventually(t, time.Minute, "both gangs bound", func() (bool, string) {
		n := boundPods(t, env, ns)
		return n == 5, fmt.Sprintf("%d of 5 bound", n)
	})
	ctx := context.Background()
	framework.Eventually(t, time.Minute, "the mirror to count both sub-groups running", func() (bool, string) {
		pg, err := mirror(ctx, env, ns, "serve")
		if err != nil {
			return false, err.Error()
		}
		whole := map[string]bool{}
		for _, sub := range pg.Status.SubGroups {
			whole[sub.Name] = sub.Whole
		}
		return whole["serve-prefill"] && whole["serve-decode"], fmt.Sprintf("phase %s, sub-groups %+v", pg.Status.Phase, pg.Status.SubGroups)
	})
	pg, err := mirror(ctx, env, ns, "serve")
	require.NoError(t, err)
	assert.Equal(t, int32(5), pg.Spec.MinMember)
	assert.Equal(t, schedulingv1alpha1.DisruptionSingle, pg.Spec.DisruptionMode, "upstream's default disruptionMode")
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Equal(t, "serve", p.Labels[schedulingv1alpha1.PodGroupLabel], "pod %s is a member of the composite's mirror", p.Name)
		assert.Equal(t, *p.Spec.SchedulingGroup.PodGroupName, p.Labels[schedulingv1alpha1.SubGroupLabel], "pod %s is in its child's sub-group", p.Name)
	}
	_, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "serve-prefill", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a child has no mirror of its own: %v", err)
}

// A composite of low priority (prefill 2, decode 3, one CPU a pod) fills a node of 5 CPUs; a pod of
// high priority asking for 2 CPUs then preempts. With upstream's Single disruption mode (the
// default) one child goes, every pod of it, and the other child's pods keep running; with All,
// all five go. The mirror carries the mode (composite.go), and TephraQueue's victims are the
// mirror's sub-groups or the whole group (victims.go).
func TestUpstreamCompositeIsDisruptedByItsMode(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 4*time.Minute)
	framework.PriorityClass(t, env, "e2e-cpg-low", 0)
	framework.PriorityClass(t, env, "e2e-cpg-high", 1000)
	for _, tc := range []struct {
		mode       string
		disruption *upstreamv1alpha3.CompositeDisruptionMode
	}{
		{"Single", nil},
		{"All", &upstreamv1alpha3.CompositeDisruptionMode{All: &upstreamv1alpha3.AllCompositeDisruptionMode{}}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ns := env.Namespace(t)
			nodes := env.Pool(t, "up-cpg-"+strings.ToLower(tc.mode), 1, 5)
			compositeWorkloadOf(t, env, ns, "serve", "e2e-cpg-low", tc.disruption)
			for i := range 2 {
				linkedPodOf(t, env, ns, fmt.Sprintf("prefill-%d", i), "serve-prefill", "1", nodes, "e2e-cpg-low")
			}
			for i := range 3 {
				linkedPodOf(t, env, ns, fmt.Sprintf("decode-%d", i), "serve-decode", "1", nodes, "e2e-cpg-low")
			}
			framework.Eventually(t, time.Minute, "the composite to be bound", func() (bool, string) {
				n := boundPods(t, env, ns)
				return n == 5, fmt.Sprintf("%d of 5 bound", n)
			})
			framework.Eventually(t, time.Minute, "the mirror to carry the mode", func() (bool, string) {
				pg, err := mirror(ctx, env, ns, "serve")
				if err != nil {
					return false, err.Error()
				}
				return string(pg.Spec.DisruptionMode) == tc.mode, fmt.Sprintf("disruptionMode %q", pg.Spec.DisruptionMode)
			})
			before := map[string]types.UID{}
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, p := range pods.Items {
				before[p.Name] = p.UID
			}

			urgent := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: ns},
				Spec: corev1.PodSpec{
					SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: nodes,
					PriorityClassName: "e2e-cpg-high",
					Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
					}}},
				},
			}
			_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, urgent, metav1.CreateOptions{})
			require.NoError(t, err)
			framework.Eventually(t, 2*time.Minute, "the urgent pod to be bound", func() (bool, string) {
				p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "urgent", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return p.Spec.NodeName != "", "pending"
			})
			// The victims are deleted by the scheduler (bare pods: nothing makes them again). Single:
			// every pod of one child and none of the other (which child is upstream's reprieve
			// order's choice: the older pods are kept first); All: all five.
			children := func(names []string) map[string]int {
				out := map[string]int{}
				for _, name := range names {
					child, _, _ := strings.Cut(name, "-")
					out[child]++
				}
				return out
			}
			var gone, kept []string
			framework.Eventually(t, time.Minute, "the victims of the mode to be gone", func() (bool, string) {
				gone, kept = nil, nil
				for name, uid := range before {
					p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
					switch {
					case apierrors.IsNotFound(err) || (err == nil && (p.UID != uid || p.DeletionTimestamp != nil)):
						gone = append(gone, name)
					case err == nil:
						kept = append(kept, name)
					}
				}
				goneOf, keptOf := children(gone), children(kept)
				ok := len(goneOf) == 1 && len(keptOf) == 1
				if tc.mode == "All" {
					ok = len(gone) == 5
				}
				return ok, fmt.Sprintf("gone %v, kept %v", goneOf, keptOf)
			})
			sizes := map[string]int{"prefill": 2, "decode": 3}
			for child, n := range children(gone) {
				assert.Equal(t, sizes[child], n, "child %s goes whole", child)
			}
			for child, n := range children(kept) {
				assert.Equal(t, sizes[child], n, "child %s keeps all its pods running", child)
			}
			// Stays so: nothing else of the composite is evicted meanwhile.
			time.Sleep(3 * time.Second)
			for _, name := range kept {
				p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err, "pod %s keeps running beside the urgent pod", name)
				assert.True(t, p.UID == before[name] && p.DeletionTimestamp == nil && p.Spec.NodeName != "", "pod %s keeps running beside the urgent pod", name)
			}
		})
	}
}
