package operators

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

var (
	leaderWorkerSets = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	volcanoPodGroups = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
)

// LeaderWorkerSet's labels on the pods of its groups.
const (
	lwsNameLabel       = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupIndexLabel = "leaderworkerset.sigs.k8s.io/group-index"
)

// leaderWorkerSet is a LeaderWorkerSet of replicas groups of size one-CPU pods (a leader and
// size-1 workers from one template) on Tephra, each group required in one rack by the topology
// annotation that Kueue's TAS users already put on an LWS's templates.
func leaderWorkerSet(name string, replicas, size int64, pool map[string]string) *unstructured.Unstructured {
	selector := map[string]any{}
	for k, v := range pool {
		selector[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1",
		"kind":       "LeaderWorkerSet",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"replicas": replicas,
			"leaderWorkerTemplate": map[string]any{
				"size": size,
				"workerTemplate": map[string]any{
					"metadata": map[string]any{"annotations": map[string]any{
						topology.KueueRequiredAnnotation: rackLabel,
					}},
					"spec": map[string]any{
						"schedulerName": schedulingv1alpha1.SchedulerName,
						"nodeSelector":  selector,
						"containers": []any{map[string]any{
							"name": "serve", "image": "busybox",
							"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
						}},
					},
				},
			},
		},
	}}
}

// lwsGroups lists the pods of a LeaderWorkerSet by group index.
func lwsGroups(t *testing.T, env *framework.Env, ns, name string) map[string][]corev1.Pod {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: lwsNameLabel + "=" + name})
	require.NoError(t, err)
	groups := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			groups[p.Labels[lwsGroupIndexLabel]] = append(groups[p.Labels[lwsGroupIndexLabel]], p)
		}
	}
	return groups
}

// A LeaderWorkerSet run with its chart's gang scheduling on (LWS creates a Volcano PodGroup per
// group, which Tephra mirrors) places each group whole in one rack, and a group that no rack can
// hold whole waits with nothing bound, even where the free CPUs of two racks would hold it, until
// a rack has room.
func TestLeaderWorkerSetGroupsAreGangsInOneRack(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	// Racks of 5, 4 and 3 one-CPU nodes: a group of 4 fits in the first two only.
	pool := racks(t, env, "lws", 5, 4, 3)
	lws := dyn.Resource(leaderWorkerSets).Namespace(ns)
	_, err := lws.Create(ctx, leaderWorkerSet("serve", 2, 4, pool), metav1.CreateOptions{})
	require.NoError(t, err)

	serve := func() map[string][]corev1.Pod { return lwsGroups(t, env, ns, "serve") }
	placed := waitWhole(t, env, "groups of LeaderWorkerSet serve", serve, 4, "0", "1")
	for index, in := range placed {
		assert.Len(t, in, 1, "group %s is in one rack: %v", index, in)
	}
	assert.NotEqual(t, placed["0"], placed["1"], "the two groups need a rack each")

	// The group is LWS's: its Volcano PodGroup, with the group's size as its minimum, mirrored by
	// Tephra, which runs it.
	leader := serve()["0"][0]
	group := leader.Annotations[schedulingv1alpha1.VolcanoGroupNameAnnotation]
	require.NotEmpty(t, group, "LWS names the group's PodGroup on its pods")
	volcano, err := dyn.Resource(volcanoPodGroups).Namespace(ns).Get(ctx, group, metav1.GetOptions{})
	require.NoError(t, err, "LWS created the Volcano PodGroup %s", group)
	minMember, _, _ := unstructured.NestedInt64(volcano.Object, "spec", "minMember")
	assert.Equal(t, int64(4), minMember)
	framework.Eventually(t, time.Minute, "the mirror of "+group+" Running", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pg.Spec.MinMember == 4 && pg.Status.Phase == schedulingv1alpha1.PodGroupRunning,
			fmt.Sprintf("minMember %d, phase %s", pg.Spec.MinMember, pg.Status.Phase)
	})

	// A third group: 1 CPU is left in one of the first two racks and 3 in the last, 4 in all,
	// but no rack holds 4.
	_, err = lws.Patch(ctx, "serve", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	var third string
	framework.Eventually(t, 2*time.Minute, "the third group says why it waits", func() (bool, string) {
		pods := serve()["2"]
		if len(pods) == 0 {
			return false, "no pod of group 2"
		}
		third = pods[0].Annotations[schedulingv1alpha1.VolcanoGroupNameAnnotation]
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, third, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		if cond == nil {
			return false, fmt.Sprintf("%d pods, no condition", len(pods))
		}
		return strings.Contains(cond.Message, "no "+rackLabel+" domain holds it"), cond.Reason + ": " + cond.Message
	})
	for _, p := range serve()["2"] {
		assert.Empty(t, p.Spec.NodeName, "no pod of the third group is bound while no rack holds it whole")
	}

	// A fourth node in the last rack: the third group goes there, whole.
	addToRack(t, env, "lws", 2)
	assert.Equal(t, []string{"lws-r2"}, waitWhole(t, env, "the third group of serve", serve, 4, "2")["2"])
}

// LWS's exclusive-topology makes LWS create a group's workers only once its leader is bound,
// which no gang allows: the group's Volcano PodGroup says so and what to use instead, and the
// leader is not placed alone.
func TestLeaderWorkerSetExclusiveTopologyIsExplained(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 3*time.Minute)
	pool := racks(t, env, "lwsx", 4)
	lws := leaderWorkerSet("exclusive", 1, 4, pool)
	lws.SetAnnotations(map[string]string{"leaderworkerset.sigs.k8s.io/exclusive-topology": rackLabel})
	_, err := dyn.Resource(leaderWorkerSets).Namespace(ns).Create(ctx, lws, metav1.CreateOptions{})
	require.NoError(t, err)

	var group string
	framework.Eventually(t, 2*time.Minute, "a Warning on the group's Volcano PodGroup", func() (bool, string) {
		pods := lwsGroups(t, env, ns, "exclusive")["0"]
		if len(pods) == 0 {
			return false, "no leader yet"
		}
		group = pods[0].Annotations[schedulingv1alpha1.VolcanoGroupNameAnnotation]
		events := env.Events(ns, group)
		return strings.Contains(events, "Warning ExclusiveTopologyBlocksGang: LeaderWorkerSet exclusive sets leaderworkerset.sigs.k8s.io/exclusive-topology") &&
			strings.Contains(events, topology.KueueRequiredAnnotation+": "+rackLabel), events
	})
	pods := lwsGroups(t, env, ns, "exclusive")["0"]
	require.Len(t, pods, 1, "LWS created the leader only")
	assert.Empty(t, pods[0].Spec.NodeName, "the leader is not placed without its group")
}
