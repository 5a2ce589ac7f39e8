package foreign

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func mirrorIn(phase schedulingv1alpha1.PodGroupPhase, minMember int32) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember}, Status: schedulingv1alpha1.PodGroupStatus{Phase: phase}}
}

func TestVolcanoStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		previous volcanov1beta1.PodGroupPhase
		mirror   schedulingv1alpha1.PodGroupPhase
		admitted bool
		want     volcanov1beta1.PodGroupPhase
	}{
		{"new group, queue full", "", "", false, volcanov1beta1.PodGroupPending},
		{"new group, queue has room", "", "", true, volcanov1beta1.PodGroupInqueue},
		{"pending members, queue has room", volcanov1beta1.PodGroupPending, schedulingv1alpha1.PodGroupPending, true, volcanov1beta1.PodGroupInqueue},
		{"once Inqueue, stays", volcanov1beta1.PodGroupInqueue, schedulingv1alpha1.PodGroupPending, false, volcanov1beta1.PodGroupInqueue},
		{"running", volcanov1beta1.PodGroupInqueue, schedulingv1alpha1.PodGroupRunning, false, volcanov1beta1.PodGroupRunning},
		{"completed", volcanov1beta1.PodGroupRunning, schedulingv1alpha1.PodGroupCompleted, false, volcanov1beta1.PodGroupCompleted},
		{"failed", volcanov1beta1.PodGroupRunning, schedulingv1alpha1.PodGroupFailed, false, volcanov1beta1.PodGroupFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := volcanoStatus(volcanov1beta1.PodGroupStatus{Phase: tc.previous}, mirrorIn(tc.mirror, 2), tc.admitted)
			if got.Phase != tc.want {
				t.Errorf("phase = %q, want %q", got.Phase, tc.want)
			}
		})
	}
}

func TestSchedulerPluginsStatus(t *testing.T) {
	bound := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}
	unbound := corev1.Pod{}
	for _, tc := range []struct {
		name   string
		mirror schedulingv1alpha1.PodGroupPhase
		pods   []corev1.Pod
		want   schedulerpluginsv1alpha1.PodGroupPhase
	}{
		{"no members", schedulingv1alpha1.PodGroupPending, nil, schedulerpluginsv1alpha1.PodGroupPending},
		{"minimum exists, none bound", schedulingv1alpha1.PodGroupInqueue, []corev1.Pod{unbound, unbound}, schedulerpluginsv1alpha1.PodGroupPreScheduling},
		{"one bound", schedulingv1alpha1.PodGroupInqueue, []corev1.Pod{bound, unbound}, schedulerpluginsv1alpha1.PodGroupScheduling},
		{"all bound, not running", schedulingv1alpha1.PodGroupInqueue, []corev1.Pod{bound, bound}, schedulerpluginsv1alpha1.PodGroupScheduled},
		{"running", schedulingv1alpha1.PodGroupRunning, []corev1.Pod{bound, bound}, schedulerpluginsv1alpha1.PodGroupRunning},
		{"completed", schedulingv1alpha1.PodGroupCompleted, []corev1.Pod{bound, bound}, schedulerpluginsv1alpha1.PodGroupFinished},
		{"failed", schedulingv1alpha1.PodGroupFailed, []corev1.Pod{bound, bound}, schedulerpluginsv1alpha1.PodGroupFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mirrorIn(tc.mirror, 2)
			m.CreationTimestamp = metav1.Now()
			got := schedulerPluginsStatus(schedulerpluginsv1alpha1.PodGroupStatus{}, m, tc.pods)
			if got.Phase != tc.want {
				t.Errorf("phase = %q, want %q", got.Phase, tc.want)
			}
			if (got.Phase != schedulerpluginsv1alpha1.PodGroupPending) == got.ScheduleStartTime.IsZero() {
				t.Errorf("scheduleStartTime = %v in phase %s", got.ScheduleStartTime, got.Phase)
			}
		})
	}
}
