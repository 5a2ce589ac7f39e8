package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Victims that take a while to terminate, as on nodes whose containers use their grace period (a
// finalizer holds them here): queue B's two pods reclaim two of queue A's four on a node of four
// units, not three. Once the victims are gone, A keeps the two it deserves.
//
// Tephra took three: reclaim never chooses a terminating pod as a victim, yet counted it on the
// node, beside B's first pod nominated there for the room it leaves, so B's second pod seemed to
// need two more victims. The dry run now counts the node without the pods on their way out. The faults of the other tests make victims linger (their
// nodes cannot report them gone while the apiserver is away), so they would see it too.
func TestReclaimTakesNoMoreWhileVictimsTerminate(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	const res corev1.ResourceName = "e2e.tephra.dev/lingering"
	const hold = "e2e.tephra.dev/hold"
	pool := map[string]string{framework.PoolLabel: "lingering"}
	nodes, err := env.Cluster.CreateNodes(ctx, "lingering", 1, localcluster.NodeShape{
		CPU: "4", Memory: "16Gi", Labels: pool, Extended: map[corev1.ResourceName]int64{res: 4},
	})
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), nodes[0], metav1.DeleteOptions{}) })
	require.NoError(t, err)
	w := &workload{env: env, ns: ns}
	w.createQueue(t, "lingering-a", schedulingv1alpha1.QueueOpen, nil)
	w.createQueue(t, "lingering-b", schedulingv1alpha1.QueueClosed, nil)
	one := corev1.ResourceList{res: *resource.NewQuantity(1, resource.DecimalSI)}
	release := func() {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			_, _ = env.Kube.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	}
	t.Cleanup(release)
	for i := range 4 {
		tpl := podTemplate(pool, one, "", map[string]string{schedulingv1alpha1.QueueLabel: "lingering-a"})
		tpl.Finalizers = []string{hold}
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", i), Labels: tpl.Labels, Finalizers: tpl.Finalizers},
			Spec:       tpl.Spec,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	count := func() (running, terminating, nominated int, state string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, 0, err.Error()
		}
		for _, p := range pods.Items {
			switch {
			case p.DeletionTimestamp != nil:
				terminating++
			case p.Status.Phase == corev1.PodRunning:
				running++
			case p.Status.NominatedNodeName != "":
				nominated++
			}
			state += fmt.Sprintf("%s %s deleting=%v nominated=%q; ", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.NominatedNodeName)
		}
		return running, terminating, nominated, state
	}
	framework.Eventually(t, time.Minute, "queue A's four pods running", func() (bool, string) {
		running, _, _, state := count()
		return running == 4, state
	})
	for i := range 2 {
		w.createPod(t, ctx, fmt.Sprintf("b-%d", i), podTemplate(pool, one, "", map[string]string{schedulingv1alpha1.QueueLabel: "lingering-b"}))
	}
	w.setState(t, ctx, "lingering-b", schedulingv1alpha1.QueueOpen)
	framework.Eventually(t, time.Minute, "both of B's pods nominated to the node, for two victims", func() (bool, string) {
		_, terminating, nominated, state := count()
		return nominated == 2 && terminating >= 2, state
	})
	_, terminating, _, state := count()
	require.Equal(t, 2, terminating, "victims for B's two pods: %s", state)
	release()
	framework.Eventually(t, time.Minute, "B's pods running beside the two of A's it left", func() (bool, string) {
		running, terminating, _, state := count()
		return running == 4 && terminating == 0, state
	})
}
