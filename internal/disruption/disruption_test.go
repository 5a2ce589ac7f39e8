package disruption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func TestOf(t *testing.T) {
	target := func(reason, message string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want *Cause
	}{{
		name: "failed by the pod garbage collector, exit code 0: its node is gone",
		pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			Conditions: []corev1.PodCondition{target(ReasonDeletionByPodGC, "PodGC: node no longer exists")}}},
		want: &Cause{ReasonDeletionByPodGC, "its node n1 is gone (the pod garbage collector removed it)"},
	}, {
		name: "evicted by the taint manager",
		pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{target(ReasonDeletionByTaintManager, "Taint manager: deleting due to NoExecute taint")}}},
		want: &Cause{ReasonDeletionByTaintManager, "its node n1 was not ready or unreachable for longer than the pod tolerates: Taint manager: deleting due to NoExecute taint"},
	}, {
		name: "preempted",
		pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{target(ReasonPreemptionByScheduler, "tephra-scheduler: preempting to accommodate a higher priority pod")}}},
		want: &Cause{ReasonPreemptionByScheduler, "the scheduler preempted it for a pod of higher priority or of a queue below its share: tephra-scheduler: preempting to accommodate a higher priority pod"},
	}, {
		name: "moved for a gang",
		pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{target(v1alpha1.ReasonMovedForGang, "tephra-scheduler: moving the pod to make whole nodes for pod group ns/wide")}}},
		want: &Cause{v1alpha1.ReasonMovedForGang, "the scheduler moved it to make whole nodes for a waiting gang (it declared itself movable, or ran above its group's minimum): tephra-scheduler: moving the pod to make whole nodes for pod group ns/wide"},
	}, {
		name: "drained",
		pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{target(ReasonEvictionByEvictionAPI, "")}}},
		want: &Cause{ReasonEvictionByEvictionAPI, "it was evicted through the Eviction API (a node drain, the descheduler or an autoscaler)"},
	}, {
		name: "ended by the kubelet",
		pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			Conditions: []corev1.PodCondition{target(ReasonTerminationByKubelet, "The node was low on resource: memory.")}}},
		want: &Cause{ReasonTerminationByKubelet, "the kubelet on node n2 ended it (node pressure or shutdown): The node was low on resource: memory."},
	}, {
		name: "a condition that is False is no disruption",
		pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, Reason: ReasonPreemptionByScheduler}}}},
	}, {
		name: "deleted while running",
		pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n3"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		want: &Cause{ReasonDeleted, "it was deleted while it ran on node n3"},
	}, {
		name: "a finished pod being deleted is not disrupted",
		pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
	}, {
		name: "evicted by a kubelet without the condition",
		pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n4"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Message: "The node was low on resource: ephemeral-storage."}},
		want: &Cause{ReasonEvicted, "the kubelet on node n4 evicted it: The node was low on resource: ephemeral-storage."},
	}, {
		name: "a plain failure",
		pod:  corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Of(&tc.pod)
			if tc.want == nil {
				assert.False(t, ok, "not a disruption: %+v", got)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, *tc.want, got)
		})
	}
}
