// Package upstreamrequests counts, on a real local control plane, the API requests Tephra's
// components make for upstream gangs (scheduling.k8s.io/v1beta1 PodGroups of 3): both binaries
// read the PodGroups in memory, and nothing is written for a gang but its pods' bindings and
// events, its PodGroup's PodGroupInitiallyScheduled and the queues' status.
package upstreamrequests

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		// The apiserver logs every request of Tephra's service accounts.
		AuditTephra:   true,
		FeatureGates:  "GenericWorkload=true",
		RuntimeConfig: "scheduling.k8s.io/v1beta1=true",
		// As installed: TephraGang gangs the upstream PodGroups' pods.
		TephraSchedulerWithoutFeatureGates: true,
	}, func(env *framework.Env) error {
		return localcluster.WaitDefaultQueues(context.Background(), env.Cluster.Config)
	}))
}

// mutating says whether a request of this verb writes.
func mutating(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Tephra's components' requests for 20 upstream gangs of 3, from their creation until every pod
// runs and every PodGroup is InitiallyScheduled, and 5 s more: no Tephra PodGroup is created or
// written, each PodGroup's status is written once (True: each gang fits at once), and each pod is
// bound once. The figures per gang are logged (docs/benchmark-analysis.md has them, before and
// after upstream PodGroups were read in memory).
func TestRequestsPerUpstreamGang(t *testing.T) {
	const gangs = 20
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)
	ns := env.Namespace(t)
	pool := env.Pool(t, "measure", 4, 16)
	time.Sleep(10 * time.Second) // the pool's nodes' own traffic settles
	before, err := env.Cluster.AuditedRequests()
	require.NoError(t, err)
	for g := range gangs {
		name := fmt.Sprintf("g%02d", g)
		_, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, &upstreamv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: upstreamv1beta1.PodGroupSpec{SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{
				Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 3}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range 3 {
			_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns},
				Spec: corev1.PodSpec{
					SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
					SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)},
					Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	framework.Eventually(t, 3*time.Minute, "every pod bound and every PodGroup InitiallyScheduled", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				bound++
			}
		}
		pgs, err := env.Kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		scheduled := 0
		for _, pg := range pgs.Items {
			if meta.IsStatusConditionTrue(pg.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled) {
				scheduled++
			}
		}
		return bound == 3*gangs && scheduled == gangs, fmt.Sprintf("%d running, %d scheduled", bound, scheduled)
	})
	time.Sleep(5 * time.Second)
	after, err := env.Cluster.AuditedRequests()
	require.NoError(t, err)
	counts := map[string]int{}
	total, writes := 0, 0
	for _, r := range after[len(before):] {
		key := fmt.Sprintf("%s %s %s/%s", strings.TrimPrefix(r.User, "system:serviceaccount:tephra-system:"), r.Verb, r.Resource, r.Subresource)
		if r.APIGroup != "" {
			key = fmt.Sprintf("%s %s %s.%s/%s", strings.TrimPrefix(r.User, "system:serviceaccount:tephra-system:"), r.Verb, r.Resource, r.APIGroup, r.Subresource)
		}
		counts[key]++
		total++
		if mutating(r.Verb) {
			writes++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%5d  %6.2f/gang  %s", counts[k], float64(counts[k])/gangs, k)
	}
	t.Logf("%d gangs of 3: %d requests (%.2f per gang), %d of them writes (%.2f per gang)", gangs, total, float64(total)/gangs, writes, float64(writes)/gangs)
	const controllers, scheduler = "tephra-controllers", "tephra-scheduler"
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		assert.Zero(t, counts[controllers+" "+verb+" podgroups.scheduling.tephra.dev/"], "no Tephra PodGroup is %sd for an upstream PodGroup", verb)
		assert.Zero(t, counts[controllers+" "+verb+" podgroups.scheduling.tephra.dev/status"], "no Tephra PodGroup status is written")
	}
	assert.Equal(t, gangs, counts[controllers+" update podgroups.scheduling.k8s.io/status"], "one PodGroupInitiallyScheduled per gang, True at once")
	assert.Equal(t, 3*gangs, counts[scheduler+" create pods/binding"], "one binding per pod")
}
