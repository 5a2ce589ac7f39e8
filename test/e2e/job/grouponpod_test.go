package job

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A one-pod Job gets no PodGroup object: its pod carries its group, and the scheduler and the
// Queue controller read the group from it. The queue it names holds it as it holds any group (here
// at its capability, until the two-pod Job ahead of it, which still gets its PodGroup, is
// deleted), and the queue's status counts it.
func TestAOnePodJobsPodCarriesItsGroup(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	queue := "carry-" + ns
	framework.CreateQueue(t, env, queue, func(s *schedulingv1alpha1.QueueSpec) {
		s.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	})
	pair := newJob("pair", simTask("work", 2, "", 0))
	pair.Spec.Queue = queue
	env.CreateJob(t, ns, pair)
	waitPhase(t, env, ns, "pair", time.Minute, batchv1alpha1.JobRunning)
	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "pair", metav1.GetOptions{})
	require.NoError(t, err, "a Job of two pods has its PodGroup")
	assert.Equal(t, int32(2), group.Spec.MinMember)

	single := newJob("single", simTask("work", 1, "", 0))
	single.Spec.Queue = queue
	env.CreateJob(t, ns, single)
	pod := env.WaitPod(t, ns, "single-work-0", 30*time.Second, "the job's pod to be created", func(*corev1.Pod) bool { return true })
	assert.Equal(t, "true", pod.Annotations[schedulingv1alpha1.GroupOnPodAnnotation], "the pod carries its group")
	assert.Equal(t, queue, pod.Labels[schedulingv1alpha1.QueueLabel])
	framework.Eventually(t, 30*time.Second, "the scheduler to hold the pod at its queue's capability", func() (bool, string) {
		events := env.Events(ns, "single-work-0")
		return strings.Contains(events, schedulingv1alpha1.ReasonQueueCapability), events
	})
	assert.NotContains(t, env.Events(ns, "single-work-0"), schedulingv1alpha1.ReasonPodGroupNotFound, "its group exists: the pod carries it")
	pod, err = env.Kube.CoreV1().Pods(ns).Get(context.Background(), "single-work-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "held by its queue")

	require.NoError(t, env.Tephra.BatchV1alpha1().Jobs(ns).Delete(context.Background(), "pair", metav1.DeleteOptions{}))
	waitPhase(t, env, ns, "single", time.Minute, batchv1alpha1.JobRunning)
	_, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "single", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no PodGroup object for a one-pod Job: %v", err)
	framework.WaitQueueStatus(t, env, queue, 30*time.Second, "the queue to count the one-pod Job and nothing else", func(q *schedulingv1alpha1.Queue) bool {
		return q.Status.Running == 1 && q.Status.Allocated.Cpu().MilliValue() == 100
	})
	assert.Equal(t, []string{"→Pending", "Pending→Running"}, phaseChanges(t, env, ns, "single"))
	assert.NotContains(t, strings.Join(jobEvents(env, ns, "single"), "\n"), "PodGroup", "no PodGroup is created, nor announced")
}
