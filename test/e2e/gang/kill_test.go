package gang

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// The scheduler killed (SIGKILL) again and again while gangs of 64 bind: every gang completes,
// and none stays partly bound longer than its ready timeout (after which tephra-controllers would
// evict it: these bare pods would then be gone and the gang could not complete).
func TestSchedulerKilledWhileGangsOf64Bind(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 8*time.Minute)
	ns := env.Namespace(t)
	pool := env.Pool(t, "kill", 4, 8) // 32 CPUs for 4 gangs of 64 pods of 100m

	const gangs, size, readyTimeout = 4, 64, 45
	// reached polls the binds closely (every 20 ms), so that the kills land while gangs bind.
	reached := func(n int) <-chan struct{} {
		ch := make(chan struct{})
		go func() {
			defer close(ch)
			for ctx.Err() == nil {
				list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
				if err == nil {
					bound := 0
					for _, pod := range list.Items {
						if pod.Spec.NodeName != "" {
							bound++
						}
					}
					if bound >= n {
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		return ch
	}
	for g := range gangs {
		name := fmt.Sprintf("kill-%d", g)
		createPodGroup(t, env, ns, name, size, func(pg *schedulingv1alpha1.PodGroup) {
			pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](30)
			pg.Spec.ReadyTimeoutSeconds = ptr.To[int32](readyTimeout)
		})
		for i := range size {
			createPod(t, env, newPod(ns, podSpec{name: fmt.Sprintf("%s-%d", name, i), group: name, cpu: "100m", pool: pool}))
		}
	}

	partialSince := map[string]time.Time{}
	// check samples the gangs: how many are whole (all bound and Running), and fails the test if
	// one has stayed partly bound longer than its ready timeout.
	check := func() (whole int, state string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		bound, running := map[string]int{}, map[string]int{}
		for _, pod := range list.Items {
			group := pod.Labels[schedulingv1alpha1.PodGroupLabel]
			if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil {
				bound[group]++
				if pod.Status.Phase == corev1.PodRunning {
					running[group]++
				}
			}
		}
		var parts []string
		now := time.Now()
		for g := range gangs {
			name := fmt.Sprintf("kill-%d", g)
			parts = append(parts, fmt.Sprintf("%s %d/%d bound, %d running", name, bound[name], size, running[name]))
			switch {
			case running[name] == size:
				whole++
				delete(partialSince, name)
			case bound[name] > 0:
				if _, ok := partialSince[name]; !ok {
					partialSince[name] = now
				}
				require.Less(t, now.Sub(partialSince[name]), readyTimeout*time.Second,
					"gang %s has stayed partly bound longer than its ready timeout: %s", name, strings.Join(parts, "; "))
			default:
				delete(partialSince, name)
			}
		}
		sort.Strings(parts)
		return whole, strings.Join(parts, "; ")
	}

	// Kill the scheduler three times while the gangs bind: when the first pods are bound, when a
	// third are, and when two thirds are (as a watch sees the binds).
	for kill, threshold := range []int{1, gangs * size / 3, 2 * gangs * size / 3} {
		select {
		case <-reached(threshold):
		case <-time.After(2 * time.Minute):
			t.Fatalf("fewer than %d pods bound after 2 minutes: %s", threshold, func() string { _, s := check(); return s }())
		}
		t.Logf("kill %d with at least %d pods bound", kill+1, threshold)
		env.Cluster.KillComponent("tephra-scheduler")
		require.NoError(t, env.Cluster.StartComponent(ctx, "tephra-scheduler"))
	}

	framework.Eventually(t, 4*time.Minute, "every gang whole", func() (bool, string) {
		whole, state := check()
		return whole == gangs, state
	})
}
