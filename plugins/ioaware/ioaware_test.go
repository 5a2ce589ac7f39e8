package ioaware

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/plugins/internal/datawait"
)

// fakeHandle gives the plugin the framework functions it calls; the rest of fwk.Handle is nil.
type fakeHandle struct {
	fwk.Handle
	recorder *events.FakeRecorder
}

func (h *fakeHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }

func newIO(t *testing.T, claims ...*corev1.PersistentVolumeClaim) (*IO, *events.FakeRecorder) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range claims {
		require.NoError(t, indexer.Add(c))
	}
	recorder := events.NewFakeRecorder(10)
	return &IO{handle: &fakeHandle{recorder: recorder}, claims: corelisters.NewPersistentVolumeClaimLister(indexer)}, recorder
}

func pod(annotations map[string]string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", Annotations: annotations}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func node(name string, labels map[string]string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	return ni
}

// scores runs PreFilter, Filter, PreScore and Score over the nodes as the framework does: a
// node Filter rejects scores -1.
func scores(t *testing.T, p *IO, pod *corev1.Pod, nodes ...fwk.NodeInfo) ([]int64, *fwk.Status) {
	t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	_, status := p.PreFilter(ctx, state, pod, nodes)
	if !status.IsSuccess() && !status.IsSkip() {
		return nil, status
	}
	var passed []fwk.NodeInfo
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = -1
		if status.IsSkip() || p.Filter(ctx, state, pod, n).IsSuccess() {
			passed = append(passed, n)
		}
	}
	if s := p.PreScore(ctx, state, pod, passed); s.IsSkip() {
		for i, n := range nodes {
			if n.Node() != nil && contains(passed, n) {
				out[i] = 0
			}
		}
		return out, nil
	}
	for i, n := range nodes {
		if contains(passed, n) {
			score, s := p.Score(ctx, state, pod, n)
			require.True(t, s.IsSuccess(), s.Message())
			out[i] = score
		}
	}
	return out, nil
}

func contains(nodes []fwk.NodeInfo, n fwk.NodeInfo) bool {
	for _, m := range nodes {
		if m == n {
			return true
		}
	}
	return false
}

// A node scores the part of the pod's datasets it caches, by Tephra's label or Fluid's; a pod
// that declares none scores every node the same.
func TestNodesScoreThePartOfThePodsDataTheyCache(t *testing.T) {
	fluidClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "imagenet", Namespace: "team-a",
		Labels: map[string]string{"fluid.io/s-team-a-imagenet": "true"}}}
	p, _ := newIO(t, fluidClaim)
	both := node("both", map[string]string{"data.tephra.dev/coco": "true", "fluid.io/s-team-a-imagenet": "true"})
	fluid := node("fluid", map[string]string{"fluid.io/s-team-a-imagenet": "true"})
	none := node("none", nil)

	got, status := scores(t, p, pod(map[string]string{datasets.Annotation: "coco"}, "imagenet"), both, fluid, none)
	require.Nil(t, status)
	assert.Equal(t, []int64{100, 50, 0}, got)

	got, status = scores(t, p, pod(nil), both, fluid, none)
	require.Nil(t, status)
	assert.Equal(t, []int64{0, 0, 0}, got, "no datasets: the plugin skips scoring")
}

// With locality Required, only the nodes that cache every dataset pass, and the others say why,
// in one message for all of them.
func TestRequiredLocalityFiltersTheOtherNodes(t *testing.T) {
	p, _ := newIO(t)
	required := pod(map[string]string{datasets.Annotation: "coco,wiki", datasets.LocalityAnnotation: "Required"})
	both := node("both", map[string]string{"data.tephra.dev/coco": "true", "data.tephra.dev/wiki": "true"})
	one := node("one", map[string]string{"data.tephra.dev/coco": "true"})
	got, status := scores(t, p, required, both, one)
	require.Nil(t, status)
	assert.Equal(t, []int64{100, -1}, got)

	state := framework.NewCycleState()
	_, s := p.PreFilter(context.Background(), state, required, nil)
	require.True(t, s.IsSuccess())
	refused := p.Filter(context.Background(), state, required, one)
	assert.Equal(t, fwk.Unschedulable, refused.Code())
	assert.Equal(t, "node(s) do not cache all the datasets the pod requires (coco, wiki; data.tephra.dev/locality: Required)", refused.Message())
}

// A malformed declaration keeps the pod from being placed, with an event that says what is
// wrong.
func TestAMalformedDeclarationIsRefusedWithAnEvent(t *testing.T) {
	p, recorder := newIO(t)
	_, status := p.PreFilter(context.Background(), framework.NewCycleState(), pod(map[string]string{datasets.Annotation: "Bad_Name!"}), nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), `dataset name "Bad_Name!" is not valid in a node label`)
	require.Len(t, recorder.Events, 1)
	assert.Contains(t, <-recorder.Events, "Warning InvalidDatasets")
}

// A pod that requires its data is woken by a node that now caches all of it, not by one that
// does not, nor by any node when it only prefers its data; a claim it mounts and a change of its
// declaration wake it too.
func TestQueueingHints(t *testing.T) {
	p, _ := newIO(t)
	logger := klog.Background()
	required := pod(map[string]string{datasets.Annotation: "coco", datasets.LocalityAnnotation: "Required"}, "scratch")
	cached := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"data.tephra.dev/coco": "true"}}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	hint := func(h fwk.QueueingHint, err error) fwk.QueueingHint {
		require.NoError(t, err)
		return h
	}
	assert.Equal(t, fwk.Queue, hint(p.isSchedulableAfterNodeChange(logger, required, bare, cached)))
	assert.Equal(t, fwk.QueueSkip, hint(p.isSchedulableAfterNodeChange(logger, required, nil, bare)))
	preferred := pod(map[string]string{datasets.Annotation: "coco"})
	assert.Equal(t, fwk.QueueSkip, hint(p.isSchedulableAfterNodeChange(logger, preferred, nil, cached)))

	claim := func(ns, name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	assert.Equal(t, fwk.Queue, hint(queueForClaimOfPod(logger, required, nil, claim("team-a", "scratch"))))
	assert.Equal(t, fwk.QueueSkip, hint(queueForClaimOfPod(logger, required, nil, claim("team-b", "scratch"))))
	assert.Equal(t, fwk.QueueSkip, hint(queueForClaimOfPod(logger, required, nil, claim("team-a", "other"))))

	fixed := required.DeepCopy()
	fixed.Annotations[datasets.Annotation] = "wiki"
	assert.Equal(t, fwk.Queue, hint(isSchedulableAfterDeclarationChange(logger, required, required, fixed)))
	relabelled := required.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	assert.Equal(t, fwk.QueueSkip, hint(isSchedulableAfterDeclarationChange(logger, required, required, relabelled)))
}

// Pods that read the same data sign alike, and differ from those that read other data or none.
func TestTheSignatureKeysTheData(t *testing.T) {
	p, _ := newIO(t)
	sign := func(pod *corev1.Pod) any {
		fragments, status := p.SignPod(context.Background(), pod)
		require.True(t, status.IsSuccess())
		require.Len(t, fragments, 1)
		return fragments[0].Value
	}
	a := sign(pod(map[string]string{datasets.Annotation: "coco"}))
	assert.Equal(t, a, sign(pod(map[string]string{datasets.Annotation: "coco"})))
	assert.NotEqual(t, a, sign(pod(map[string]string{datasets.Annotation: "wiki"})))
	assert.NotEqual(t, a, sign(pod(map[string]string{datasets.Annotation: "coco", datasets.LocalityAnnotation: "Required"})))
	assert.NotEqual(t, a, sign(pod(nil)))
}

const network corev1.ResourceName = "io.tephra.dev/network"

func netPod(name string, net int64) *corev1.Pod {
	p := pod(nil)
	p.Name = name
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		network: *resource.NewQuantity(net, resource.DecimalSI)}}}}
	return p
}

func netNode(name, rack string, publishes int64, pods ...*corev1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": rack}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{network: *resource.NewQuantity(publishes, resource.DecimalSI)}}})
	for _, p := range pods {
		p.Spec.NodeName = name
		ni.AddPod(p)
	}
	return ni
}

func withUplink(t *testing.T, p *IO, rackBandwidth string) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(&v1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultTopology}, Spec: v1alpha1.TopologySpec{
		Levels: []v1alpha1.TopologyLevel{{NodeLabel: "rack", Bandwidth: corev1.ResourceList{network: resource.MustParse(rackBandwidth)}}}}}))
	p.topologies = schedulinglisters.NewTopologyLister(indexer)
}

// A rack's uplink keeps a pod that requests bandwidth off its nodes once the pods there request
// what it carries, whatever the nodes' own bandwidth; the nodes it may use score higher the more
// bandwidth its requests leave free, so that IO-heavy pods spread; in a preemption's dry run, a
// pod taken off a rack gives its share back.
func TestARacksUplinkKeepsIOHeavyPodsOut(t *testing.T) {
	p, _ := newIO(t)
	withUplink(t, p, "20")
	nodes := []fwk.NodeInfo{
		netNode("a0", "a", 10, netPod("x", 8)), netNode("a1", "a", 10, netPod("y", 8)),
		netNode("b0", "b", 10, netPod("z", 2)), netNode("b1", "b", 10),
	}
	got, status := scores(t, p, netPod("heavy", 5), nodes...)
	require.Nil(t, status)
	// b0: its own 10 leave 3 free (0.3), rack b's 20 leave 13; b1: 5 of 10 (0.5).
	assert.Equal(t, []int64{-1, -1, 30, 50}, got)

	state := framework.NewCycleState()
	_, s := p.PreFilter(context.Background(), state, netPod("heavy", 5), nodes)
	require.True(t, s.IsSuccess(), s.Message())
	refused := p.Filter(context.Background(), state, netPod("heavy", 5), nodes[0])
	assert.Equal(t, "node(s) in a network domain whose bandwidth cannot carry the pod's IO requests (Topology default)", refused.Message())
	victim, err := framework.NewPodInfo(nodes[0].GetPods()[0].GetPod())
	require.NoError(t, err)
	require.True(t, p.RemovePod(context.Background(), state, netPod("heavy", 5), victim, nodes[0]).IsSuccess())
	assert.True(t, p.Filter(context.Background(), state, netPod("heavy", 5), nodes[0]).IsSuccess(), "8 + 5 of 20 once x is gone")
}

// A pod that requests a bandwidth no node publishes waits with an event that says so.
func TestABandwidthNoNodePublishesIsRefusedWithAnEvent(t *testing.T) {
	p, recorder := newIO(t)
	nodes := []fwk.NodeInfo{netNode("a0", "a", 0)}
	_, status := p.PreFilter(context.Background(), framework.NewCycleState(), netPod("heavy", 5), nodes)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "the pod requests io.tephra.dev/network, which no node publishes (a node publishes its IO bandwidth as allocatable io.tephra.dev/network)", status.Message())
	require.Len(t, recorder.Events, 1)
	assert.Contains(t, <-recorder.Events, "Warning BandwidthNotPublished")
}

// A member that declares nothing is placed by its PodGroup's declaration; one that declares its
// own keeps it; a pod that carries its group of one is not looked up.
func TestAMemberIsPlacedByItsGroupsDeclaration(t *testing.T) {
	p, _ := newIO(t)
	groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, groups.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "team-a",
		Annotations: map[string]string{datasets.Annotation: "coco", datasets.LocalityAnnotation: "Required"}}}))
	p.podGroups = schedulinglisters.NewPodGroupLister(groups)
	coco, none := node("coco", map[string]string{"data.tephra.dev/coco": "true"}), node("none", nil)

	member := pod(nil)
	member.Labels = map[string]string{v1alpha1.PodGroupLabel: "job"}
	got, status := scores(t, p, member, coco, none)
	require.Nil(t, status)
	assert.Equal(t, []int64{fwk.MaxScore, -1}, got, "the group requires coco")

	own := pod(map[string]string{datasets.Annotation: "wiki"})
	own.Labels = map[string]string{v1alpha1.PodGroupLabel: "job"}
	got, status = scores(t, p, own, coco, none)
	require.Nil(t, status)
	assert.Equal(t, []int64{0, 0}, got, "its own declaration, preferred, of data neither caches")

	carried := pod(map[string]string{v1alpha1.GroupOnPodAnnotation: "true"})
	carried.Labels = map[string]string{v1alpha1.PodGroupLabel: "job"}
	assert.True(t, p.declaresNothing(carried))

	other := pod(nil)
	other.Labels = map[string]string{v1alpha1.PodGroupLabel: "another"}
	assert.True(t, p.declaresNothing(other))
}

// A pod that prefers its data, with a node that caches it, is kept off the others until its wait
// is over, counted from its first cycle; a gang's member, a pod whose data no node caches and a
// pod that requires its data are not held by the wait; the PostFilter plugins see the cycle marked.
func TestAPodThatPrefersItsDataWaitsForItAWhile(t *testing.T) {
	p, _ := newIO(t)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	p.waits = newLocalityWaits(5*time.Minute, nil)
	p.waits.now = func() time.Time { return now }
	coco, none := node("coco", map[string]string{"data.tephra.dev/coco": "true"}), node("none", nil)

	reader := pod(map[string]string{datasets.Annotation: "coco"})
	reader.UID = "reader"
	state := framework.NewCycleState()
	_, status := p.PreFilter(context.Background(), state, reader, []fwk.NodeInfo{coco, none})
	require.True(t, status.IsSuccess(), status.Message())
	assert.True(t, datawait.Marked(state))
	assert.True(t, p.Filter(context.Background(), state, reader, coco).IsSuccess())
	refused := p.Filter(context.Background(), state, reader, none)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, refused.Code())
	assert.Equal(t, "node(s) do not cache all the datasets the pod reads (coco); it waits up to 5m0s for a node that does (TephraIO localityWait)", refused.Message())

	now = now.Add(4 * time.Minute)
	got, status := scores(t, p, reader, coco, none)
	require.Nil(t, status)
	assert.Equal(t, []int64{fwk.MaxScore, -1}, got, "still waiting after 4 minutes")
	now = now.Add(time.Minute)
	got, status = scores(t, p, reader, coco, none)
	require.Nil(t, status)
	assert.Equal(t, []int64{fwk.MaxScore, 0}, got, "the wait is over: any node, its data's scoring most")

	member := pod(map[string]string{datasets.Annotation: "coco"})
	member.UID, member.Labels = "member", map[string]string{v1alpha1.PodGroupLabel: "gang"}
	got, _ = scores(t, p, member, coco, none)
	assert.Equal(t, []int64{fwk.MaxScore, 0}, got, "a gang's member does not wait")

	elsewhere := pod(map[string]string{datasets.Annotation: "wiki"})
	elsewhere.UID = "elsewhere"
	got, _ = scores(t, p, elsewhere, coco, none)
	assert.Equal(t, []int64{0, 0}, got, "no node caches wiki: nothing to wait for")

	p.waits.forget("reader")
	assert.False(t, p.waits.has("reader"))
}

// localityWait defaults to 5 minutes; a negative one is refused.
func TestLocalityWaitArgs(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultLocalityWait, args.LocalityWait.Duration)
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"localityWait": "-1m"}`)})
	assert.ErrorContains(t, err, "localityWait: -1m0s must not be negative")
	_, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"localityWiat": "1m"}`)})
	assert.Error(t, err, "a misspelled arg")
}

// A pod whose node selector keeps it off the nodes that cache its data does not wait for them;
// when its wait is over, the pod is tried again.
func TestALocalityWaitEndsAndIsNotBegunForNodesThePodCannotUse(t *testing.T) {
	p, _ := newIO(t)
	tried := make(chan string, 1)
	p.waits = newLocalityWaits(50*time.Millisecond, func(pod *corev1.Pod) { tried <- pod.Name })
	coco := node("coco", map[string]string{"data.tephra.dev/coco": "true", "pool": "a"})
	other := node("other", map[string]string{"pool": "b"})

	kept := pod(map[string]string{datasets.Annotation: "coco"})
	kept.UID, kept.Spec.NodeSelector = "kept", map[string]string{"pool": "b"}
	got, _ := scores(t, p, kept, coco, other)
	assert.Equal(t, []int64{fwk.MaxScore, 0}, got, "its selector keeps it from coco: no wait")
	assert.False(t, p.waits.has("kept"))

	reader := pod(map[string]string{datasets.Annotation: "coco"})
	reader.UID = "reader"
	got, _ = scores(t, p, reader, coco, other)
	assert.Equal(t, []int64{fwk.MaxScore, -1}, got)
	select {
	case name := <-tried:
		assert.Equal(t, "train", name)
	case <-time.After(5 * time.Second):
		t.Fatal("the pod was not tried again when its wait was over")
	}
}
