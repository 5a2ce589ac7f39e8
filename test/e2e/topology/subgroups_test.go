package topology

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// fill binds a pod of cpus CPUs straight to a node (no scheduler), to leave the racks partly used.
func fill(t *testing.T, env *framework.Env, ns, node string, cpus int) {
	t.Helper()
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fill-" + node, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector: map[string]string{framework.PoolLabel: pool},
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI)},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// replicasJob is a Job of 4 replicas of 8 pods of half a CPU, each replica required in one rack
// and the whole job in one block; a failed pod restarts its replica.
func replicasJob(ns, name string) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1alpha1.JobSpec{
			Topology: &schedulingv1alpha1.PodGroupTopology{Required: blockLabel},
			MaxRetry: 3,
			Tasks: []batchv1alpha1.TaskSpec{{
				Name: "replica", Replicas: 32,
				// A failed pod restarts its replica, not the job.
				Policies:  []batchv1alpha1.LifecyclePolicy{{Event: batchv1alpha1.PodFailedEvent, Action: batchv1alpha1.RestartSubGroupAction}},
				SubGroups: &batchv1alpha1.TaskSubGroups{Size: 8, Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{framework.PoolLabel: pool},
					Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
					}}},
				}},
			}},
		},
	}
}

// A job of 4 replicas of 8 (4 CPUs each), each replica in one rack and all in one block. Block
// b0 has the 16 CPUs the job needs, but 6 and 10 of them in its two racks: it holds three whole
// replicas, and the fourth would be split across racks. Block b1 has 8 and 8: one whole replica
// short of nothing. The job goes to b1, two replicas a rack. A second job of the same shape then
// finds b0 one rack short and places nothing, and says why.
func TestGangsOfGangsPlaceWholeAtEveryLevel(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	// r0 (block b0): 10 of 16 CPUs used; r1 (b0): 6; r2 and r3 (b1): 8 each.
	for node, cpus := range map[string]int{
		"r0-0": 4, "r0-1": 4, "r0-2": 2,
		"r1-0": 4, "r1-1": 2,
		"r2-0": 4, "r2-1": 4,
		"r3-0": 4, "r3-1": 4,
	} {
		fill(t, env, ns, node, cpus)
	}

	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, replicasJob(ns, "train"), metav1.CreateOptions{})
	require.NoError(t, err)
	racks := map[string]map[string]bool{} // sub-group → racks of its pods
	blocks := map[string]bool{}
	framework.Eventually(t, 2*time.Minute, "the job's 32 pods bound", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=train"})
		if err != nil {
			return false, err.Error()
		}
		clear(racks)
		clear(blocks)
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			node, err := env.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			sub := p.Labels[schedulingv1alpha1.SubGroupLabel]
			if racks[sub] == nil {
				racks[sub] = map[string]bool{}
			}
			racks[sub][node.Labels[rackLabel]] = true
			blocks[node.Labels[blockLabel]] = true
		}
		return bound == 32, fmt.Sprintf("%d of 32 bound", bound)
	})
	assert.Equal(t, map[string]bool{"b1": true}, blocks, "the job is in block b1, the one whose racks hold whole replicas")
	perRack := map[string]int{}
	for sub, in := range racks {
		assert.Len(t, in, 1, "replica %s is in one rack: %v", sub, in)
		for rack := range in {
			perRack[rack]++
		}
	}
	assert.Equal(t, map[string]int{"r2": 2, "r3": 2}, perRack, "two replicas a rack")
	framework.Eventually(t, time.Minute, "the group counts its sub-groups", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		whole := 0
		for _, sub := range pg.Status.SubGroups {
			if sub.Whole && sub.Running == 8 {
				whole++
			}
		}
		return whole == 4 && pg.Status.Phase == schedulingv1alpha1.PodGroupRunning, fmt.Sprintf("%s, %+v", pg.Status.Phase, pg.Status.SubGroups)
	})

	// A pod of replica-1 fails: its replica restarts, back in one rack, and the others run on.
	others, restarted := podUIDs(t, env, ns, "train", "replica-1")
	patch := []byte(`{"metadata":{"annotations":{"sim.tephra.dev/duration":"1s","sim.tephra.dev/exit-code":"1"}}}`)
	_, err = env.Kube.CoreV1().Pods(ns).Patch(ctx, "train-replica-13", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "replica-1 restarted and running", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedulingv1alpha1.SubGroupLabel + "=replica-1"})
		if err != nil {
			return false, err.Error()
		}
		fresh := 0
		for _, p := range pods.Items {
			if p.UID != restarted[p.Name] && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				fresh++
			}
		}
		return fresh == 8, fmt.Sprintf("%d of 8 pods of replica-1 new and running", fresh)
	})
	othersAfter, _ := podUIDs(t, env, ns, "train", "replica-1")
	assert.Equal(t, others, othersAfter, "the pods of the other replicas run on, untouched")
	assert.Len(t, others, 24)
	assert.Len(t, racksOfSubGroup(t, env, ns, "replica-1"), 1, "the restarted replica is in one rack")
	job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, batchv1alpha1.JobRunning, job.Status.State.Phase)

	// Block b1 is full now, and b0 holds three whole replicas: the second job waits whole.
	_, err = env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, replicasJob(ns, "second"), metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the second job says why it waits", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		if cond == nil {
			return false, "no condition"
		}
		return cond.Reason == schedulingv1alpha1.ReasonNotEnoughResources &&
			strings.Contains(cond.Message, "the sub-groups of pod group "+ns+"/second do not fit") &&
			strings.Contains(cond.Message, "3 of the 4 sub-groups it needs fit"), cond.Reason + ": " + cond.Message
	})
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=second"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 32)
	for _, p := range pods.Items {
		assert.Empty(t, p.Spec.NodeName, "no pod of the second job is placed")
	}
}

// podUIDs maps a job's live pods to their UIDs: those of the other sub-groups, and those of sub.
func podUIDs(t *testing.T, env *framework.Env, ns, job, sub string) (others, of map[string]types.UID) {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + job})
	require.NoError(t, err)
	others, of = map[string]types.UID{}, map[string]types.UID{}
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Labels[schedulingv1alpha1.SubGroupLabel] == sub:
			of[p.Name] = p.UID
		default:
			others[p.Name] = p.UID
		}
	}
	return others, of
}

// racksOfSubGroup lists the racks of a sub-group's bound pods.
func racksOfSubGroup(t *testing.T, env *framework.Env, ns, sub string) []string {
	t.Helper()
	ctx := context.Background()
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedulingv1alpha1.SubGroupLabel + "=" + sub})
	require.NoError(t, err)
	seen := map[string]bool{}
	var racks []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		node, err := env.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		if r := node.Labels[rackLabel]; !seen[r] {
			seen[r] = true
			racks = append(racks, r)
		}
	}
	return racks
}
