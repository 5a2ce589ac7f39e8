package placement

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/tephra-dev/tephra/internal/quota"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// gpuDevices is the DRA resource of DeviceClass gpu.example.com's devices.
var gpuDevices = quota.DevicesName("gpu.example.com")

// fakeDevices is a deviceView of fixed slices and charges: what each node offers, and what each
// pod (by name) is charged.
type fakeDevices struct {
	offered map[string]quota.Amounts
	charges map[string]quota.Amounts
}

func (f *fakeDevices) OnNode(node string) quota.Amounts { return f.offered[node].Clone() }

func (f *fakeDevices) OfferedOnNodes() quota.Amounts {
	total := quota.Amounts{}
	for _, offered := range f.offered {
		total.Add(offered)
	}
	return total
}

func (f *fakeDevices) FreeOn(node fwk.NodeInfo) quota.Amounts {
	free := f.OnNode(node.Node().Name)
	for _, pi := range node.GetPods() {
		free.Sub(f.charges[pi.GetPod().Name])
	}
	return free
}

func (f *fakeDevices) Charge(pod *corev1.Pod) quota.PodDevices {
	return quota.PodDevices{Charged: f.charges[pod.Name].Clone()}
}

func newPlugin(t *testing.T, rawArgs string, d deviceView) *Placement {
	t.Helper()
	var obj runtime.Object
	if rawArgs != "" {
		obj = &runtime.Unknown{Raw: []byte(rawArgs), ContentType: runtime.ContentTypeJSON}
	}
	args, err := ParseArgs(obj)
	require.NoError(t, err)
	return newPlacement(args, d)
}

// gpuNode is a node of 64 CPUs and gpus GPUs (none: no GPU resource at all) running pods that
// hold used GPUs in 1-GPU pods.
func gpuNode(name string, gpus, used int) fwk.NodeInfo {
	capacity := map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110"}
	if gpus > 0 {
		capacity[gpu] = fmt.Sprint(gpus)
	}
	ni := framework.NewNodeInfo()
	for i := range used {
		ni.AddPod(st.MakePod().Name(fmt.Sprintf("%s-p%d", name, i)).Node(name).Req(map[corev1.ResourceName]string{gpu: "1", corev1.ResourceCPU: "1"}).Obj())
	}
	ni.SetNode(st.MakeNode().Name(name).Capacity(capacity).Obj())
	return ni
}

// devicesNode is a node of 64 CPUs without extended GPUs; its DRA devices are in fakeDevices.
// Its pods are named node-d0, node-d1, ...
func devicesNode(name string, pods int) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	for i := range pods {
		ni.AddPod(st.MakePod().Name(fmt.Sprintf("%s-d%d", name, i)).Node(name).Obj())
	}
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110"}).Obj())
	return ni
}

func gpuPod(name string, gpus int) *corev1.Pod {
	return st.MakePod().Name(name).Req(map[corev1.ResourceName]string{gpu: fmt.Sprint(gpus), corev1.ResourceCPU: "1"}).Obj()
}

func cpuPod(name string) *corev1.Pod {
	return st.MakePod().Name(name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
}

// claimPod is a pod with one claim; its charge is set in fakeDevices.
func claimPod(name string) *corev1.Pod {
	return st.MakePod().Name(name).PodResourceClaims(corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: new(name + "-gpu")}).Obj()
}

// scores runs PreScore and Score over the nodes; skip says PreScore skipped the plugin.
func scores(t *testing.T, p *Placement, pod *corev1.Pod, nodes ...fwk.NodeInfo) (out map[string]int64, skip bool) {
	t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	status := p.PreScore(ctx, state, pod, nodes)
	if status.IsSkip() {
		return nil, true
	}
	require.True(t, status.IsSuccess(), status.AsError())
	out = map[string]int64{}
	for _, n := range nodes {
		score, status := p.Score(ctx, state, pod, n)
		require.True(t, status.IsSuccess(), status.AsError())
		require.GreaterOrEqual(t, score, int64(0))
		require.LessOrEqual(t, score, fwk.MaxScore)
		out[n.Node().Name] = score
	}
	return out, false
}

// ranking lists the nodes best first (ties by name).
func ranking(s map[string]int64) []string {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if s[a] != s[b] {
			return int(s[b] - s[a])
		}
		if a < b {
			return -1
		}
		return 1
	})
	return names
}

func TestAcceleratorPodsPackOntoPartlyUsedNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  string
		pod   *corev1.Pod
		nodes []fwk.NodeInfo
		want  []string
	}{{
		name:  "a partly used node before an empty one, the fullest first",
		pod:   gpuPod("p", 1),
		nodes: []fwk.NodeInfo{gpuNode("empty", 8, 0), gpuNode("two", 8, 2), gpuNode("six", 8, 6), gpuNode("one", 8, 1)},
		want:  []string{"six", "two", "one", "empty"},
	}, {
		name:  "the node the pod fills is the best fit",
		pod:   gpuPod("p", 2),
		nodes: []fwk.NodeInfo{gpuNode("empty", 8, 0), gpuNode("five", 8, 5), gpuNode("six", 8, 6)},
		want:  []string{"six", "five", "empty"},
	}, {
		name:  "heterogeneous: a partly used big node before a whole small one; among empty ones the pod fills most",
		pod:   gpuPod("p", 1),
		nodes: []fwk.NodeInfo{gpuNode("big-empty", 8, 0), gpuNode("small-empty", 2, 0), gpuNode("big-one", 8, 1), gpuNode("small-one", 4, 1)},
		want:  []string{"small-one", "big-one", "small-empty", "big-empty"},
	}, {
		name:  "a node without GPUs scores least for a GPU pod",
		pod:   gpuPod("p", 1),
		nodes: []fwk.NodeInfo{gpuNode("cpu", 0, 0), gpuNode("empty", 8, 0)},
		want:  []string{"empty", "cpu"},
	}, {
		name:  "LeastAllocated spreads",
		args:  `{"scoringStrategy": "LeastAllocated"}`,
		pod:   gpuPod("p", 1),
		nodes: []fwk.NodeInfo{gpuNode("six", 8, 6), gpuNode("empty", 8, 0), gpuNode("two", 8, 2)},
		want:  []string{"empty", "two", "six"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s, skip := scores(t, newPlugin(t, tc.args, nil), tc.pod, tc.nodes...)
			require.False(t, skip)
			assert.Equal(t, tc.want, ranking(s), "scores %v", s)
			for name, score := range s {
				if name != "cpu" && name != "big-empty" && name != "small-empty" && name != "empty" && tc.args == "" {
					assert.Greater(t, score, half, "partly used node %s scores in the upper half", name)
				}
			}
		})
	}
}

// The scores a 1-GPU pod meets on 8-GPU nodes: each GPU used adds to the node's score, by more
// than upstream's LeastAllocated on CPU takes away at weight 1 against the plugin's 5.
func TestMostAllocatedSteps(t *testing.T) {
	p := newPlugin(t, "", nil)
	var nodes []fwk.NodeInfo
	for used := range 8 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("n%d", used), 8, used))
	}
	s, _ := scores(t, p, gpuPod("p", 1), nodes...)
	for used := 1; used < 8; used++ {
		step := s[fmt.Sprintf("n%d", used)] - s[fmt.Sprintf("n%d", used-1)]
		assert.GreaterOrEqual(t, step, int64(6), "one more GPU used (%d)", used)
	}
	assert.Equal(t, fwk.MaxScore, s["n7"], "the pod fills the node")
}

func TestPodsWithoutAcceleratorsAvoidAcceleratorNodes(t *testing.T) {
	nodes := []fwk.NodeInfo{gpuNode("gpu-empty", 8, 0), gpuNode("gpu-full", 8, 8), gpuNode("gpu-half", 8, 4), gpuNode("cpu", 0, 0)}
	s, skip := scores(t, newPlugin(t, "", nil), cpuPod("p"), nodes...)
	require.False(t, skip)
	assert.Equal(t, []string{"cpu", "gpu-full", "gpu-half", "gpu-empty"}, ranking(s), "scores %v", s)
	assert.Equal(t, fwk.MaxScore, s["cpu"])
	assert.LessOrEqual(t, s["gpu-full"], half)

	_, skip = scores(t, newPlugin(t, `{"avoidAcceleratorNodes": false}`, nil), cpuPod("p"), nodes...)
	assert.True(t, skip, "without avoidance the plugin has nothing to say about CPU pods")

	_, skip = scores(t, newPlugin(t, `{"accelerators": ["amd.com/gpu"]}`, nil), cpuPod("p"), nodes...)
	assert.True(t, skip, "nvidia.com/gpu is not an accelerator when the args do not name it: no node has one to avoid")
	_, skip = scores(t, newPlugin(t, "", nil), cpuPod("p"), gpuNode("cpu-a", 0, 0), gpuNode("cpu-b", 0, 0))
	assert.True(t, skip, "in a cluster without accelerators every node scores the same: the plugin costs nothing")
	_, skip = scores(t, newPlugin(t, "", &fakeDevices{offered: map[string]quota.Amounts{"cpu-a": {gpuDevices: 8}}}), cpuPod("p"), gpuNode("cpu-a", 0, 0), gpuNode("cpu-b", 0, 0))
	assert.False(t, skip, "DRA devices on a node are accelerators to avoid")
}

func TestStrategyNoneLeavesAcceleratorPods(t *testing.T) {
	p := newPlugin(t, `{"scoringStrategy": "None"}`, nil)
	_, skip := scores(t, p, gpuPod("p", 1), gpuNode("a", 8, 0))
	assert.True(t, skip)
	_, skip = scores(t, p, cpuPod("p"), gpuNode("a", 8, 0))
	assert.False(t, skip, "CPU pods still avoid accelerator nodes")
}

func TestDevicePodsPackByTheNodesSlices(t *testing.T) {
	d := &fakeDevices{
		offered: map[string]quota.Amounts{"empty": {gpuDevices: 8}, "three": {gpuDevices: 8}, "six": {gpuDevices: 8}, "cpu": {}},
		charges: map[string]quota.Amounts{
			"p":           {gpuDevices: 1, quota.DeviceAmountName("gpu.example.com", "memory"): 80 << 30},
			"shared":      {},
			"three-d0":    {gpuDevices: 3},
			"six-d0":      {gpuDevices: 4},
			"six-d1":      {gpuDevices: 2},
			"unrelated-0": {gpuDevices: 1},
		},
	}
	p := newPlugin(t, "", d)
	nodes := []fwk.NodeInfo{devicesNode("empty", 0), devicesNode("three", 1), devicesNode("six", 2), devicesNode("cpu", 0)}
	s, skip := scores(t, p, claimPod("p"), nodes...)
	require.False(t, skip)
	assert.Equal(t, []string{"six", "three", "empty", "cpu"}, ranking(s), "scores %v", s)
	assert.Equal(t, half+(7*fwk.MaxScore/8)/2, s["six"], "7 of 8 devices used with the pod; its memory is not a device")

	_, skip = scores(t, p, claimPod("shared"), nodes...)
	assert.True(t, skip, "a pod charged no device (its claim is another pod's) goes where the claim is")

	s, _ = scores(t, p, cpuPod("c"), nodes...)
	assert.Equal(t, []string{"cpu", "six", "three", "empty"}, ranking(s), "pods without claims keep off device nodes: %v", s)
}

func TestSignPod(t *testing.T) {
	p := newPlugin(t, "", &fakeDevices{})
	f1, status := p.SignPod(context.Background(), gpuPod("a", 1))
	require.True(t, status.IsSuccess())
	f2, _ := p.SignPod(context.Background(), gpuPod("b", 1))
	f4, _ := p.SignPod(context.Background(), gpuPod("c", 4))
	fc, _ := p.SignPod(context.Background(), cpuPod("d"))
	assert.Equal(t, f1, f2, "pods asking for the same accelerators sign alike")
	assert.NotEqual(t, f1, f4, "the signature carries the accelerator count")
	assert.NotEqual(t, f1, fc)
	_, status = p.SignPod(context.Background(), claimPod("e"))
	assert.Equal(t, fwk.Unschedulable, status.Code(), "a claim's charge is not in the pod")
}

func TestArgs(t *testing.T) {
	args, err := ParseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, MostAllocated, args.ScoringStrategy)
	assert.Contains(t, args.Accelerators, "nvidia.com/gpu")
	assert.Contains(t, args.Accelerators, "amd.com/gpu")
	assert.True(t, *args.AvoidAcceleratorNodes)

	args, err = ParseArgs(&runtime.Unknown{Raw: []byte(`{"accelerators": []}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Empty(t, args.Accelerators, "an empty list counts DRA devices only")

	for raw, want := range map[string]string{
		`{"scoringStrategy": "BinPack"}`:                         "scoringStrategy",
		`{"accelerators": ["cpu"]}`:                              "not an extended resource",
		`{"accelerators": ["gpu"]}`:                              "not an extended resource",
		`{"accelerators": ["kubernetes.io/gpu"]}`:                "not an extended resource",
		`{"accelerators": ["nvidia.com/gpu", "nvidia.com/gpu"]}`: "twice",
		`{"strategy": "MostAllocated"}`:                          "unknown field",
		`{"avoidAcceleratorNodes": "yes"}`:                       "avoidAcceleratorNodes",
	} {
		_, err := ParseArgs(&runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON})
		assert.ErrorContains(t, err, want, raw)
		if err != nil {
			assert.Contains(t, err.Error(), Name, "the error names the plugin")
		}
	}
}
