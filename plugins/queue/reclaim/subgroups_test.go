package reclaim

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// A running job of two replicas of two pods (sub-groups r0 and r1, every one needed) is reclaimed
// whole when its group's disruptionMode is All (or unset), and a replica at a time when it is
// Single: each replica is then a unit of its own, all of its pods and none of the other's.
func TestARunningGroupIsDisruptedWholeOrASubGroupAtATime(t *testing.T) {
	for _, mode := range []v1alpha1.DisruptionMode{"", v1alpha1.DisruptionAll, v1alpha1.DisruptionSingle} {
		t.Run(string(mode), func(t *testing.T) {
			tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
			l := ledger.New(v1alpha1.SchedulerName)
			members := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{setup.PodGroupIndex: ledger.IndexByGroup})
			groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			require.NoError(t, groups.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{
				MinMember:      4,
				SubGroups:      []v1alpha1.SubGroup{{Name: "r0", MinMember: 2}, {Name: "r1", MinMember: 2}},
				DisruptionMode: mode,
			}}))
			resolve := func(string, string) string { return "a" }
			var candidates []fwk.PodInfo
			for _, name := range []string{"r0-a", "r0-b", "r1-a", "r1-b"} {
				pod := ledgertest.Pod(name, map[string]string{v1alpha1.PodGroupLabel: "job", v1alpha1.SubGroupLabel: name[:2]}, "node-"+name[:2], 8)
				require.NoError(t, members.Add(pod))
				l.Observe(pod, resolve)
				info, err := framework.NewPodInfo(pod)
				require.NoError(t, err)
				candidates = append(candidates, info)
			}
			preemptor := ledgertest.Pod("preemptor", map[string]string{v1alpha1.QueueLabel: "waiting"}, "", 8)
			l.Observe(preemptor, resolve)
			r := &run{Reclaimer: &Reclaimer{ledger: l, podGroups: schedulinglisters.NewPodGroupLister(groups), members: members}}
			r.pod, r.leaf, r.belowShare = preemptor, tree.Get("waiting"), true
			r.state = Queues{Tree: tree}

			units := r.units(candidates)
			var got [][]string
			keys := map[string]bool{}
			for _, u := range units {
				var names []string
				for _, p := range u.pods {
					names = append(names, p.Name)
				}
				sort.Strings(names)
				got = append(got, names)
				keys[unitKey(u)] = true
				assert.Equal(t, kindReclaim, u.kind)
			}
			if mode == v1alpha1.DisruptionSingle {
				assert.ElementsMatch(t, [][]string{{"r0-a", "r0-b"}, {"r1-a", "r1-b"}}, got, "a replica at a time, each whole")
				assert.Len(t, keys, 2, "the two replicas are two units wherever they are met")
				assert.Equal(t, int64(16), units[0].freed[gpu], "a replica frees its own two pods' GPUs")
				return
			}
			assert.Equal(t, [][]string{{"r0-a", "r0-b", "r1-a", "r1-b"}}, got, "the whole group at once")
			assert.Equal(t, map[string]bool{"group/ns/job": true}, keys)
		})
	}
}

// A pod whose sub-group label names none of its group's sub-groups goes with the whole group.
func TestAPodOutsideTheGroupsSubGroupsGoesWithTheWholeGroup(t *testing.T) {
	groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, groups.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{
		MinMember: 2, SubGroups: []v1alpha1.SubGroup{{Name: "r0", MinMember: 2}}, DisruptionMode: v1alpha1.DisruptionSingle,
	}}))
	r := &run{Reclaimer: &Reclaimer{podGroups: schedulinglisters.NewPodGroupLister(groups)}}
	stray := ledgertest.Pod("stray", map[string]string{v1alpha1.PodGroupLabel: "job", v1alpha1.SubGroupLabel: "r9"}, "n", 1)
	other := ledgertest.Pod("m", map[string]string{v1alpha1.PodGroupLabel: "job", v1alpha1.SubGroupLabel: "r0"}, "n", 1)
	sub, pods := r.disruptedTogether("ns/job", stray, []*corev1.Pod{stray, other})
	assert.Empty(t, sub)
	assert.Len(t, pods, 2)
}

// A group that runs more sub-groups than its minSubGroups runs more pods than its minMember, but
// has none to spare one by one: each of its pods goes with its sub-group (Single) or its group
// (All), never alone, which would leave a replica in part.
func TestAGroupAboveItsMinimumOfSubGroupsSparesNoPodAlone(t *testing.T) {
	for _, mode := range []v1alpha1.DisruptionMode{v1alpha1.DisruptionAll, v1alpha1.DisruptionSingle} {
		t.Run(string(mode), func(t *testing.T) {
			tree := quota.NewTree([]*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}})
			l := ledger.New(v1alpha1.SchedulerName)
			members := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{setup.PodGroupIndex: ledger.IndexByGroup})
			groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			one := int32(1)
			require.NoError(t, groups.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{
				MinMember: 2, MinSubGroups: &one,
				SubGroups:      []v1alpha1.SubGroup{{Name: "r0", MinMember: 2}, {Name: "r1", MinMember: 2}},
				DisruptionMode: mode,
			}}))
			resolve := func(string, string) string { return "a" }
			var candidates []fwk.PodInfo
			for _, name := range []string{"r0-a", "r0-b", "r1-a", "r1-b"} {
				pod := ledgertest.Pod(name, map[string]string{v1alpha1.PodGroupLabel: "job", v1alpha1.SubGroupLabel: name[:2]}, "node-"+name[:2], 8)
				require.NoError(t, members.Add(pod))
				l.Observe(pod, resolve)
				info, err := framework.NewPodInfo(pod)
				require.NoError(t, err)
				candidates = append(candidates, info)
			}
			preemptor := ledgertest.Pod("preemptor", map[string]string{v1alpha1.QueueLabel: "waiting"}, "", 8)
			l.Observe(preemptor, resolve)
			r := &run{Reclaimer: &Reclaimer{ledger: l, podGroups: schedulinglisters.NewPodGroupLister(groups), members: members}}
			r.pod, r.leaf, r.belowShare = preemptor, tree.Get("waiting"), true
			r.state = Queues{Tree: tree}

			var got [][]string
			for _, u := range r.units(candidates) {
				assert.False(t, u.elastic, "no pod of a whole sub-group is elastic")
				var names []string
				for _, p := range u.pods {
					names = append(names, p.Name)
				}
				sort.Strings(names)
				got = append(got, names)
			}
			if mode == v1alpha1.DisruptionSingle {
				assert.ElementsMatch(t, [][]string{{"r0-a", "r0-b"}, {"r1-a", "r1-b"}}, got)
				return
			}
			assert.Equal(t, [][]string{{"r0-a", "r0-b", "r1-a", "r1-b"}}, got)
		})
	}
}
