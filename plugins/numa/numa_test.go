package numa

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologylisters "github.com/tephra-dev/tephra/apis/client/listers/topology/v1alpha2"
	topologyv1alpha2 "github.com/tephra-dev/tephra/apis/topology/v1alpha2"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// fakeHandle gives the plugin the framework functions it calls; the rest of fwk.Handle is nil.
type fakeHandle struct {
	fwk.Handle
	recorder *events.FakeRecorder
}

func (h *fakeHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }

type fixture struct {
	numa   *NUMA
	handle *fakeHandle
	nrts   cache.Indexer
	nodes  cache.Indexer
}

func newFixture(t *testing.T, rawArgs string) *fixture {
	t.Helper()
	var obj runtime.Object
	if rawArgs != "" {
		obj = &runtime.Unknown{Raw: []byte(rawArgs), ContentType: runtime.ContentTypeJSON}
	}
	args, err := ParseArgs(obj)
	require.NoError(t, err)
	f := &fixture{
		handle: &fakeHandle{recorder: events.NewFakeRecorder(100)},
		nrts:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		nodes:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
	f.numa = newNUMA(f.handle, args, topologylisters.NewNodeResourceTopologyLister(f.nrts), corelisters.NewNodeLister(f.nodes))
	return f
}

// zone is a test NUMA zone: each resource's allocatable and available amounts.
type zone map[corev1.ResourceName][2]string

// topology builds a node's NodeResourceTopology with zones node-0, node-1, ... Empty policy or
// scope leaves the attribute out.
func topology(node, policy, scope string, zones ...zone) *topologyv1alpha2.NodeResourceTopology {
	nrt := &topologyv1alpha2.NodeResourceTopology{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if policy != "" {
		nrt.Attributes = append(nrt.Attributes, topologyv1alpha2.AttributeInfo{Name: topologyv1alpha2.AttributeTopologyManagerPolicy, Value: policy})
	}
	if scope != "" {
		nrt.Attributes = append(nrt.Attributes, topologyv1alpha2.AttributeInfo{Name: topologyv1alpha2.AttributeTopologyManagerScope, Value: scope})
	}
	for i, z := range zones {
		zn := topologyv1alpha2.Zone{Name: fmt.Sprintf("node-%d", i), Type: topologyv1alpha2.ZoneTypeNode}
		names := make([]corev1.ResourceName, 0, len(z))
		for name := range z {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			alloc, avail := resource.MustParse(z[name][0]), resource.MustParse(z[name][1])
			zn.Resources = append(zn.Resources, topologyv1alpha2.ResourceInfo{Name: string(name), Capacity: alloc, Allocatable: alloc, Available: avail})
		}
		nrt.Zones = append(nrt.Zones, zn)
	}
	return nrt
}

// publish adds or updates a node's object, as the plugin's informer would.
func (f *fixture) publish(t *testing.T, nrt *topologyv1alpha2.NodeResourceTopology) {
	t.Helper()
	old, exists, err := f.nrts.Get(nrt)
	require.NoError(t, err)
	require.NoError(t, f.nrts.Update(nrt))
	if exists {
		f.numa.topologyHandler().OnUpdate(old, nrt)
	} else {
		f.numa.topologyHandler().OnAdd(nrt, false)
	}
	require.NoError(t, f.nodes.Update(st.MakeNode().Name(nrt.Name).Obj()))
}

func cpus(n string) zone { return zone{corev1.ResourceCPU: {"8", n}} }

func container(name string, res map[corev1.ResourceName]string) corev1.Container {
	return st.MakeContainer().Name(name).Resources(res).Obj()
}

// guaranteed makes a Guaranteed pod with a container per resource map, named a, b, ...
func guaranteed(name string, containers ...map[corev1.ResourceName]string) *corev1.Pod {
	pod := st.MakePod().Namespace("ns").Name(name).UID(name).Obj()
	for i, res := range containers {
		res[corev1.ResourceMemory] = "1Gi"
		pod.Spec.Containers = append(pod.Spec.Containers, container(string(rune('a'+i)), res))
	}
	return pod
}

func cpu(n string) map[corev1.ResourceName]string {
	return map[corev1.ResourceName]string{corev1.ResourceCPU: n}
}

func nodeInfo(name string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(st.MakeNode().Name(name).Obj())
	return ni
}

func (f *fixture) preFilter(t *testing.T, pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
	t.Helper()
	state := framework.NewCycleState()
	_, status := f.numa.PreFilter(context.Background(), state, pod, nil)
	return state, status
}

// filter runs PreFilter and Filter on a node, as the framework does.
func (f *fixture) filter(t *testing.T, pod *corev1.Pod, node string) *fwk.Status {
	t.Helper()
	state, status := f.preFilter(t, pod)
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	return f.numa.Filter(context.Background(), state, pod, nodeInfo(node))
}

func (f *fixture) score(t *testing.T, pod *corev1.Pod, node string) int64 {
	t.Helper()
	state, status := f.preFilter(t, pod)
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	require.True(t, f.numa.PreScore(context.Background(), state, pod, []fwk.NodeInfo{nodeInfo(node)}).IsSuccess())
	score, status := f.numa.Score(context.Background(), state, pod, nodeInfo(node))
	require.True(t, status.IsSuccess(), "Score: %v", status)
	return score
}

// reserve runs PreFilter and Reserve for a pod placed on the node.
func (f *fixture) reserve(t *testing.T, pod *corev1.Pod, node string) {
	t.Helper()
	state, _ := f.preFilter(t, pod)
	require.True(t, f.numa.Reserve(context.Background(), state, pod, node).IsSuccess())
}

func rejectionCount(t *testing.T, policy string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(rejections.WithLabelValues(policy))
	require.NoError(t, err)
	return v
}

func TestArgsDefaultsAndValidation(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, MostAllocated, args.ScoringStrategy)

	for raw, want := range map[string]string{
		`{"scoringStrategy": "BalancedAllocation"}`: `scoringStrategy: "BalancedAllocation" is not MostAllocated or LeastAllocated`,
		`{"scoringStrategy": "mostallocated"}`:      `scoringStrategy: "mostallocated" is not MostAllocated or LeastAllocated`,
		`{"scoringStrategies": "LeastAllocated"}`:   `unknown field "scoringStrategies"`,
	} {
		_, err := ParseArgs(&runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON})
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), "TephraNUMA args: ")
	}
	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"scoringStrategy": "LeastAllocated"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, LeastAllocated, args.ScoringStrategy)
	_, err = ParseArgs(&metav1.Status{})
	assert.EqualError(t, err, "TephraNUMA args: want runtime.Unknown, got *v1.Status")
}

func TestDemandCountsWhatKubeletAligns(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := st.MakePod().Namespace("ns").Name("p").Obj()
	pod.Spec.InitContainers = []corev1.Container{
		container("init", map[corev1.ResourceName]string{corev1.ResourceCPU: "6", corev1.ResourceMemory: "1Gi"}),
		container("sidecar", map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "512Mi"}),
	}
	pod.Spec.InitContainers[1].RestartPolicy = &always
	pod.Spec.Containers = []corev1.Container{
		container("a", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "2Gi", gpu: "1", "hugepages-2Mi": "64Mi"}),
		container("b", map[corev1.ResourceName]string{corev1.ResourceCPU: "1500m", corev1.ResourceMemory: "1Gi", corev1.ResourceEphemeralStorage: "1Gi"}),
	}
	d, err := demandOf(pod)
	require.NoError(t, err)
	assert.Equal(t, []corev1.ResourceName{corev1.ResourceCPU, "hugepages-2Mi", corev1.ResourceMemory, gpu}, d.names)
	gi := int64(1 << 30)
	assert.Equal(t, []request{{"init", []int64{6000, 0, gi, 0}}}, d.inits)
	assert.Equal(t, []request{
		{"sidecar", []int64{1000, 0, gi / 2, 0}},
		{"a", []int64{4000, 64 << 20, 2 * gi, 1}},
		{"b", []int64{0, 0, gi, 0}}, // 1.5 CPUs are not exclusive: the shared pool serves them
	}, d.containers)
	assert.Equal(t, request{"", []int64{6000, 64 << 20, 3*gi + gi/2, 1}}, d.pod, "the init container's peak for cpu, the containers' sum for the rest")
	assert.Equal(t, `container "a" (cpu 4, hugepages-2Mi 64Mi, memory 2Gi, nvidia.com/gpu 1)`, d.describe(&d.containers[1], ^uint64(0)))
	assert.Equal(t, `pod (cpu 6, nvidia.com/gpu 1)`, d.describe(&d.pod, 0b1001))

	// A Burstable pod has only its devices aligned.
	burstable := st.MakePod().Namespace("ns").Name("q").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "2"}).Obj()
	d, err = demandOf(burstable)
	require.NoError(t, err)
	assert.Equal(t, []corev1.ResourceName{gpu}, d.names)
	assert.Equal(t, []request{{"con0", []int64{2}}}, d.containers)

	// A Burstable pod without devices needs nothing: the plugin skips it.
	f := newFixture(t, "")
	plain := st.MakePod().Namespace("ns").Name("r").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4"}).Obj()
	state, status := f.preFilter(t, plain)
	assert.True(t, status.IsSkip(), "%v", status)
	assert.True(t, f.numa.PreScore(context.Background(), state, plain, []fwk.NodeInfo{nodeInfo("n")}).IsSkip())
	_, status = f.numa.SignPod(context.Background(), plain)
	assert.True(t, status.IsSuccess(), "pods that need nothing aligned can be batched")
	_, status = f.numa.SignPod(context.Background(), burstable)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "pods with aligned requests cannot")
}

func TestSingleNUMANodeContainerScope(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("n", "single-numa-node", "container", cpus("4"), cpus("4")))
	f.publish(t, topology("tight", "single-numa-node", "", cpus("4"), cpus("2")))

	// 3+3 CPUs: each container fits a zone alone, not both one zone; in container scope each
	// goes to its own zone.
	pod := guaranteed("p", cpu("3"), cpu("3"))
	assert.True(t, f.filter(t, pod, "n").IsSuccess())

	// On "tight" each container fits node-0 alone, but the second must not count the CPUs the
	// first took. Memory is not listed by the zones: not topology-managed, not in the message.
	before := rejectionCount(t, "single-numa-node")
	status := f.filter(t, pod, "tight")
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold container "b" (cpu 3) under single-numa-node`, status.Message())
	assert.Equal(t, before+1, rejectionCount(t, "single-numa-node"))

	// A request larger than any zone can ever hold.
	status = f.filter(t, guaranteed("big", cpu("6")), "n")
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold container "a" (cpu 6) under single-numa-node`, status.Message())

	// An init container is admitted alone: it must fit a zone too.
	withInit := guaranteed("i", cpu("2"))
	withInit.Spec.InitContainers = []corev1.Container{container("setup", map[corev1.ResourceName]string{corev1.ResourceCPU: "5", corev1.ResourceMemory: "1Gi"})}
	status = f.filter(t, withInit, "n")
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold container "setup" (cpu 5) under single-numa-node`, status.Message())
}

func TestSingleNUMANodePodScope(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("n", "single-numa-node", "pod", cpus("4"), cpus("4")))
	f.publish(t, topology("roomy", "single-numa-node", "pod", cpus("2"), cpus("6")))

	pod := guaranteed("p", cpu("3"), cpu("3"))
	status := f.filter(t, pod, "n")
	assert.Equal(t, fwk.Unschedulable, status.Code(), "the pod's 6 CPUs must share one zone")
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold pod (cpu 6) under single-numa-node`, status.Message())
	assert.True(t, f.filter(t, pod, "roomy").IsSuccess())
}

func TestRestrictedWantsTheFewestZonesTheRequestCouldEverNeed(t *testing.T) {
	f := newFixture(t, "")
	// 12 CPUs need 2 of these 8-CPU zones at least.
	f.publish(t, topology("two-free", "restricted", "", cpus("6"), cpus("1"), cpus("8")))
	f.publish(t, topology("scattered", "restricted", "", cpus("4"), cpus("4"), cpus("4")))
	big := guaranteed("big", cpu("12"))
	assert.True(t, f.filter(t, big, "two-free").IsSuccess(), "6+8 on two zones")
	before := rejectionCount(t, "restricted")
	status := f.filter(t, big, "scattered")
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, `TephraNUMA: container "a" (cpu 12) does not fit in the fewest NUMA zones it needs under restricted`, status.Message())
	assert.Equal(t, before+1, rejectionCount(t, "restricted"))

	// 4 CPUs fit one zone: spread on two, kubelet would not prefer it.
	f.publish(t, topology("halves", "restricted", "", cpus("3"), cpus("3")))
	assert.Equal(t, fwk.Unschedulable, f.filter(t, guaranteed("small", cpu("4")), "halves").Code())

	// Each resource's zones must share one: here the CPUs fit only node-0 and the GPU only
	// node-1, so kubelet finds no preferred hint although two zones hold both.
	f.publish(t, topology("apart", "restricted", "",
		zone{corev1.ResourceCPU: {"8", "8"}, gpu: {"0", "0"}},
		zone{corev1.ResourceCPU: {"2", "2"}, gpu: {"2", "2"}}))
	status = f.filter(t, guaranteed("g", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "1"}), "apart")
	assert.Equal(t, `TephraNUMA: container "a" (cpu 4, nvidia.com/gpu 1) does not fit in the fewest NUMA zones it needs under restricted`, status.Message())
}

func TestBestEffortAndNoneAdmitAnything(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("best-effort", "best-effort", "", cpus("2"), cpus("2")))
	f.publish(t, topology("none", "none", "", cpus("2"), cpus("2")))
	f.publish(t, topology("silent", "", "", cpus("2"), cpus("2")))
	pod := guaranteed("p", cpu("4"))
	for _, node := range []string{"best-effort", "none", "silent"} {
		assert.True(t, f.filter(t, pod, node).IsSuccess(), node)
	}
}

func TestNonGuaranteedPodsAlignOnlyDevices(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("one-each", "single-numa-node", "",
		zone{corev1.ResourceCPU: {"8", "1"}, gpu: {"1", "1"}},
		zone{corev1.ResourceCPU: {"8", "1"}, gpu: {"1", "1"}}))
	f.publish(t, topology("pair", "single-numa-node", "",
		zone{corev1.ResourceCPU: {"8", "1"}, gpu: {"2", "2"}},
		zone{corev1.ResourceCPU: {"8", "8"}, gpu: {"2", "0"}}))
	pod := st.MakePod().Namespace("ns").Name("p").UID("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "2"}).Obj()
	status := f.filter(t, pod, "one-each")
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold container "con0" (nvidia.com/gpu 2) under single-numa-node`, status.Message())
	assert.True(t, f.filter(t, pod, "pair").IsSuccess(), "the shared CPUs of a Burstable pod are not aligned")
}

func TestNUMAUnawareNodesPassAndScoreNeutral(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("aware", "single-numa-node", "", cpus("1")))
	require.NoError(t, f.nodes.Add(st.MakeNode().Name("plain").Obj()))
	require.NoError(t, f.nodes.Add(st.MakeNode().Name("plain-2").Obj()))
	pod := guaranteed("p", cpu("4"))

	assert.True(t, f.filter(t, pod, "plain").IsSuccess())
	state, _ := f.preFilter(t, pod)
	assert.True(t, f.numa.PreScore(context.Background(), state, pod, []fwk.NodeInfo{nodeInfo("plain")}).IsSkip(), "no node to score")
	score, status := f.numa.Score(context.Background(), state, pod, nodeInfo("plain"))
	require.True(t, status.IsSuccess())
	assert.Equal(t, int64(50), score)

	f.numa.countUnawareNodes(context.Background())
	v, err := testutil.GetGaugeMetricValue(unawareNodes)
	require.NoError(t, err)
	assert.Equal(t, float64(2), v)

	// An object deleted: the node is NUMA-unaware again.
	f.numa.topologyHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "aware", Obj: topology("aware", "", "")})
	assert.True(t, f.filter(t, pod, "aware").IsSuccess())
}

func TestPolicyAnnotation(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("best-effort", "best-effort", "", cpus("2"), cpus("2")))
	f.publish(t, topology("single", "single-numa-node", "", cpus("2"), cpus("2")))

	strict := guaranteed("strict", cpu("4"))
	strict.Annotations = map[string]string{PolicyAnnotation: "single-numa-node"}
	status := f.filter(t, strict, "best-effort")
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold container "a" (cpu 4) under single-numa-node`, status.Message())

	lax := guaranteed("lax", cpu("4"))
	lax.Annotations = map[string]string{PolicyAnnotation: "none"}
	assert.True(t, f.filter(t, lax, "single").IsSuccess())

	bad := guaranteed("bad", cpu("4"))
	bad.Annotations = map[string]string{PolicyAnnotation: "SingleNUMANode"}
	_, status = f.preFilter(t, bad)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, `TephraNUMA: annotation scheduling.tephra.dev/numa-topology-policy="SingleNUMANode" is not one of none, best-effort, restricted, single-numa-node`, status.Message())
	assert.Equal(t, "Warning InvalidNUMATopologyPolicy "+status.Message(), <-f.handle.recorder.Events)

	fixed := bad.DeepCopy()
	fixed.Annotations[PolicyAnnotation] = "restricted"
	hint, err := isSchedulableAfterPolicyChange(klog.Background(), fixed, bad, fixed)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, hint, "fixing the annotation brings the pod back")
	relabeled := bad.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	hint, _ = isSchedulableAfterPolicyChange(klog.Background(), relabeled, bad, relabeled)
	assert.Equal(t, fwk.QueueSkip, hint)
}

func TestReservationsCountUntilTheObjectShowsThePod(t *testing.T) {
	f := newFixture(t, "")
	f.publish(t, topology("n", "single-numa-node", "", cpus("4"), cpus("4")))
	first, second, third := guaranteed("first", cpu("4")), guaranteed("second", cpu("4")), guaranteed("third", cpu("4"))

	f.reserve(t, first, "n")
	assert.True(t, f.filter(t, second, "n").IsSuccess(), "node-1 is still free")
	f.reserve(t, second, "n")
	assert.Equal(t, `TephraNUMA: no NUMA zone can hold container "a" (cpu 4) under single-numa-node`, f.filter(t, third, "n").Message(),
		"both zones are reserved though the object shows them free")

	f.numa.Unreserve(context.Background(), nil, second, "n")
	assert.True(t, f.filter(t, third, "n").IsSuccess(), "unreserved")

	// A pod that ends, or is deleted, gives its zone back.
	f.reserve(t, second, "n")
	require.False(t, f.filter(t, third, "n").IsSuccess())
	done := second.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	f.numa.podHandler().OnUpdate(second, done)
	assert.True(t, f.filter(t, third, "n").IsSuccess(), "ended")
	f.reserve(t, second, "n")
	f.numa.podHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/second", Obj: second})
	assert.True(t, f.filter(t, third, "n").IsSuccess(), "deleted")
}

func TestReservationIsDroppedOnTheSecondUpdateOfTheObject(t *testing.T) {
	f := newFixture(t, "")
	nrt := topology("n", "single-numa-node", "", cpus("8"))
	nrt.ResourceVersion = "1"
	f.publish(t, nrt)
	f.reserve(t, guaranteed("first", cpu("4")), "n")
	six, four := guaranteed("six", cpu("6")), guaranteed("four", cpu("4"))
	require.False(t, f.filter(t, six, "n").IsSuccess())

	// The same version again (a relist) is not an update.
	f.publish(t, nrt.DeepCopy())
	// The first update may come from a sample taken before kubelet admitted the pod.
	first := nrt.DeepCopy()
	first.ResourceVersion = "2"
	f.publish(t, first)
	assert.False(t, f.filter(t, six, "n").IsSuccess(), "still reserved after one update")
	assert.True(t, f.filter(t, four, "n").IsSuccess())

	// The second shows the pod: 4 CPUs available. Counting the reservation too would leave none.
	second := topology("n", "single-numa-node", "", cpus("4"))
	second.ResourceVersion = "3"
	f.publish(t, second)
	assert.True(t, f.filter(t, four, "n").IsSuccess(), "the reservation was dropped")
	assert.False(t, f.filter(t, six, "n").IsSuccess())
}

func TestScorePrefersFewerZonesThenTheStrategy(t *testing.T) {
	most, least := newFixture(t, ""), newFixture(t, `{"scoringStrategy": "LeastAllocated"}`)
	for _, f := range []*fixture{most, least} {
		f.publish(t, topology("full-zone", "best-effort", "", cpus("4"), cpus("8")))
		f.publish(t, topology("empty-zone", "best-effort", "", cpus("8"), cpus("8")))
		f.publish(t, topology("two-zones", "best-effort", "", cpus("2"), cpus("2")))
	}
	pod := guaranteed("p", cpu("4"))

	// One zone: 90 and up; MostAllocated rates node-0 of full-zone (all 8 CPUs taken once the pod
	// is there) 9 and an empty zone half-used 5 (4.5 rounded).
	assert.Equal(t, int64(99), most.score(t, pod, "full-zone"))
	assert.Equal(t, int64(95), most.score(t, pod, "empty-zone"))
	assert.Equal(t, int64(89), most.score(t, pod, "two-zones"), "two full zones rank below any single zone")
	assert.Equal(t, int64(90), least.score(t, pod, "full-zone"))
	assert.Equal(t, int64(95), least.score(t, pod, "empty-zone"))
	assert.Equal(t, int64(80), least.score(t, pod, "two-zones"))

	// Reservations count: with half of node-0 of empty-zone reserved, the pod fills it; with all
	// of it reserved, the pod goes to node-1 and half-fills it.
	most.reserve(t, guaranteed("other", cpu("4")), "empty-zone")
	assert.Equal(t, int64(99), most.score(t, pod, "empty-zone"))
	most.reserve(t, guaranteed("other2", cpu("4")), "empty-zone")
	assert.Equal(t, int64(95), most.score(t, pod, "empty-zone"))
}

func TestPolicyAndScopeFromTheObject(t *testing.T) {
	for _, tc := range []struct {
		attrs    []string // policy, scope
		policies []string
		want     policy
		podScope bool
	}{
		{attrs: []string{"restricted", "pod"}, want: policyRestricted, podScope: true},
		{attrs: []string{"single-numa-node", ""}, want: policySingleNUMANode},
		{policies: []string{"SingleNUMANodePodLevel"}, want: policySingleNUMANode, podScope: true},
		{policies: []string{"SingleNUMANodeContainerLevel"}, want: policySingleNUMANode},
		{policies: []string{"RestrictedPodLevel"}, want: policyRestricted, podScope: true},
		{policies: []string{"Restricted"}, want: policyRestricted},
		{policies: []string{"BestEffortContainerLevel"}, want: policyBestEffort},
		{policies: []string{"None"}, want: policyNone},
		{attrs: []string{"best-effort", "container"}, policies: []string{"SingleNUMANodePodLevel"}, want: policyBestEffort},
		{attrs: []string{"bogus", ""}, want: policyNone},
		{want: policyNone},
	} {
		name := fmt.Sprint(tc.attrs, tc.policies)
		nrt := topology("n", "", "")
		if tc.attrs != nil {
			nrt = topology("n", tc.attrs[0], tc.attrs[1])
		}
		nrt.TopologyPolicies = tc.policies
		p, podScope := policyOf(nrt)
		assert.Equal(t, tc.want, p, name)
		assert.Equal(t, tc.podScope, podScope, name)
	}

	// Only zones of type Node count.
	nrt := topology("n", "single-numa-node", "", cpus("4"))
	nrt.Zones = append(nrt.Zones, topologyv1alpha2.Zone{Name: "socket-0", Type: "Socket", Resources: topologyv1alpha2.ResourceInfoList{
		{Name: "cpu", Allocatable: resource.MustParse("16"), Available: resource.MustParse("16")},
	}})
	topo := parseTopology(nrt)
	assert.Equal(t, []string{"node-0"}, topo.zones)
	assert.Equal(t, []int64{8000}, topo.alloc)
	assert.Equal(t, []int64{4000}, topo.avail)
}

func TestQueueingHints(t *testing.T) {
	f := newFixture(t, "")
	events, err := f.numa.EventsToRegister(context.Background())
	require.NoError(t, err)
	var registered []fwk.ClusterEvent
	for _, e := range events {
		registered = append(registered, e.Event)
	}
	assert.Equal(t, []fwk.ClusterEvent{
		{Resource: "noderesourcetopologies.v1alpha2.topology.node.k8s.io", ActionType: fwk.Add | fwk.Update | fwk.Delete},
		{Resource: fwk.AssignedPod, ActionType: fwk.Delete},
		{Resource: fwk.Node, ActionType: fwk.Add},
		{Resource: fwk.TargetPod, ActionType: fwk.Update},
	}, registered)

	logger := klog.Background()
	pod := guaranteed("p", cpu("4"))
	nrt := func(name, version string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		u.SetResourceVersion(version)
		return u
	}
	hint, _ := isSchedulableAfterTopologyChange(logger, pod, nil, nrt("n", "1"))
	assert.Equal(t, fwk.Queue, hint, "added")
	hint, _ = isSchedulableAfterTopologyChange(logger, pod, nrt("n", "1"), nrt("n", "2"))
	assert.Equal(t, fwk.Queue, hint, "updated")
	hint, _ = isSchedulableAfterTopologyChange(logger, pod, nrt("n", "2"), nrt("n", "2"))
	assert.Equal(t, fwk.QueueSkip, hint, "the same version again")

	hint, _ = isSchedulableAfterPodDeleted(logger, pod, guaranteed("gone", cpu("2")), nil)
	assert.Equal(t, fwk.Queue, hint, "a pod with exclusive CPUs frees zones")
	shared := st.MakePod().Name("shared").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2"}).Obj()
	hint, _ = isSchedulableAfterPodDeleted(logger, pod, shared, nil)
	assert.Equal(t, fwk.QueueSkip, hint, "a pod on the shared pool frees nothing aligned")
	hint, _ = isSchedulableAfterPodDeleted(logger, pod, cache.DeletedFinalStateUnknown{}, nil)
	assert.Equal(t, fwk.Queue, hint)
}
