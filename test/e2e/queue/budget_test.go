package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Reclaim respects PodDisruptionBudgets where it can: queue A runs two pods without a budget and,
// started later (so, least important by age), four under a budget that allows one disruption.
// Queue B reclaims three: the two pods without a budget and one guarded pod go, and the
// evictions run outside the scheduling cycle (upstream's async preemption).
func TestReclaimRespectsPodDisruptionBudgets(t *testing.T) {
	env := framework.Shared(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/gpu-budget"
	pool := units(t, env, res, 6, 1)
	framework.CreateQueue(t, env, "budget-a", nil)
	framework.CreateQueue(t, env, "budget-b", nil)
	before := asyncPreemptions(t, env)

	create := func(name, app string) {
		pod := workPod{name: name, queue: "budget-a", res: res, amount: 1, pool: pool}.build(ns)
		pod.Labels["app"] = app
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("free-0", "free")
	create("free-1", "free")
	framework.WaitBound(t, env, ns, map[string]int{"budget-a": 2}, time.Minute)
	time.Sleep(1100 * time.Millisecond) // start times are in seconds: the guarded pods start later
	for i := range 4 {
		create(fmt.Sprintf("guarded-%d", i), "guarded")
	}
	framework.WaitBound(t, env, ns, map[string]int{"budget-a": 6}, time.Minute)
	_, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: policy.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the budget to allow one disruption", func() (bool, string) {
		pdb, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pdb.Status.DisruptionsAllowed == 1 && pdb.Status.CurrentHealthy == 4, fmt.Sprintf("%+v", pdb.Status)
	})

	submit(t, env, ns, 3, "b", workPod{queue: "budget-b", res: res, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"budget-a": 3, "budget-b": 3}, 2*time.Minute)
	framework.HoldBound(t, env, ns, map[string]int{"budget-a": 3, "budget-b": 3}, 5*time.Second)

	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app"})
	require.NoError(t, err)
	var left []string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			left = append(left, pod.Name)
		}
	}
	assert.Len(t, onlyGuarded(left), 3, "one guarded pod evicted, as its budget allows (left: %v)", left)
	assert.NotContains(t, left, "free-0")
	assert.NotContains(t, left, "free-1")
	events := eventsOfAll(t, env, ns, "Reclaimed")
	assert.NotContains(t, events, "PodDisruptionBudget", "no eviction had to break the budget")
	assert.Greater(t, asyncPreemptions(t, env), before, "the evictions ran in upstream's async preemption")
}

func onlyGuarded(names []string) []string {
	var out []string
	for _, name := range names {
		if strings.HasPrefix(name, "guarded-") {
			out = append(out, name)
		}
	}
	return out
}

// asyncPreemptions reads how many preemptions kube-scheduler's async executor has run.
func asyncPreemptions(t *testing.T, env *framework.Env) float64 {
	t.Helper()
	return framework.SchedulerMetric(t, env, "scheduler_preemption_goroutines_execution_total{")
}
