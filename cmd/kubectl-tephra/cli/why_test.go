package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	tephrafake "github.com/tephra-dev/tephra/apis/client/clientset/versioned/fake"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// why names the cause of a disruption, for the pod and among its group's members, rather than
// calling the pod Failed.
func TestWhyNamesAnEviction(t *testing.T) {
	lost := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-worker-1", Namespace: "ns", Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}},
		Spec:       corev1.PodSpec{NodeName: "node-7"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists"}}},
	}
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-worker-0", Namespace: "ns", Labels: lost.Labels}}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
	o := &Options{Flags: &genericclioptions.ConfigFlags{Namespace: ptr.To("ns")}, Now: func() time.Time { return time.Unix(0, 0) },
		kube: fake.NewClientset(lost, waiting), tephra: tephrafake.NewSimpleClientset(group)}

	v, err := o.why("pod/train-worker-1")
	require.NoError(t, err)
	assert.False(t, v.Waiting)
	assert.Equal(t, blockerEvicted, v.Blocker)
	assert.Equal(t, "it was evicted: its node node-7 is gone (the pod garbage collector removed it)", v.Reason)

	v, err = o.why("podgroup/train")
	require.NoError(t, err)
	assert.Contains(t, v.Details, "pod train-worker-1 was evicted: its node node-7 is gone (the pod garbage collector removed it)")
}
