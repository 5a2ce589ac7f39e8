package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// whyVerdict is the JSON of `kubectl tephra why -o json`.
type whyVerdict struct {
	Target  string   `json:"target"`
	Waiting bool     `json:"waiting"`
	Blocker string   `json:"blocker"`
	Reason  string   `json:"reason"`
	Details []string `json:"details"`
	Queue   string   `json:"queue"`
	Unblock string   `json:"unblock"`
}

// waitWhy waits until `why TARGET -o json` names blocker, then checks the text output against
// its golden file.
func waitWhy(t *testing.T, env *framework.Env, ns, target, blocker, goldenName string) {
	t.Helper()
	var v whyVerdict
	framework.Eventually(t, time.Minute, target+" blocked by "+blocker, func() (bool, string) {
		out, errOut, err := kubectlTephra(t, env, ns, "why", target, "-o", "json")
		if err != nil {
			return false, errOut
		}
		require.NoError(t, json.Unmarshal([]byte(out), &v), "why -o json is JSON: %s", out)
		return v.Blocker == blocker, out
	})
	// The queue's numbers come from its status, which the Queue controller writes a moment later.
	settled(t, env, ns, goldenName, "why", target)
}

// `kubectl tephra why` names the true blocker: members missing, the PodGroup missing, the
// queue's capability, the queue's deserved share while another queue waits, no node set that
// holds the gang; and says a running pod does not wait.
func TestWhyNamesTheBlocker(t *testing.T) {
	env := framework.Shared(t)
	const cap, share, fit corev1.ResourceName = "e2e.tephra.dev/cap", "e2e.tephra.dev/share", "e2e.tephra.dev/fit"
	capPool := units(t, env, cap, 1, 4)
	sharePool := units(t, env, share, 2, 2)
	fitPool := units(t, env, fit, 2, 1)

	t.Run("waiting for members", func(t *testing.T) {
		ns := env.Namespace(t)
		createQueue(t, env, "cli-members", "root", nil)
		createGroup(t, env, ns, "short", "cli-members", 3)
		pod{name: "short-0", group: "short", res: fit, amount: 1, selector: fitPool}.create(t, env, ns)
		waitWhy(t, env, ns, "short-0", schedulingv1alpha1.ReasonWaitingForMembers, "why-members")
		waitWhy(t, env, ns, "podgroup/short", schedulingv1alpha1.ReasonWaitingForMembers, "why-members-podgroup")
	})

	t.Run("pod group missing", func(t *testing.T) {
		ns := env.Namespace(t)
		pod{name: "lost-0", group: "ghost", res: fit, amount: 1, selector: fitPool}.create(t, env, ns)
		waitWhy(t, env, ns, "pod/lost-0", schedulingv1alpha1.ReasonPodGroupNotFound, "why-podgroup-missing")
	})

	t.Run("queue capability", func(t *testing.T) {
		ns := env.Namespace(t)
		createQueue(t, env, "cli-capped", "root", func(s *schedulingv1alpha1.QueueSpec) {
			s.Capability = corev1.ResourceList{cap: *resourceQuantity(2)}
		})
		pod{name: "cap-0", queue: "cli-capped", res: cap, amount: 2, selector: capPool}.create(t, env, ns)
		waitBound(t, env, ns, 1)
		pod{name: "cap-1", queue: "cli-capped", res: cap, amount: 1, selector: capPool}.create(t, env, ns)
		waitWhy(t, env, ns, "cap-1", schedulingv1alpha1.ReasonQueueCapability, "why-capability")
		waitWhy(t, env, ns, "cap-0", "NotWaiting", "why-running")
	})

	t.Run("over the deserved share while another queue waits", func(t *testing.T) {
		ns := env.Namespace(t)
		createQueue(t, env, "cli-x", "root", nil)
		createQueue(t, env, "cli-y", "root", nil)
		// Queue y waits with a gang of two pods of a unit, which its share has room for and the
		// pool's nodes have free; its pods also ask for a resource no node offers, which the
		// hold's count of free capacity on nodes leaves out (as it leaves out devices of
		// ResourceSlices), so it waits for good. Its demand halves x's share, and x is held for it.
		createGroup(t, env, ns, "yg", "cli-y", 2)
		for _, name := range []string{"y-0", "y-1"} {
			pod{name: name, group: "yg", res: share, amount: 1, selector: sharePool, extra: "e2e.tephra.dev/nowhere"}.create(t, env, ns)
		}
		for _, name := range []string{"x-0", "x-1"} {
			pod{name: name, queue: "cli-x", res: share, amount: 1, selector: sharePool}.create(t, env, ns)
		}
		waitBound(t, env, ns, 2)
		pod{name: "x-2", queue: "cli-x", res: share, amount: 1, selector: sharePool}.create(t, env, ns)
		waitWhy(t, env, ns, "x-2", schedulingv1alpha1.ReasonQueueOverShare, "why-over-share")
	})

	t.Run("gang fits no node set", func(t *testing.T) {
		ns := env.Namespace(t)
		createQueue(t, env, "cli-fit", "root", nil)
		createGroup(t, env, ns, "wide", "cli-fit", 3)
		for _, name := range []string{"wide-0", "wide-1", "wide-2"} {
			pod{name: name, group: "wide", res: fit, amount: 1, selector: fitPool}.create(t, env, ns)
		}
		waitWhy(t, env, ns, "podgroup/wide", schedulingv1alpha1.ReasonNotEnoughResources, "why-no-fit")
	})

	t.Run("bad targets", func(t *testing.T) {
		ns := env.Namespace(t)
		_, _, err := kubectlTephra(t, env, ns, "why", "deployment/x")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"deployment/x": name a pod, pod/NAME, podgroup/NAME or job/NAME`)
		_, _, err = kubectlTephra(t, env, ns, "why", "nothing-here")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `pods "nothing-here" not found`)
	})
}
