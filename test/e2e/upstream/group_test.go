package upstream

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groupstatus"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// group is the group Tephra schedules an upstream PodGroup by, as both binaries translate it in
// memory (v1alpha1.FromUpstream), with the status its members make it (groupstatus.OfMembers), as
// kubectl tephra shows it for a group its queue admits: no object holds either. "" invalid is a
// NotFound error.
func group(ctx context.Context, env *framework.Env, ns, name string) (*schedulingv1alpha1.PodGroup, error) {
	up, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var workload *upstreamv1beta1.Workload
	if w := schedulingv1alpha1.UpstreamWorkloadName(up); w != "" {
		if workload, err = env.Kube.SchedulingV1beta1().Workloads(ns).Get(ctx, w, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			workload = nil
		} else if err != nil {
			return nil, err
		}
	}
	pg, invalid := schedulingv1alpha1.FromUpstream(up, workload)
	if invalid != "" {
		return nil, apierrors.NewNotFound(schedulingv1alpha1.Resource("podgroup"), name)
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var members []corev1.Pod
	for _, pod := range pods.Items {
		if g, ok := schedulingv1alpha1.PodGroupNameOf(&pod); ok && g == name {
			members = append(members, pod)
		}
	}
	pg.Status = groupstatus.OfMembers(pg, members)
	return pg, nil
}

// noTephraObject checks that no Tephra PodGroup object exists for an upstream PodGroup: both
// binaries read it in memory.
func noTephraObject(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Tephra PodGroup object for upstream PodGroup %s/%s: %v", ns, name, err)
}
