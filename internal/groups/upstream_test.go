package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
)

func upstreamGang(name string, minCount int32, mutate ...func(*schedulingv1beta1.PodGroup)) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("up-" + name)},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
	for _, m := range mutate {
		m(pg)
	}
	return pg
}

func fromWorkload(name string) func(*schedulingv1beta1.PodGroup) {
	return func(pg *schedulingv1beta1.PodGroup) {
		pg.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: name}
	}
}

type upstreamFixture struct {
	objects, podGroups, workloads, pods cache.Indexer
	upstream                            *Upstream
	lister                              schedulinglisters.PodGroupLister
}

func newUpstreamFixture(t *testing.T) *upstreamFixture {
	t.Helper()
	index := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	f := &upstreamFixture{
		objects:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, index),
		podGroups: cache.NewIndexer(cache.MetaNamespaceKeyFunc, index),
		workloads: cache.NewIndexer(cache.MetaNamespaceKeyFunc, index),
		pods:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ledger.PodGroupIndex: ledger.IndexByGroup}),
	}
	f.upstream = NewUpstream(upstreamlisters.NewPodGroupLister(f.podGroups), upstreamlisters.NewWorkloadLister(f.workloads))
	f.lister = NewLister(schedulinglisters.NewPodGroupLister(f.objects), f.pods, f.upstream)
	return f
}

// Get finds a Tephra object first, else an upstream PodGroup's translation, else the group a pod
// carries; upstream PodGroups being deleted, of a composite, or that cannot be translated are no
// group.
func TestGetFindsUpstreamPodGroups(t *testing.T) {
	f := newUpstreamFixture(t)
	require.NoError(t, f.objects.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "both", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{MinMember: 9, Queue: "mine"}}))
	require.NoError(t, f.workloads.Add(&schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Labels: map[string]string{v1alpha1.QueueLabel: "team-w"}}}))
	deleting := upstreamGang("deleting", 2)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, up := range []*schedulingv1beta1.PodGroup{
		upstreamGang("both", 3), upstreamGang("up", 3), upstreamGang("from-workload", 2, fromWorkload("wl")),
		upstreamGang("no-workload", 2, fromWorkload("nope")), deleting, upstreamGang("zero", 0),
		upstreamGang("child", 2, func(pg *schedulingv1beta1.PodGroup) { pg.Spec.ParentCompositePodGroupName = ptr.To("parent") }),
	} {
		require.NoError(t, f.podGroups.Add(up))
	}
	carrier := pod("up-0", "up", true)
	require.NoError(t, f.pods.Add(carrier))
	require.NoError(t, f.pods.Add(pod("carried-0", "carried", true)))

	for _, tc := range []struct {
		name, group    string
		minMember      int32
		queue          string
		fromUpstream   bool
		carried, found bool
	}{
		{name: "a Tephra object wins", group: "both", minMember: 9, queue: "mine", found: true},
		{name: "an upstream PodGroup wins over what a pod carries", group: "up", minMember: 3, queue: v1alpha1.DefaultQueue, fromUpstream: true, found: true},
		{name: "its Workload's queue", group: "from-workload", minMember: 2, queue: "team-w", fromUpstream: true, found: true},
		{name: "a Workload that does not exist names no queue", group: "no-workload", minMember: 2, queue: v1alpha1.DefaultQueue, fromUpstream: true, found: true},
		{name: "a group a pod carries", group: "carried", minMember: 1, queue: "team", carried: true, found: true},
		{name: "being deleted", group: "deleting"},
		{name: "cannot be translated", group: "zero"},
		{name: "a composite's child", group: "child"},
		{name: "nothing", group: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, err := f.lister.PodGroups("ns").Get(tc.group)
			if !tc.found {
				assert.True(t, apierrors.IsNotFound(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []any{tc.minMember, tc.queue, tc.fromUpstream, tc.carried},
				[]any{pg.Spec.MinMember, pg.Spec.Queue, v1alpha1.FromUpstreamPodGroup(pg), v1alpha1.CarriedBy(pg) != ""})
		})
	}
	_, err := f.lister.PodGroups("other").Get("up")
	assert.True(t, apierrors.IsNotFound(err), "in its own namespace only: %v", err)

	// Without pods, no carried group is read: the ledger's lister reads objects and upstream's.
	objectsAndUpstream := NewLister(schedulinglisters.NewPodGroupLister(f.objects), nil, f.upstream)
	_, err = objectsAndUpstream.PodGroups("ns").Get("carried")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = objectsAndUpstream.PodGroups("ns").Get("up")
	assert.NoError(t, err)

	listed := f.upstream.List("")
	names := []string{}
	for _, g := range listed {
		names = append(names, g.Name)
	}
	assert.ElementsMatch(t, []string{"both", "up", "from-workload", "no-workload"}, names, "List lists the upstream groups")
}

// A translation is made again only when its PodGroup or Workload is another version.
func TestUpstreamTranslationsFollowTheirObjects(t *testing.T) {
	f := newUpstreamFixture(t)
	require.NoError(t, f.podGroups.Add(upstreamGang("g", 2, fromWorkload("wl"))))
	first, err := f.upstream.Get("ns", "g")
	require.NoError(t, err)
	again, _ := f.upstream.Get("ns", "g")
	assert.Same(t, first, again, "the same version: the same translation")

	require.NoError(t, f.workloads.Add(&schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Labels: map[string]string{v1alpha1.QueueLabel: "team-w"}}}))
	withWorkload, _ := f.upstream.Get("ns", "g")
	assert.Equal(t, "team-w", withWorkload.Spec.Queue, "the Workload, once there, names the queue")

	require.NoError(t, f.podGroups.Update(upstreamGang("g", 5, fromWorkload("wl"))))
	grown, _ := f.upstream.Get("ns", "g")
	assert.Equal(t, int32(5), grown.Spec.MinMember, "minCount is mutable upstream: the translation follows")

	require.NoError(t, f.podGroups.Add(upstreamGang("h", 2)))
	f.upstream.List("")
	require.NoError(t, f.podGroups.Delete(upstreamGang("h", 2)))
	f.upstream.List("")
	_, kept := f.upstream.translated.Load("ns/h")
	assert.False(t, kept, "the translation of a PodGroup gone is forgotten when all are listed")
	_, kept = f.upstream.translated.Load("ns/g")
	assert.True(t, kept)
}

// recorder is a handler of Tephra's PodGroups that records what it is told.
type recorder struct{ events []string }

func (r *recorder) OnAdd(obj any, _ bool) {
	pg := obj.(*v1alpha1.PodGroup)
	r.events = append(r.events, "add "+pg.Name+" "+pg.Spec.Queue)
}
func (r *recorder) OnUpdate(oldObj, newObj any) {
	old, pg := oldObj.(*v1alpha1.PodGroup), newObj.(*v1alpha1.PodGroup)
	r.events = append(r.events, "update "+pg.Name+" "+old.Spec.Queue+">"+pg.Spec.Queue)
}
func (r *recorder) OnDelete(obj any) {
	r.events = append(r.events, "delete "+obj.(*v1alpha1.PodGroup).Name)
}

func (r *recorder) take() []string {
	out := r.events
	r.events = nil
	return out
}

// The events of upstream PodGroups and Workloads reach handlers of Tephra's PodGroups as events of
// their groups; those of a name a Tephra object has are the object's to tell.
func TestUpstreamEventsAreTheirGroups(t *testing.T) {
	f := newUpstreamFixture(t)
	rec := &recorder{}
	h := f.upstream.Handler(rec, schedulinglisters.NewPodGroupLister(f.objects))
	w := f.upstream.WorkloadHandler(rec, schedulinglisters.NewPodGroupLister(f.objects))

	g := upstreamGang("g", 2, fromWorkload("wl"))
	require.NoError(t, f.podGroups.Add(g))
	h.OnAdd(g, false)
	assert.Equal(t, []string{"add g default"}, rec.take())

	wl := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Labels: map[string]string{v1alpha1.QueueLabel: "team-w"}}}
	require.NoError(t, f.workloads.Add(wl))
	w.OnAdd(wl, false)
	assert.Equal(t, []string{"update g default>team-w"}, rec.take(), "its Workload moves it to its queue")
	relabelled := wl.DeepCopy()
	relabelled.Labels[v1alpha1.QueueLabel] = "team-x"
	w.OnUpdate(wl, relabelled)
	assert.Equal(t, []string{"update g team-w>team-x"}, rec.take())
	w.OnUpdate(relabelled, relabelled.DeepCopy())
	assert.Empty(t, rec.take(), "the same label: no change")

	zero := upstreamGang("g", 0, fromWorkload("wl"))
	h.OnUpdate(g, zero)
	assert.Equal(t, []string{"delete g"}, rec.take(), "no longer translatable: gone")
	h.OnUpdate(zero, g)
	assert.Equal(t, []string{"add g team-w"}, rec.take(), "translatable again: back, in its Workload's queue")
	deleting := g.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	h.OnUpdate(g, deleting)
	assert.Equal(t, []string{"delete g"}, rec.take(), "being deleted: gone")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/g", Obj: deleting})
	assert.Empty(t, rec.take(), "gone already")
	h.OnDelete(upstreamGang("other", 2))
	assert.Equal(t, []string{"delete other"}, rec.take())

	require.NoError(t, f.objects.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "ns"}}))
	h.OnAdd(upstreamGang("mine", 2), false)
	h.OnDelete(upstreamGang("mine", 2))
	assert.Empty(t, rec.take(), "a Tephra object's name: its own events tell")
}
