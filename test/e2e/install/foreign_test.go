package install

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulerpluginsv1alpha1 "github.com/tephra-dev/tephra/apis/foreign/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// exerciseForeignAdapters makes the adapters of controllers/foreign use every verb of their
// rules: they read scheduler-plugins' and Volcano's PodGroups and Volcano's Queues, write their
// status, and create and update the Tephra Queue of a Volcano Queue.
func exerciseForeignAdapters(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	c, err := client.New(env.Cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	queue := &volcanov1beta1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-volcano"},
		Spec:       volcanov1beta1.QueueSpec{Weight: 1, Capability: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
	}
	require.NoError(t, c.Create(ctx, queue))
	t.Cleanup(func() { _ = c.Delete(context.Background(), queue) })
	sp := &schedulerpluginsv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "rbac-sp", Namespace: ns}, Spec: schedulerpluginsv1alpha1.PodGroupSpec{MinMember: 2}}
	require.NoError(t, c.Create(ctx, sp))
	// A Volcano networkTopology is mapped onto the default Topology's levels, which the
	// controllers read (list and watch of topologies).
	topology := &schedulingv1alpha1.Topology{
		ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultTopology},
		Spec:       schedulingv1alpha1.TopologySpec{Levels: []schedulingv1alpha1.TopologyLevel{{NodeLabel: "example.com/rack"}, {NodeLabel: corev1.LabelHostname}}},
	}
	require.NoError(t, c.Create(ctx, topology))
	t.Cleanup(func() { _ = c.Delete(context.Background(), topology) })
	vc := &volcanov1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "rbac-vc", Namespace: ns}, Spec: volcanov1beta1.PodGroupSpec{
		MinMember: 1, Queue: queue.Name, NetworkTopology: &volcanov1beta1.NetworkTopologySpec{Mode: "soft"},
	}}
	require.NoError(t, c.Create(ctx, vc))

	framework.Eventually(t, time.Minute, "the foreign statuses written", func() (bool, string) {
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(sp), sp))
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(vc), vc))
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(queue), queue))
		return sp.Status.Phase == schedulerpluginsv1alpha1.PodGroupPending && vc.Status.Phase == volcanov1beta1.PodGroupInqueue &&
				queue.Status.State == volcanov1beta1.QueueOpen,
			fmt.Sprintf("scheduler-plugins %+v; Volcano %+v; queue %+v", sp.Status, vc.Status, queue.Status)
	})
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(queue), queue); err != nil {
			return err
		}
		queue.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}
		return c.Update(ctx, queue)
	}))
	framework.Eventually(t, time.Minute, "the Tephra Queue updated from the Volcano Queue", func() (bool, string) {
		var q schedulingv1alpha1.Queue
		if err := c.Get(ctx, client.ObjectKey{Name: queue.Name}, &q); err != nil {
			return false, err.Error()
		}
		return q.Spec.Capability.Cpu().Equal(resource.MustParse("5")), fmt.Sprint(q.Spec.Capability)
	})
}

// exerciseJobSetAdapter serves JobSet's API (its CRD, from its module; JobSet itself does not
// run here) and has the JobSet adapter mirror a JobSet whose pods Tephra schedules: it lists and
// watches JobSets.
func exerciseJobSetAdapter(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	ctx := context.Background()
	crd, err := localcluster.JobSetCRD(ctx)
	require.NoError(t, err)
	require.NoError(t, env.Cluster.ApplyFile(ctx, crd))
	dyn, err := dynamic.NewForConfig(env.Cluster.Config)
	require.NoError(t, err)
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": "rbac-jobset"},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": int64(2),
			"template": map[string]any{"spec": map[string]any{
				"parallelism": int64(2), "completions": int64(2),
				"template": map[string]any{"spec": map[string]any{
					"schedulerName": schedulingv1alpha1.SchedulerName,
					"restartPolicy": "Never",
					"containers":    []any{map[string]any{"name": "work", "image": "busybox"}},
				}},
			}},
		}}},
	}}
	jobSets := schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	// The adapter starts once the API is served (tephra-controllers checks every 10 s).
	_, err = dyn.Resource(jobSets).Namespace(ns).Create(ctx, js, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the JobSet's PodGroup", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "rbac-jobset", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pg.Spec.MinMember == 4 && len(pg.Spec.SubGroups) == 2, fmt.Sprintf("minMember %d, sub-groups %v", pg.Spec.MinMember, pg.Spec.SubGroups)
	})
}
