package topology

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// boundBySubGroup counts a job's bound pods by sub-group, and the racks each sub-group's are in.
func boundBySubGroup(ctx context.Context, env *framework.Env, ns, job string) (map[string]int, map[string]map[string]bool, error) {
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, nil, err
	}
	bound, racks := map[string]int{}, map[string]map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		node, err := env.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		sub := p.Labels[schedulingv1alpha1.SubGroupLabel]
		bound[sub]++
		if racks[sub] == nil {
			racks[sub] = map[string]bool{}
		}
		racks[sub][node.Labels[rackLabel]] = true
	}
	return bound, racks, nil
}

// wholeReplicas reads a Job's replicas of 4 pods: how many have all 4 bound, and its PodGroup.
// state describes both, for a wait's last word.
func wholeReplicas(ctx context.Context, env *framework.Env, ns, job string) (whole int, pg *schedulingv1alpha1.PodGroup, state string, err error) {
	bound, _, err := boundBySubGroup(ctx, env, ns, job)
	if err != nil {
		return 0, nil, "", err
	}
	pg, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		return 0, nil, "", err
	}
	for _, n := range bound {
		if n == 4 {
			whole++
		}
	}
	return whole, pg, fmt.Sprintf("bound %v, group %s with %d whole", bound, pg.Status.Phase, pg.Status.WholeSubGroups), nil
}

// A Job of 4 replicas of 4 pods of 3 CPUs (a rack holds one replica: one pod a node), each
// replica required in one rack, that needs 3 of them (subGroups.minSubGroups). Two nodes of rack
// r3 have 2 CPUs free: r3 holds 2 pods of a replica, not 4. The job runs with 3 replicas, one a
// rack, and the fourth waits with none of its pods bound, though 2 of them would fit; once r3
// frees, the fourth binds there, whole.
func TestAMinimumOfSubGroupsRunsAndTheRestComeWhole(t *testing.T) {
	env := framework.Shared(t)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	for i := range 2 {
		fill(t, env, ns, fmt.Sprintf("r3-%d", i), 2)
	}
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{
			Name: "replica", Replicas: 16,
			SubGroups: &batchv1alpha1.TaskSubGroups{Size: 4, MinSubGroups: ptr.To[int32](3), Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{framework.PoolLabel: pool},
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
				}}},
			}},
		}}},
	}
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	framework.Eventually(t, 2*time.Minute, "3 replicas bound, the job and its group running", func() (bool, string) {
		whole, pg, state, err := wholeReplicas(ctx, env, ns, "train")
		if err != nil {
			return false, err.Error()
		}
		j, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return whole == 3 && pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && pg.Status.WholeSubGroups == 3 &&
				j.Status.State.Phase == batchv1alpha1.JobRunning,
			fmt.Sprintf("%s, job %s", state, j.Status.State.Phase)
	})
	// The fourth stays whole: none of its pods is bound while r3 has room for 2 of them only.
	time.Sleep(5 * time.Second)
	bound, racks, err := boundBySubGroup(ctx, env, ns, "train")
	require.NoError(t, err)
	assert.Len(t, bound, 3, "three replicas bound, no pod of the fourth: %v", bound)
	perRack := map[string]int{}
	for sub, in := range racks {
		assert.Len(t, in, 1, "replica %s is in one rack: %v", sub, in)
		for rack := range in {
			perRack[rack]++
		}
	}
	assert.Equal(t, map[string]int{"r0": 1, "r1": 1, "r2": 1}, perRack, "one replica a rack, none in r3")

	// Rack r3 frees: the fourth replica binds there, whole.
	for i := range 2 {
		require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("fill-r3-%d", i), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	framework.Eventually(t, 2*time.Minute, "the fourth replica bound whole in r3", func() (bool, string) {
		bound, racks, err := boundBySubGroup(ctx, env, ns, "train")
		if err != nil {
			return false, err.Error()
		}
		for sub, n := range bound {
			if n == 4 && racks[sub]["r3"] {
				return len(racks[sub]) == 1, fmt.Sprintf("%s in %v", sub, racks[sub])
			}
		}
		return false, fmt.Sprintf("bound %v", bound)
	})
	framework.Eventually(t, time.Minute, "the group counts 4 whole sub-groups", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pg.Status.WholeSubGroups == 4, fmt.Sprintf("%d whole", pg.Status.WholeSubGroups)
	})
}
