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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// rackJob is a low-priority Job of 4 replicas of 4 pods of 4 CPUs, each replica in one rack: it
// fills the 4 racks of 4 nodes.
func rackJob(ns, name string, mode schedulingv1alpha1.DisruptionMode) *batchv1alpha1.Job {
	job := replicasJob(ns, name)
	job.Spec.Topology = nil
	job.Spec.PriorityClassName = "sub-low"
	job.Spec.DisruptionMode = mode
	task := &job.Spec.Tasks[0]
	task.Replicas = 16
	task.SubGroups = &batchv1alpha1.TaskSubGroups{Size: 4, Topology: &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}}
	task.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	return job
}

// A Job of 4 replicas fills the racks. A pod of higher priority that needs one node preempts:
// with disruptionMode Single only the replica on the node it takes goes (its 4 pods; the other
// 12 run on, with their UIDs), and the Job replaces that replica's pods, which wait whole until
// the pod is gone and then come back to one rack. With All the whole Job goes, every one of its
// 16 pods, and comes back whole.
func TestSingleDisruptsOneSubGroupAndAllTheWholeGroup(t *testing.T) {
	env := framework.Shared(t)
	framework.PriorityClass(t, env, "sub-low", 10)
	framework.PriorityClass(t, env, "sub-high", 1000)
	for _, mode := range []schedulingv1alpha1.DisruptionMode{schedulingv1alpha1.DisruptionSingle, schedulingv1alpha1.DisruptionAll} {
		t.Run(string(mode), func(t *testing.T) {
			poolEmpty(t, env)
			ns := env.Namespace(t)
			ctx := context.Background()
			_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, rackJob(ns, "train", mode), metav1.CreateOptions{})
			require.NoError(t, err)
			waitReplicasRunning(t, env, ns, "train", 16)
			pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, mode, pg.Spec.DisruptionMode, "the Job's PodGroup carries its disruptionMode")
			before := liveUIDs(t, env, ns, "train")
			require.Len(t, before, 16)

			bindUrgentPod(t, env, ns)

			// What went: the pods whose UIDs are no longer live.
			var gone map[string]bool
			framework.Eventually(t, time.Minute, "the preempted pods replaced", func() (bool, string) {
				now := liveUIDs(t, env, ns, "train")
				gone = map[string]bool{}
				for name, uid := range before {
					if now[name] != uid {
						gone[name] = true
					}
				}
				return len(now) == 16 && len(gone) > 0, fmt.Sprintf("%d live, %d replaced", len(now), len(gone))
			})
			// Give a wider eviction time to show.
			time.Sleep(3 * time.Second)
			now := liveUIDs(t, env, ns, "train")
			gone = map[string]bool{}
			for name, uid := range before {
				if now[name] != uid {
					gone[name] = true
				}
			}
			subs := map[string]bool{}
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=train"})
			require.NoError(t, err)
			for _, p := range pods.Items {
				if gone[p.Name] {
					subs[p.Labels[schedulingv1alpha1.SubGroupLabel]] = true
				}
			}
			if mode == schedulingv1alpha1.DisruptionSingle {
				assert.Len(t, gone, 4, "one replica went, all of its 4 pods: %v", gone)
				assert.Len(t, subs, 1, "the pods that went are of one replica: %v", subs)
			} else {
				assert.Len(t, gone, 16, "the whole job went")
			}

			require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, "urgent", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
			waitReplicasRunning(t, env, ns, "train", 16)
			after := liveUIDs(t, env, ns, "train")
			for name, uid := range before {
				if !gone[name] {
					assert.Equal(t, uid, after[name], "pod %s of a replica that did not go runs on", name)
				}
			}
			for sub := range subs {
				assert.Len(t, racksOfSubGroup(t, env, ns, sub), 1, "replica %s came back whole to one rack", sub)
			}
		})
	}
}

// waitReplicasRunning waits until want pods of the job run.
func waitReplicasRunning(t *testing.T, env *framework.Env, ns, job string, want int) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods of job %s running", want, job), func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + job})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == want, fmt.Sprintf("%d running", running)
	})
}

// bindUrgentPod creates a pod of high priority that needs a whole node of the pool (4 CPUs), and
// waits until it is bound: on a full pool, by preempting.
func bindUrgentPod(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, PriorityClassName: "sub-high",
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{framework.PoolLabel: pool},
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	env.WaitPod(t, ns, "urgent", 2*time.Minute, "the urgent pod bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
}

// liveUIDs maps the job's pods not being deleted to their UIDs.
func liveUIDs(t *testing.T, env *framework.Env, ns, job string) map[string]types.UID {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + job})
	require.NoError(t, err)
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out
}

// The same Job needing 3 of its 4 replicas (subGroups.minSubGroups), disruptionMode Single: a
// pod of higher priority that needs a node takes one replica, the one above the minimum, and
// not the job: the other 12 pods run on, and the group stays Running with 3 whole replicas while
// the pod runs. When it ends, the fourth replica comes back whole to one rack.
func TestSingleTakesAReplicaAboveTheMinimumNotTheJob(t *testing.T) {
	env := framework.Shared(t)
	framework.PriorityClass(t, env, "sub-low", 10)
	framework.PriorityClass(t, env, "sub-high", 1000)
	poolEmpty(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	job := rackJob(ns, "train", schedulingv1alpha1.DisruptionSingle)
	job.Spec.Tasks[0].SubGroups.MinSubGroups = ptr.To[int32](3)
	_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReplicasRunning(t, env, ns, "train", 16)
	before := liveUIDs(t, env, ns, "train")
	require.Len(t, before, 16)

	bindUrgentPod(t, env, ns)

	framework.Eventually(t, time.Minute, "one replica taken, the group running with 3 whole", func() (bool, string) {
		whole, pg, state, err := wholeReplicas(ctx, env, ns, "train")
		if err != nil {
			return false, err.Error()
		}
		return whole == 3 && pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && pg.Status.WholeSubGroups == 3, state
	})
	now := liveUIDs(t, env, ns, "train")
	kept := 0
	for name, uid := range before {
		if now[name] == uid {
			kept++
		}
	}
	assert.Equal(t, 12, kept, "the 12 pods of the other replicas run on")

	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, "urgent", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	waitReplicasRunning(t, env, ns, "train", 16)
	_, racks, err := boundBySubGroup(ctx, env, ns, "train")
	require.NoError(t, err)
	for sub, in := range racks {
		assert.Len(t, in, 1, "replica %s is in one rack", sub)
	}
}
