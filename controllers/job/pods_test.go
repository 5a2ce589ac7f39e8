package job

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func TestNewPod(t *testing.T) {
	job := newJob(func(j *batchv1alpha1.Job) {
		j.Spec.PriorityClassName = "high"
		j.Spec.SchedulerName = ""
		j.Spec.Tasks[1].Template.Spec.Priority = ptr.To[int32](7)
	})
	pod := NewPod(job, &job.Spec.Tasks[1], 3, 2, 1)

	assert.Equal(t, "train-worker-3", pod.Name)
	assert.Equal(t, testNamespace, pod.Namespace)
	assert.Equal(t, map[string]string{
		"app":                              "train",
		"scheduling.tephra.dev/pod-group":  "train",
		"scheduling.tephra.dev/task":       "worker",
		"batch.tephra.dev/job-name":        "train",
		"batch.tephra.dev/task-index":      "3",
		"batch.tephra.dev/job-retry":       "2",
		"batch.tephra.dev/task-generation": "1",
	}, pod.Labels)
	require.Len(t, pod.OwnerReferences, 1)
	owner := pod.OwnerReferences[0]
	assert.Equal(t, "Job", owner.Kind)
	assert.Equal(t, "batch.tephra.dev/v1alpha1", owner.APIVersion)
	assert.Equal(t, job.UID, owner.UID)
	assert.True(t, *owner.Controller, "the job is the pod's controller, so deleting it deletes the pod")
	assert.Equal(t, "tephra-scheduler", pod.Spec.SchedulerName, "defaults to Tephra's scheduler")
	assert.Equal(t, "high", pod.Spec.PriorityClassName)
	assert.Nil(t, pod.Spec.Priority, "priority comes from the class")
	assert.NotContains(t, job.Spec.Tasks[1].Template.Labels, "scheduling.tephra.dev/task", "the template is not changed")

	job.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
	for index, want := range map[int32]string{0: "worker-0", 1: "worker-0", 2: "worker-1", 3: "worker-1"} {
		assert.Equal(t, want, NewPod(job, &job.Spec.Tasks[1], index, 0, 1).Labels["scheduling.tephra.dev/subgroup"], "pod %d", index)
	}
}

func TestPodGroupSpec(t *testing.T) {
	cpu := func(n string) resource.Quantity { return resource.MustParse(n) }
	for _, tc := range []struct {
		name string
		job  *batchv1alpha1.Job
		pods func(*batchv1alpha1.Job) []corev1.Pod
		want *schedulingv1alpha1.PodGroupSpec
	}{{
		name: "the whole job: every task's minimum",
		job:  newJob(),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 6, MinTaskMember: map[string]int32{"ps": 2, "worker": 4}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("10"), "memory": cpu("6Gi")},
		},
	}, {
		name: "task minAvailable lowers the minimum",
		job: newJob(func(j *batchv1alpha1.Job) {
			j.Spec.Tasks[1].MinAvailable = ptr.To[int32](2)
			j.Spec.Queue = "research"
			j.Spec.PriorityClassName = "high"
		}),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 4, MinTaskMember: map[string]int32{"ps": 2, "worker": 2}, Queue: "research", PriorityClassName: "high",
			MinResources: corev1.ResourceList{"cpu": cpu("6"), "memory": cpu("4Gi")},
		},
	}, {
		name: "a job minAvailable alone is made of the smallest pods",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.MinAvailable = ptr.To[int32](3) }),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 3, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("4"), "memory": cpu("3Gi")},
		},
	}, {
		name: "a task's sub-groups: each its minimum and topology, all of them needed",
		job: newJob(func(j *batchv1alpha1.Job) {
			j.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, Topology: &schedulingv1alpha1.PodGroupTopology{Required: "rack"}}
		}),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 6, MinTaskMember: map[string]int32{"ps": 2, "worker": 4}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("10"), "memory": cpu("6Gi")},
			SubGroups: []schedulingv1alpha1.SubGroup{
				{Name: "worker-0", MinMember: 2, Topology: &schedulingv1alpha1.PodGroupTopology{Required: "rack"}},
				{Name: "worker-1", MinMember: 2, Topology: &schedulingv1alpha1.PodGroupTopology{Required: "rack"}},
			},
		},
	}, {
		name: "a minimum of sub-groups: the task's minimum is their pods",
		job: newJob(func(j *batchv1alpha1.Job) {
			j.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, MinSubGroups: ptr.To[int32](1)}
		}),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 4, MinTaskMember: map[string]int32{"ps": 2, "worker": 2}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("6"), "memory": cpu("4Gi")},
			SubGroups:    []schedulingv1alpha1.SubGroup{{Name: "worker-0", MinMember: 2}, {Name: "worker-1", MinMember: 2}},
			MinSubGroups: ptr.To[int32](1),
		},
	}, {
		name: "a sub-group minMember below its size",
		job: newJob(func(j *batchv1alpha1.Job) {
			j.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, MinMember: ptr.To[int32](1)}
		}),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 6, MinTaskMember: map[string]int32{"ps": 2, "worker": 4}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("10"), "memory": cpu("6Gi")},
			SubGroups:    []schedulingv1alpha1.SubGroup{{Name: "worker-0", MinMember: 1}, {Name: "worker-1", MinMember: 1}},
		},
	}, {
		name: "disruptionMode Single goes to the group with its sub-groups",
		job: newJob(func(j *batchv1alpha1.Job) {
			j.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
			j.Spec.DisruptionMode = schedulingv1alpha1.DisruptionSingle
		}),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 6, MinTaskMember: map[string]int32{"ps": 2, "worker": 4}, Queue: "default",
			MinResources:   corev1.ResourceList{"cpu": cpu("10"), "memory": cpu("6Gi")},
			SubGroups:      []schedulingv1alpha1.SubGroup{{Name: "worker-0", MinMember: 2}, {Name: "worker-1", MinMember: 2}},
			DisruptionMode: schedulingv1alpha1.DisruptionSingle,
		},
	}, {
		name: "without sub-groups left to place, the group goes whole (the PodGroup refuses Single without sub-groups)",
		job: newJob(func(j *batchv1alpha1.Job) {
			j.Spec.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
			j.Spec.DisruptionMode = schedulingv1alpha1.DisruptionSingle
		}),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-0": succeeded()})
		},
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 5, MinTaskMember: map[string]int32{"ps": 2, "worker": 3}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("8"), "memory": cpu("5Gi")},
		},
	}, {
		name: "succeeded pods leave the minimum: the gang counts live pods",
		job:  newJob(),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"worker-0": succeeded(), "worker-1": succeeded(), "worker-2": pending()})
		},
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 4, MinTaskMember: map[string]int32{"ps": 2, "worker": 2}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("6"), "memory": cpu("4Gi")},
		},
	}, {
		name: "a task waiting for its dependencies is not in the minimum",
		job:  newJob(withPhase("", ""), func(j *batchv1alpha1.Job) { dependsOn(j, 1, "all", "ps") }),
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 2, MinTaskMember: map[string]int32{"ps": 2}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("2"), "memory": cpu("2Gi")},
		},
	}, {
		name: "once its dependencies run, it is",
		job:  newJob(withPhase(batchv1alpha1.JobPending, ReasonCreated), func(j *batchv1alpha1.Job) { dependsOn(j, 1, "all", "ps") }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, podState{}, map[string]podState{"ps-0": running(), "ps-1": running()})
		},
		want: &schedulingv1alpha1.PodGroupSpec{
			MinMember: 6, MinTaskMember: map[string]int32{"ps": 2, "worker": 4}, Queue: "default",
			MinResources: corev1.ResourceList{"cpu": cpu("10"), "memory": cpu("6Gi")},
		},
	}, {
		name: "minimum succeeded: nothing is left to place, and the group is left alone",
		job:  newJob(func(j *batchv1alpha1.Job) { j.Spec.MinAvailable = ptr.To[int32](2) }),
		pods: func(j *batchv1alpha1.Job) []corev1.Pod {
			return podsOf(j, running(), map[string]podState{"ps-0": succeeded(), "ps-1": succeeded()})
		},
		want: nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []corev1.Pod
			if tc.pods != nil {
				pods = tc.pods(tc.job)
			}
			d := Decide(Observed{Job: tc.job, Pods: pods, Now: t0})
			if tc.want == nil {
				assert.Nil(t, d.PodGroup)
				return
			}
			require.NotNil(t, d.PodGroup)
			assert.True(t, equality.Semantic.DeepEqual(*tc.want, *d.PodGroup), "want %+v\n got %+v", *tc.want, *d.PodGroup)
		})
	}
}

// A task that depends on another gets its pods only once the other's run (all of them, or any
// one), and keeps them after.
func TestDependsOn(t *testing.T) {
	for _, tc := range []struct {
		iteration batchv1alpha1.Iteration
		// psRunning is how many ps pods must run before the workers are created.
		psRunning int
	}{{batchv1alpha1.IterationAll, 2}, {batchv1alpha1.IterationAny, 1}} {
		t.Run(string(tc.iteration), func(t *testing.T) {
			w := newWorld(newJob(withPhase("", ""), func(j *batchv1alpha1.Job) { dependsOn(j, 1, tc.iteration, "ps") }))
			_, err := w.settle(5)
			require.NoError(t, err)
			assert.Len(t, w.pods, 2, "only the ps pods exist")
			if tc.psRunning == 2 {
				w.set(running(), "ps-0")
				_, err = w.settle(5)
				require.NoError(t, err)
				assert.Len(t, w.pods, 2, "one ps pod of two running is not enough")
			}
			w.set(running(), "ps-0", "ps-1")
			_, err = w.settle(5)
			require.NoError(t, err)
			assert.Len(t, w.pods, 6, "the workers are created")
			w.set(succeeded(), "ps-0", "ps-1")
			_, err = w.settle(5)
			require.NoError(t, err)
			assert.Contains(t, w.pods, "train-worker-0", "a dependency ending does not take the workers away")
		})
	}
}
