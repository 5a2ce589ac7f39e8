package podgroup

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// The groups and members of this package's tests; internal/groupstatus's tests have the same.

const testNamespace = "team-a"

var t0 = metav1.NewTime(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))

// member is a pod of group "train" in phase, with options applied.
func member(name string, phase corev1.PodPhase, opts ...func(*corev1.Pod)) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace,
			Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, opt := range opts {
		opt(&pod)
	}
	return pod
}

func inTask(task string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[schedulingv1alpha1.TaskLabel] = task }
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &t0 }

func unschedulable(message string, at metav1.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: message, LastTransitionTime: at,
		})
	}
}

func pods(phases ...corev1.PodPhase) []corev1.Pod {
	var out []corev1.Pod
	for i, phase := range phases {
		out = append(out, member(string(rune('a'+i)), phase))
	}
	return out
}

func group(minMember int32, minTaskMember map[string]int32) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: testNamespace, Generation: 3},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, MinTaskMember: minTaskMember},
	}
}
