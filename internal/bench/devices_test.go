package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// G8-DRA is G8's gangs, at a third of the pods, each member claiming one device through the
// namespace's template; B0 and C run it, on the same claims.
func TestDevicesScenarioIsG8WithClaims(t *testing.T) {
	sc := scenarioByName("G8-DRA")
	require.NotNil(t, sc)
	assert.True(t, sc.Devices)
	size := workloadSize{pods: 300, nodes: 100}
	g8, dra := newWorkload(scenarioByName("G8"), "ns", size), newWorkload(sc, "ns", size)
	assert.Len(t, dra.pods, 96, "a third of the pods, in whole gangs of 8")
	assert.Equal(t, g8.pods[:96], dra.pods)
	assert.Equal(t, g8.gangs[:12], dra.gangs)
	assert.True(t, dra.devices)
	assert.False(t, g8.devices)

	for _, api := range []GangAPI{NoGangs, TephraGangs} {
		pod := dra.pod(dra.pods[0], api)
		require.Len(t, pod.Spec.ResourceClaims, 1)
		assert.Equal(t, claimTemplate, *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName)
		assert.Equal(t, []corev1.ResourceClaim{{Name: pod.Spec.ResourceClaims[0].Name}}, pod.Spec.Containers[0].Resources.Claims)
		assert.Equal(t, dra.pods[0].gang, pod.Labels[groupLabel])
	}
	assert.Equal(t, dra.pods[0].gang, dra.pod(dra.pods[0], TephraGangs).Labels[schedulingv1alpha1.PodGroupLabel])
	assert.Empty(t, g8.pod(g8.pods[0], TephraGangs).Spec.ResourceClaims)

	var runs []string
	for _, c := range Configurations {
		if c.runs(sc) {
			runs = append(runs, c.Name)
		}
	}
	assert.Equal(t, []string{"B0", "C"}, runs)
	assert.Contains(t, profiledScenarios, sc.Name, "the profile says where C's CPU goes if the goal is missed")

	// Every node publishes enough devices for every pod of a full run.
	assert.GreaterOrEqual(t, DefaultNodes*devicesPerNode, DefaultPods/sc.PodsDivisor)
	slice := localcluster.SimulatedSlice("n", deviceShape)
	assert.Len(t, slice.Spec.Devices, devicesPerNode)
}

// A run of a scenario with devices completes only with every pod's claim counted allocated.
func TestDevicesRunsCompleteWithTheirDevicesOnly(t *testing.T) {
	run := RunResult{Configuration: "C", Scenario: "G8-DRA", Rep: 1, Nodes: 100, Pods: 96, Bound: 96, BoundAll: 96, Gangs: 12, GangsWhole: 12}
	ok, why := run.complete()
	assert.False(t, ok)
	assert.Contains(t, why, "no count")
	run.DevicesAllocated = ptr.To(95)
	ok, why = run.complete()
	assert.False(t, ok)
	assert.Equal(t, "95 of 96 pods bound with their claim's device allocated on their node", why)
	run.DevicesAllocated = ptr.To(96)
	ok, _ = run.complete()
	assert.True(t, ok)
	plain := RunResult{Scenario: "G8", Pods: 8, Bound: 8, Gangs: 1, GangsWhole: 1}
	ok, _ = plain.complete()
	assert.True(t, ok, "other scenarios check no devices")
}

// The check reads the claims: allocated a device of the pod's node, reserved for the pod, no
// device twice.
func TestAllocatedDevices(t *testing.T) {
	w := &workload{namespace: "ns", devices: true, pods: []podSpec{{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}, {name: "e"}, {name: "unbound"}}}
	rec := newRecorder(w)
	for _, p := range []struct{ name, node string }{{"a", "n1"}, {"b", "n1"}, {"c", "n2"}, {"d", "n2"}, {"e", "n3"}, {"unbound", ""}} {
		rec.observe(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: corev1.PodSpec{NodeName: p.node}}, false)
	}
	claim := func(pod, pool, device string, reserved bool) *resourceapi.ResourceClaim {
		uid := types.UID("uid-" + pod)
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: pod + "-gpu", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: uid, Controller: ptr.To(true)}}}}
		if pool != "" {
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: localcluster.DeviceDriver, Pool: pool, Device: device},
			}}}
		}
		if reserved {
			c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: uid}}
		}
		return c
	}
	client := fake.NewClientset(
		claim("a", "n1", "gpu-0", true),
		claim("b", "n1", "gpu-1", true),
		claim("c", "n1", "gpu-2", true),  // another node's device
		claim("d", "n2", "gpu-0", false), // not reserved
		claim("e", "", "", false),        // not allocated
		claim("unbound", "n4", "gpu-0", true),
	)
	b := &benchCluster{fast: client}
	n, err := b.allocatedDevices(context.Background(), "ns", rec)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	twice := &benchCluster{fast: fake.NewClientset(claim("a", "n1", "gpu-0", true), claim("b", "n1", "gpu-0", true))}
	_, err = twice.allocatedDevices(context.Background(), "ns", rec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "allocated to the claims of pods")
}

// The report compares C's CPU per pod with B0's on the same claims, against 1.2×, and says how
// many pods got their devices.
func TestDevicesReport(t *testing.T) {
	res := syntheticResults()
	res.Scenarios = Scenarios
	for rep := 1; rep <= 2; rep++ {
		for config, cpu := range map[string]float64{"B0": 10, "C": 11.5} {
			res.Runs = append(res.Runs, RunResult{Configuration: config, Scenario: "G8-DRA", Rep: rep, Nodes: 100, Pods: 96, Bound: 96, BoundAll: 96,
				Gangs: 12, GangsWhole: 12, Throughput: Throughput{Average: 50}, SchedulerCPUSecondsPer1000Pods: ptr.To(cpu),
				DevicesAllocated: ptr.To(96)})
		}
	}
	var found bool
	for _, g := range goals(res) {
		if strings.HasPrefix(g.text, "G8-DRA: ") {
			found = true
			assert.Equal(t, goal{text: "G8-DRA: C's sched CPU s/1000 pods at most 1.2 × B0's on the same claims (C/B0)", measured: "1.15×", met: "yes"}, g)
		}
	}
	assert.True(t, found)
	md := Markdown(res, nil, "benchmarks")
	for _, want := range []string{"### G8-DRA", "96 pods in 12 gangs of 8, each pod claiming one of the 400 devices of DeviceClass gpu.tephra.dev (4 per node)",
		"fewest over the repetitions: B0 96 of 96, C 96 of 96.", "--controllers=resourceclaim-controller"} {
		assert.Contains(t, md, want)
	}
	header, rows := scenarioTable(res, scenarioByName("G8-DRA"), 100)
	require.Len(t, rows, 2)
	assert.Equal(t, "B0", rows[0][0])
	assert.Len(t, rows[1], len(header))
}
