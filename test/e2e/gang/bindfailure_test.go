package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// One member's binding is denied (a ValidatingAdmissionPolicy on pods/binding) after Permit let
// the whole gang through: the attempt fails as a whole, so no member of the gang stays bound past
// the group's schedule timeout. Those that bound are rolled back (deleted, with an event on the
// PodGroup), those that had not are refused at PreBind.
func TestBindFailureOfOneMemberLeavesNoPartialGang(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	ns := env.Namespace(t)
	pool := env.Pool(t, "bindfail", 1, 8)

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-deny-bind"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `request.name != "bf-2"`,
				Message:    "e2e: the binding of bf-2 is denied",
			}},
		},
	}
	_, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{})
	})
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-deny-bind"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	_, err = env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
	})
	// The policy takes effect once the apiserver has loaded it: a binding of bf-2 by hand is
	// refused then (the pod does not exist yet, so any other answer is NotFound).
	framework.Eventually(t, time.Minute, "the policy to deny bf-2's binding", func() (bool, string) {
		err := env.Kube.CoreV1().Pods(ns).Bind(ctx, bindingOf(ns, "bf-2", "nowhere"), metav1.CreateOptions{})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprint(err)
	})

	const timeout = 15 // createPodGroup's scheduleTimeoutSeconds
	createPodGroup(t, env, ns, "bf", 3, nil)
	for i := range 3 {
		createPod(t, env, newPod(ns, podSpec{name: fmt.Sprintf("bf-%d", i), group: "bf", cpu: "1", pool: pool}))
	}

	// Watch for twice the timeout: no member may stay bound longer than the timeout.
	boundSince := map[string]time.Time{}
	everBound := false
	deadline := time.Now().Add(2 * timeout * time.Second)
	for time.Now().Before(deadline) {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		now := time.Now()
		seen := map[string]bool{}
		for _, pod := range list.Items {
			if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
				continue
			}
			seen[pod.Name], everBound = true, true
			if _, ok := boundSince[pod.Name]; !ok {
				boundSince[pod.Name] = now
			}
			require.Less(t, now.Sub(boundSince[pod.Name]), timeout*time.Second,
				"pod %s of the gang has stayed bound while a member cannot bind; events: %s", pod.Name, env.Events(ns, "bf"))
		}
		for name := range boundSince {
			if !seen[name] {
				delete(boundSince, name)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "bf-2", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, pod.Spec.NodeName, "bf-2's binding is denied")
	if everBound {
		// Members that bound before bf-2's bind failed were rolled back, and the group says so
		// (its event written after the rollback).
		framework.WaitEventOnAny(t, env, ns, []string{"bf"}, "GangAttemptRolledBack")
	}
}

// bindingOf binds a pod to a node, as the scheduler does.
func bindingOf(ns, pod, node string) *corev1.Binding {
	return &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
}
