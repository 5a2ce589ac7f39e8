// Package upstreamgate checks that Tephra's scheduler profiles gang upstream PodGroups once even
// when tephra-scheduler itself runs with the GenericWorkload feature gate (which adds upstream's
// GangScheduling plugin to every profile unless the profile disables it, as Tephra's do).
package upstreamgate

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		// The gate in tephra-scheduler too: kube-scheduler must accept Tephra's profiles, which
		// disable GangScheduling, and run its pod-group cycle beside TephraGang.
		FeatureGates:  "GenericWorkload=true",
		RuntimeConfig: "scheduling.k8s.io/v1beta1=true",
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// A gang of 3 whose third member joins by Tephra's label only: Tephra counts 3 members and binds
// them together; upstream's GangScheduling would count the 2 linked by spec.schedulingGroup and
// hold them forever. All 3 bind, so only Tephra gated them.
func TestUpstreamGangIsGatedOnlyByTephra(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	pool := map[string]string{"e2e.tephra.dev/pool": "gate"}
	_, err := env.Cluster.CreateNodes(ctx, "gate", 1, localcluster.NodeShape{CPU: "4", Memory: "64Gi", Pods: 110, Labels: pool})
	require.NoError(t, err)

	_, err = env.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "mixed", Namespace: ns},
		Spec: upstreamv1beta1.PodGroupSpec{SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{
			Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 3},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mixed-%d", i), Namespace: ns},
			Spec: corev1.PodSpec{
				SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
				Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			},
		}
		if i < 2 {
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("mixed")}
		} else {
			pod.Labels = map[string]string{schedulingv1alpha1.PodGroupLabel: "mixed"}
		}
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range 3 {
		env.WaitPod(t, ns, fmt.Sprintf("mixed-%d", i), time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	}
}
