package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// Members above a topology gang's minimum join its rack while it has room (the empty racks would
// otherwise draw them: kube-scheduler spreads by least allocation).
func TestElasticMembersJoinTheGangsDomain(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 4, Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 8 {
		onePodOfCPU(t, env, ns, fmt.Sprintf("elastic-%d", i), func(p *corev1.Pod) {
			p.Labels = map[string]string{schedulingv1alpha1.PodGroupLabel: "elastic"}
		})
	}
	assert.Len(t, boundRacks(t, env, ns, 8), 1, "the 4 members above the minimum are in the minimum's rack")
}

// A Job restarted by its policy goes back to the rack it ran in while that rack has room, though
// another rack would now be the better fit.
func TestRestartedJobGoesBackToItsDomain(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	// A filler leaves 3 CPUs in the first rack: the job of 4 takes an empty one.
	gang(t, env, ns, "filler", 13, schedulingv1alpha1.PodGroupTopology{Required: rackLabel})
	fillerRack := domainsOf(t, env, ns, "filler", 13, rackLabel)
	require.Len(t, fillerRack, 1)

	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: batchv1alpha1.JobSpec{
			MinAvailable: ptr.To[int32](4), MaxRetry: 3,
			Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel},
			Policies: []batchv1alpha1.LifecyclePolicy{{Event: batchv1alpha1.PodFailedEvent, Action: batchv1alpha1.RestartJobAction}},
			Tasks: []batchv1alpha1.TaskSpec{{
				Name: "worker", Replicas: 4,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{framework.PoolLabel: pool},
					Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
					}}},
				}},
			}},
		},
	}
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	jobRacks := func(old map[types.UID]bool) ([]string, map[types.UID]bool) {
		t.Helper()
		racks := map[string]bool{}
		uids := map[types.UID]bool{}
		framework.Eventually(t, time.Minute, "the job's 4 pods bound", func() (bool, string) {
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=train"})
			if err != nil {
				return false, err.Error()
			}
			clear(racks)
			clear(uids)
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || old[p.UID] || p.Status.Phase == corev1.PodFailed {
					continue
				}
				node, err := env.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				racks[node.Labels[rackLabel]] = true
				uids[p.UID] = true
			}
			return len(uids) == 4, fmt.Sprintf("%d bound", len(uids))
		})
		var out []string
		for r := range racks {
			out = append(out, r)
		}
		return out, uids
	}
	first, uids := jobRacks(nil)
	require.Len(t, first, 1, "the job is in one rack")
	require.NotEqual(t, fillerRack, first, "the first rack has 3 CPUs left: the job takes another")

	// The filler goes: its rack is now the better fit... but the job goes back to its own.
	require.NoError(t, env.Tephra.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "filler", metav1.DeleteOptions{}))
	for i := range 13 {
		_ = env.Kube.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("filler-%d", i), metav1.DeleteOptions{})
	}
	var victim string
	for uid := range uids {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=train"})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if p.UID == uid {
				victim = p.Name
			}
		}
		break
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"sim.tephra.dev/duration": "1s", "sim.tephra.dev/exit-code": "1",
	}}})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Patch(ctx, victim, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	again, _ := jobRacks(uids)
	assert.Equal(t, first, again, "the restarted job is back in its rack")
}
