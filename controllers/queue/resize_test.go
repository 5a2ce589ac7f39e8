package queue

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// resizeFixture: queue team (capability 4 GPUs) under eng (capability 6), with 3 GPUs in team and
// 2 in its sibling lab; a gang "job" of team whose pod g0 holds 1 of team's 3.
func resizeFixture(t *testing.T) *ResizeValidator {
	t.Helper()
	team := testQueue("team", "eng", 1)
	team.Spec.Capability = corev1.ResourceList{gpu: resource.MustParse("4")}
	eng := testQueue("eng", "root", 1)
	eng.Spec.Capability = corev1.ResourceList{gpu: resource.MustParse("6")}
	group := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1, Queue: "team"}}
	inTeam := map[string]string{schedulingv1alpha1.QueueLabel: "team"}
	inLab := map[string]string{schedulingv1alpha1.QueueLabel: "lab"}
	pods := []corev1.Pod{
		testPod("a", inTeam, "n", corev1.PodRunning, 2),
		testPod("g0", map[string]string{schedulingv1alpha1.PodGroupLabel: "job"}, "n", corev1.PodRunning, 1),
		testPod("l", inLab, "n", corev1.PodRunning, 2),
	}
	objs := []client.Object{testQueue("root", "", 1), eng, team, testQueue("lab", "eng", 1), group}
	for i := range pods {
		objs = append(objs, &pods[i])
	}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, schedulingv1alpha1.AddToScheme(scheme))
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return NewResizeValidator(reader, scheme, tephraOnly)
}

// resizeReview is the review of pod growing from its requests to gpus.
func resizeReview(t *testing.T, pod corev1.Pod, gpus int64) admission.Request {
	t.Helper()
	old, err := json.Marshal(pod)
	require.NoError(t, err)
	pod.Spec.Containers[0].Resources.Requests[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	obj, err := json.Marshal(pod)
	require.NoError(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, SubResource: "resize", Operation: admissionv1.Update,
		Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old},
	}}
}

func TestResizeIsRefusedPastTheCapabilityOfTheQueueOrAnAncestor(t *testing.T) {
	v := resizeFixture(t)
	ctx := context.Background()
	inTeam := map[string]string{schedulingv1alpha1.QueueLabel: "team"}
	member := testPod("g0", map[string]string{schedulingv1alpha1.PodGroupLabel: "job"}, "n", corev1.PodRunning, 1)
	for _, tc := range []struct {
		name    string
		pod     corev1.Pod
		gpus    int64
		refusal string // "" when allowed
	}{
		{name: "up to the queue's capability", pod: testPod("a", inTeam, "n", corev1.PodRunning, 2), gpus: 3},
		{name: "past the queue's capability", pod: testPod("a", inTeam, "n", corev1.PodRunning, 2), gpus: 4,
			refusal: `resizing pod ns/a would take queue "team" past its capability: nvidia.com/gpu 5 > 4 (allocated 3, the resize adds 2)`},
		{name: "a gang member counts in its group's queue", pod: member, gpus: 3,
			refusal: `resizing pod ns/g0 would take queue "team" past its capability: nvidia.com/gpu 5 > 4 (allocated 3, the resize adds 2)`},
		{name: "past an ancestor's capability", pod: testPod("l", map[string]string{schedulingv1alpha1.QueueLabel: "lab"}, "n", corev1.PodRunning, 2), gpus: 4,
			refusal: `resizing pod ns/l would take queue "eng" past its capability: nvidia.com/gpu 7 > 6 (allocated 5, the resize adds 2)`},
		{name: "shrinking", pod: testPod("a", inTeam, "n", corev1.PodRunning, 2), gpus: 1},
		{name: "a pending pod is checked when it is placed", pod: testPod("p", inTeam, "", corev1.PodPending, 2), gpus: 9},
		{name: "a member of a group that does not exist counts nowhere", pod: testPod("x", map[string]string{schedulingv1alpha1.PodGroupLabel: "gone"}, "n", corev1.PodRunning, 1), gpus: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := v.Handle(ctx, resizeReview(t, tc.pod, tc.gpus))
			if tc.refusal == "" {
				assert.True(t, resp.Allowed, "allowed; got %v", resp.Result)
				return
			}
			require.False(t, resp.Allowed, "refused")
			assert.Equal(t, tc.refusal, resp.Result.Message)
		})
	}
}

// Another scheduler's pod that names no queue or group is not Tephra's to refuse.
func TestResizeOfAnotherSchedulersPodIsAllowed(t *testing.T) {
	v := resizeFixture(t)
	pod := testPod("o", nil, "n", corev1.PodRunning, 1)
	pod.Spec.SchedulerName = "default-scheduler"
	assert.True(t, v.Handle(context.Background(), resizeReview(t, pod, 100)).Allowed)
}
