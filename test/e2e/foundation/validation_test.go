package foundation

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func resources(pairs ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		list[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return list
}

// TestInvalidQueuesAreRejected submits each mistake a person can make in a Queue and checks that
// the apiserver refuses it with a message naming the field and the rule.
func TestInvalidQueuesAreRejected(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	for _, tc := range []struct {
		mistake string
		queue   schedulingv1alpha1.Queue
		want    []string
	}{{
		mistake: "weight below 1",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{Weight: -1}},
		want:    []string{"spec.weight", "should be greater than or equal to 1"},
	}, {
		mistake: "weight above 65535",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{Weight: 70000}},
		want:    []string{"spec.weight", "should be less than or equal to 65535"},
	}, {
		mistake: "capability below guarantee",
		queue: schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{
			Guarantee:  resources("cpu", "8", "nvidia.com/gpu", "2"),
			Capability: resources("cpu", "4", "nvidia.com/gpu", "4"),
		}},
		want: []string{"spec.capability", "capability must be at least guarantee"},
	}, {
		mistake: "negative guarantee",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{Guarantee: resources("cpu", "-2")}},
		want:    []string{"spec.guarantee", "must not be negative"},
	}, {
		mistake: "negative capability",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{Capability: resources("memory", "-1Gi")}},
		want:    []string{"spec.capability", "must not be negative"},
	}, {
		mistake: "negative reclaim patience limit",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{ReclaimPatienceLimitSeconds: ptr.To(int32(-1))}},
		want:    []string{"spec.reclaimPatienceLimitSeconds", "should be greater than or equal to 0"},
	}, {
		mistake: "its own parent",
		queue:   schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "loop"}, Spec: schedulingv1alpha1.QueueSpec{Parent: "loop"}},
		want:    []string{"spec.parent", "a Queue cannot be its own parent"},
	}, {
		mistake: "root with a parent",
		queue:   schedulingv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: schedulingv1alpha1.QueueSpec{Parent: "default"}},
		want:    []string{"spec.parent", "the root Queue is the top of the tree"},
	}, {
		mistake: "unknown state",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{State: "Paused"}},
		want:    []string{"spec.state", `Unsupported value: "Paused"`, `"Open", "Closed"`},
	}, {
		mistake: "parent that is not a valid name",
		queue:   schedulingv1alpha1.Queue{Spec: schedulingv1alpha1.QueueSpec{Parent: "Team_A"}},
		want:    []string{"spec.parent", "should match"},
	}} {
		t.Run(tc.mistake, func(t *testing.T) {
			queue := tc.queue.DeepCopy()
			if queue.Name == "" {
				queue.GenerateName = "bad-"
			}
			created, err := env.Tephra.SchedulingV1alpha1().Queues().Create(ctx, queue, metav1.CreateOptions{})
			if err == nil {
				_ = env.Tephra.SchedulingV1alpha1().Queues().Delete(ctx, created.Name, metav1.DeleteOptions{})
			}
			assertInvalid(t, err, tc.want...)
		})
	}
}

// TestInvalidPodGroupsAreRejected does the same for PodGroups.
func TestInvalidPodGroupsAreRejected(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)
	for _, tc := range []struct {
		mistake string
		spec    schedulingv1alpha1.PodGroupSpec
		want    []string
	}{{
		mistake: "minMember below 1",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: -3},
		want:    []string{"spec.minMember", "should be greater than or equal to 1"},
	}, {
		mistake: "minTaskMember of 0",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 2, MinTaskMember: map[string]int32{"ps": 0, "worker": 2}},
		want:    []string{"spec.minTaskMember", "every minTaskMember count must be at least 1"},
	}, {
		mistake: "minTaskMember key that is not a task name",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinTaskMember: map[string]int32{"work er!": 1}},
		want:    []string{"spec.minTaskMember", "minTaskMember keys must be task names"},
	}, {
		mistake: "negative minResources",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinResources: resources("nvidia.com/gpu", "-1")},
		want:    []string{"spec.minResources", "must not be negative"},
	}, {
		mistake: "scheduleTimeoutSeconds 0",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 1, ScheduleTimeoutSeconds: ptr.To[int32](0)},
		want:    []string{"spec.scheduleTimeoutSeconds", "should be greater than or equal to 1"},
	}, {
		mistake: "a sub-group minMember below 1",
		spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1,
			SubGroups: []schedulingv1alpha1.SubGroup{{Name: "prefill", MinMember: -1}}},
		want: []string{"spec.subGroups[0].minMember", "should be greater than or equal to 1"},
	}, {
		mistake: "two sub-groups of one name",
		spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1,
			SubGroups: []schedulingv1alpha1.SubGroup{{Name: "replica", MinMember: 2}, {Name: "replica", MinMember: 2}}},
		want: []string{"spec.subGroups[1]", "Duplicate value"},
	}, {
		mistake: "disruptionMode Single without sub-groups",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 1, DisruptionMode: schedulingv1alpha1.DisruptionSingle},
		want:    []string{"spec.disruptionMode", "disruptionMode Single disrupts one sub-group at a time: it needs subGroups"},
	}, {
		mistake: "minSubGroups above the number of sub-groups",
		spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2, MinSubGroups: ptr.To[int32](3),
			SubGroups: []schedulingv1alpha1.SubGroup{{Name: "a", MinMember: 1}, {Name: "b", MinMember: 1}}},
		want: []string{"spec.minSubGroups", "minSubGroups must not exceed the number of subGroups"},
	}, {
		mistake: "minSubGroups without sub-groups",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinSubGroups: ptr.To[int32](1)},
		want:    []string{"spec.minSubGroups", "minSubGroups must not exceed the number of subGroups"},
	}, {
		mistake: "minSubGroups 0",
		spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinSubGroups: ptr.To[int32](0),
			SubGroups: []schedulingv1alpha1.SubGroup{{Name: "a", MinMember: 1}}},
		want: []string{"spec.minSubGroups", "should be greater than or equal to 1"},
	}, {
		mistake: "queue that is not a valid name",
		spec:    schedulingv1alpha1.PodGroupSpec{MinMember: 1, Queue: "Team A"},
		want:    []string{"spec.queue", "should match"},
	}} {
		t.Run(tc.mistake, func(t *testing.T) {
			group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: tc.spec}
			_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, group, metav1.CreateOptions{})
			assertInvalid(t, err, tc.want...)
		})
	}
}

// TestInvalidJobsAreRejected covers the Job's basic shape; its lifecycle rules are checked with
// the Job controller.
func TestInvalidJobsAreRejected(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)
	task := func(name string) batchv1alpha1.TaskSpec {
		return batchv1alpha1.TaskSpec{Name: name, Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		}}}
	}
	for _, tc := range []struct {
		mistake string
		spec    batchv1alpha1.JobSpec
		want    []string
	}{{
		mistake: "no tasks",
		spec:    batchv1alpha1.JobSpec{},
		want:    []string{"spec.tasks"},
	}, {
		mistake: "two tasks of one name",
		spec:    batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("worker"), task("worker")}},
		want:    []string{"spec.tasks[1]", "Duplicate value"},
	}, {
		mistake: "unknown action",
		spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("worker")},
			Policies: []batchv1alpha1.LifecyclePolicy{{Event: batchv1alpha1.PodFailedEvent, Action: "Reboot"}}},
		want: []string{"spec.policies[0].action", `Unsupported value: "Reboot"`},
	}, {
		mistake: "negative maxRetry",
		spec:    batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("worker")}, MaxRetry: -1},
		want:    []string{"spec.maxRetry", "should be greater than or equal to 0"},
	}} {
		t.Run(tc.mistake, func(t *testing.T) {
			job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: tc.spec}
			_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			assertInvalid(t, err, tc.want...)
		})
	}
}

func assertInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	require.Error(t, err, "the apiserver accepted the object")
	assert.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
	for _, w := range want {
		assert.Contains(t, err.Error(), w)
	}
}

// TestDefaultsAreApplied checks what a minimal Queue and PodGroup become, and that a fresh
// cluster has the root and default queues.
func TestDefaultsAreApplied(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)

	queue, err := env.Tephra.SchedulingV1alpha1().Queues().Create(ctx, &schedulingv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "minimal-"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Tephra.SchedulingV1alpha1().Queues().Delete(ctx, queue.Name, metav1.DeleteOptions{}) })
	assert.Equal(t, schedulingv1alpha1.QueueSpec{
		Parent: "root", Weight: 1, Reclaimable: ptr.To(true), State: schedulingv1alpha1.QueueOpen,
	}, queue.Spec)

	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), group.Spec.MinMember)
	assert.Equal(t, "default", group.Spec.Queue)

	for _, name := range []string{"root", "default"} {
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "tephra-controllers creates the %s queue", name)
		assert.Equal(t, "root", q.Spec.Parent, fmt.Sprintf("queue %s", name))
	}
}
