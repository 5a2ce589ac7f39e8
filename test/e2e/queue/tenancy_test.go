package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A queue's namespaceSelector admits only the namespaces it matches: a pod or a gang from another
// namespace waits with an event (and a PodGroup condition) that names the queue and the selector,
// while the same in a matching namespace runs; relabelling the namespace lets the waiting pod run.
func TestNamespaceOutsideAQueuesSelectorCannotUseIt(t *testing.T) {
	env := framework.Shared(t)
	ctx := context.Background()
	mine, other := env.Namespace(t), env.Namespace(t)
	label := func(ns, team string) {
		t.Helper()
		obj, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		obj.Labels["e2e.tephra.dev/team"] = team
		_, err = env.Kube.CoreV1().Namespaces().Update(ctx, obj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	label(mine, "a")
	label(other, "b")
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-tenancy"
	pool := units(t, env, gpu, 1, 4)
	framework.CreateQueue(t, env, "tenant-a", func(s *schedulingv1alpha1.QueueSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.tephra.dev/team": "a"}}
	})

	submit(t, env, other, 1, "intruder", workPod{queue: "tenant-a", res: gpu, amount: 1, pool: pool})
	createGroup(t, env, other, "intruders", "tenant-a", 2, nil)
	submit(t, env, other, 2, "gang", workPod{group: "intruders", queue: "tenant-a", res: gpu, amount: 1, pool: pool})
	submit(t, env, mine, 1, "member", workPod{queue: "tenant-a", res: gpu, amount: 1, pool: pool})

	want := `QueueForbidden: namespace "` + other + `" does not match the namespaceSelector of queue "tenant-a" (e2e.tephra.dev/team=a)`
	waitEvent(t, env, other, "intruder-0", want)
	waitGroupCondition(t, env, other, "intruders", schedulingv1alpha1.ReasonQueueForbidden, `does not match the namespaceSelector of queue "tenant-a"`)
	framework.WaitBound(t, env, mine, map[string]int{"tenant-a": 1}, time.Minute)
	framework.HoldBound(t, env, other, map[string]int{"tenant-a": 0}, 3*time.Second)

	// The namespace joins team a: its waiting pods are queued again and run.
	label(other, "a")
	framework.WaitBound(t, env, other, map[string]int{"tenant-a": 3}, time.Minute)
	waitGroupPhase(t, env, other, "intruders", schedulingv1alpha1.PodGroupRunning)
}
