package gang

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A gang forced partly bound (half its pods bound by hand, past the scheduler) is repaired by its
// ready timeout: tephra-controllers evicts the bound half, the PodGroup says why, the ReplicaSet
// creates the pods again, and once there is room the whole gang runs.
//
// The other half is taken away (the ReplicaSet scaled to 2) before the bind: the scheduler also
// repairs a partial gang, by rolling back the members bound outside its attempt when an attempt
// of the group fails (leftovers, plugins/gang/attempts.go), and with members left to try, its next
// attempt raced the timeout (a run once saw the scheduler delete the hand-bound pods 9.5 s after the
// bind, and no eviction counted). With no member left to try, only the timeout can act.
func TestPartlyBoundGangIsEvictedAfterItsReadyTimeout(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	ns := env.Namespace(t)
	pool := env.Pool(t, "unready", 1, 3) // 3 CPUs: a gang of 4 one-CPU pods does not fit

	backoffCyclesBefore := backoffCycles(t, env)
	createPodGroup(t, env, ns, "unready", 4, func(pg *schedulingv1alpha1.PodGroup) {
		pg.Spec.ReadyTimeoutSeconds = ptr.To[int32](10)
	})
	template := newPod(ns, podSpec{name: "", group: "unready", cpu: "1", pool: pool})
	template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "unready", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{schedulingv1alpha1.PodGroupLabel: "unready"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}
	_, err := env.Kube.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	require.NoError(t, err)

	var pods []corev1.Pod
	framework.Eventually(t, time.Minute, "the ReplicaSet's 4 pods, none bound", func() (bool, string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		return len(pods) == 4, fmt.Sprintf("%d pods", len(pods))
	})
	time.Sleep(2 * time.Second) // let the scheduler try and refuse the gang
	require.Equal(t, 0, boundPods(t, env, ns), "the gang does not fit: the scheduler binds none")

	scaleReplicaSet(t, env, ns, "unready", 2)
	framework.Eventually(t, time.Minute, "the ReplicaSet down to 2 pods", func() (bool, string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods = pods[:0]
		for _, pod := range list.Items {
			if pod.DeletionTimestamp == nil {
				pods = append(pods, pod)
			}
		}
		return len(list.Items) == 2 && len(pods) == 2, fmt.Sprintf("%d pods, %d not deleted", len(list.Items), len(pods))
	})
	time.Sleep(time.Second) // let a cycle of theirs begun before the scale-down end
	require.Equal(t, 0, boundPods(t, env, ns), "2 of the gang's 4 pods: the scheduler binds none")

	node := nodeOfPool(t, env, pool)
	handBound := []string{pods[0].Name, pods[1].Name}
	for _, name := range handBound {
		err := env.Kube.CoreV1().Pods(ns).Bind(ctx, bindingOf(ns, name, node), metav1.CreateOptions{})
		require.NoError(t, err, "binding %s by hand", name)
	}
	bound := time.Now()

	// kube-scheduler, failing a cycle of a pod begun before the pod was bound by someone else,
	// writes PodScheduled False back over the bind, with the time of the False it had before.
	// Do as it does, deterministically, once kwok has started the pod: the clock must still start
	// at the bind, not at the pod's creation (this test once saw an eviction 7.6 s after it).
	framework.Eventually(t, 30*time.Second, "the hand-bound pods Running", func() (bool, string) {
		var state []string
		for _, name := range handBound {
			pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if pod.Status.Phase != corev1.PodRunning {
				state = append(state, fmt.Sprintf("%s %s", name, pod.Status.Phase))
			}
		}
		return len(state) == 0, strings.Join(state, ", ")
	})
	stale, err := env.Kube.CoreV1().Pods(ns).Get(ctx, handBound[0], metav1.GetOptions{})
	require.NoError(t, err)
	writtenBack := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "a cycle begun before the bind failed",
		LastTransitionTime: pods[0].CreationTimestamp}
	for i, c := range stale.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			stale.Status.Conditions[i] = writtenBack
		}
	}
	_, err = env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	require.NoError(t, err, "writing PodScheduled False back over the bind, as a stale scheduler cycle does")

	framework.Eventually(t, time.Minute, "the hand-bound pods evicted after the ready timeout", func() (bool, string) {
		var state []string
		for _, name := range handBound {
			pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return false, err.Error()
			case pod.DeletionTimestamp != nil:
				continue
			}
			state = append(state, fmt.Sprintf("%s on %q (%s)", name, pod.Spec.NodeName, pod.Status.Phase))
		}
		return len(state) == 0, strings.Join(state, ", ")
	})
	require.GreaterOrEqual(t, time.Since(bound), 9*time.Second, "evicted before its ready timeout of 10s")

	pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "unready", metav1.GetOptions{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, pg.Status.UnreadyEvictions, int32(1))
	require.NotNil(t, pg.Status.LastUnreadyEvictionTime)
	cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupPodsReady)
	require.NotNil(t, cond, "PodsReady condition")
	require.Equal(t, metav1.ConditionFalse, cond.Status)
	require.Equal(t, "Unready", cond.Reason, cond.Message)
	require.Contains(t, cond.Message, "evicted the 2 bound pods")
	framework.Eventually(t, 30*time.Second, "a PodGroupUnready event on the PodGroup", func() (bool, string) {
		events := env.Events(ns, "unready")
		return strings.Contains(events, "Warning PodGroupUnready"), events
	})

	// Room for the whole gang: the ReplicaSet's pods, created again and back to 4, all bind and
	// run.
	scaleReplicaSet(t, env, ns, "unready", 4)
	addNode(t, env, pool, ns+"-more", 2)
	framework.Eventually(t, 2*time.Minute, "the whole gang Running and PodsReady", func() (bool, string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, pod := range list.Items {
			if pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
				running++
			}
		}
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "unready", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1alpha1.PodGroupPodsReady)
		return running == 4 && ready && pg.Status.UnreadyEvictions == 0,
			fmt.Sprintf("%d running, PodsReady %v, unreadyEvictions %d", running, ready, pg.Status.UnreadyEvictions)
	})

	// The gang backed off after each failed attempt and after the eviction: its members waited at
	// PreEnqueue, and only those on their way when an attempt failed were tried meanwhile, at
	// most its 4 members per failure. One member used to be tried every 10 ms while the group
	// backed off (672 times in this test).
	assert.LessOrEqual(t, backoffCycles(t, env)-backoffCyclesBefore, 40, "scheduling cycles of members of a group backing off")
}

// scaleReplicaSet sets a ReplicaSet's replicas through its scale subresource, as kubectl scale does.
func scaleReplicaSet(t *testing.T, env *framework.Env, ns, name string, replicas int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := env.Kube.AppsV1().ReplicaSets(ns).GetScale(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		_, err = env.Kube.AppsV1().ReplicaSets(ns).UpdateScale(context.Background(), name, scale, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err, "scaling ReplicaSet %s to %d", name, replicas)
}

// backoffCycles reads tephra_gang_backoff_cycles_total from the scheduler.
func backoffCycles(t *testing.T, env *framework.Env) int {
	t.Helper()
	metrics, err := env.Cluster.SchedulerMetrics(context.Background())
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^tephra_gang_backoff_cycles_total (\S+)`).FindStringSubmatch(metrics)
	require.NotNil(t, m, "the scheduler exports tephra_gang_backoff_cycles_total")
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return int(v)
}

// nodeOfPool returns the name of a node of the pool.
func nodeOfPool(t *testing.T, env *framework.Env, pool map[string]string) string {
	t.Helper()
	var selector []string
	for k, v := range pool {
		selector = append(selector, k+"="+v)
	}
	nodes, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: strings.Join(selector, ",")})
	require.NoError(t, err)
	require.NotEmpty(t, nodes.Items)
	return nodes.Items[0].Name
}
