package reclaim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// The nodes where DynamicResources found no devices become candidates for reclaim; other
// unresolvable verdicts stay so.
func TestDevicesMayFreeOffersTheNodesWithoutDevices(t *testing.T) {
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("no-devices", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, noDevices).WithPlugin(names.DynamicResources))
	statuses.Set("tainted", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "untolerated taint").WithPlugin(names.TaintToleration))
	statuses.Set("full", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin(names.NodeResourcesFit))
	var infos []fwk.NodeInfo
	for _, name := range []string{"no-devices", "tainted", "full"} {
		info := framework.NewNodeInfo()
		info.SetNode(st.MakeNode().Name(name).Obj())
		infos = append(infos, info)
	}
	lister := internalcache.NewSnapshot(nil, []*corev1.Node{infos[0].Node(), infos[1].Node(), infos[2].Node()}).NodeInfos()

	m := devicesMayFree{statuses}
	assert.Equal(t, fwk.Unschedulable, m.Get("no-devices").Code())
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, m.Get("tainted").Code())
	nodes, err := m.NodesForStatusCode(lister, fwk.Unschedulable)
	require.NoError(t, err)
	var got []string
	for _, n := range nodes {
		got = append(got, n.Node().Name)
	}
	assert.ElementsMatch(t, []string{"no-devices", "full"}, got)
}

// A victim's claim gives its devices back only when no pod that stays uses it.
func TestFreeGivesBackOnlyClaimsNobodyElseUses(t *testing.T) {
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "victim"}}
	claim := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{{UID: "victim"}, {UID: "stays"}}}}
	removed := map[types.UID]*corev1.Pod{"victim": victim}
	assert.False(t, onlyUsedBy(claim, removed), "another user stays")
	removed["stays"] = victim
	assert.True(t, onlyUsedBy(claim, removed))

	whole := structured.MakeDeviceID("d", "p", "gpu-0")
	state := structured.AllocatedState{AllocatedDevices: sets.New(whole, structured.MakeDeviceID("d", "p", "gpu-1"))}
	free(&state, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Driver: "d", Pool: "p", Device: "gpu-0"}}}})
	assert.NotContains(t, state.AllocatedDevices, whole)
	assert.Len(t, state.AllocatedDevices, 1)
}
