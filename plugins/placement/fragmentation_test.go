package placement

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

const fragmentation = `{"scoringStrategy": "Fragmentation"}`

// seen makes the plugin's mix learn pods of these shapes (GPUs each), as the pod informer does
// when they are created.
func seen(t *testing.T, p *Placement, shapes ...int) {
	t.Helper()
	for i, gpus := range shapes {
		p.learnShape(uniquePod(fmt.Sprintf("seen-%d-%d", i, gpus), gpus))
	}
}

func uniquePod(name string, gpus int) *corev1.Pod {
	pod := gpuPod(name, gpus)
	pod.UID = types.UID(name)
	return pod
}

// Under a mix of 1- and 4-GPU pods, a 1-GPU pod leaves room for a 4-GPU one: it goes to the node
// with 5 free, leaving 4, not to the fuller one with 4 free, which MostAllocated chooses and
// which then holds no 4-GPU pod.
func TestFragmentationKeepsTheRoomTheMixNeeds(t *testing.T) {
	nodes := []fwk.NodeInfo{gpuNode("four-free", 8, 4), gpuNode("five-free", 8, 3)}

	packed, _ := scores(t, newPlugin(t, "", nil), uniquePod("p", 1), nodes...)
	assert.Equal(t, []string{"four-free", "five-free"}, ranking(packed), "MostAllocated takes the fuller node: %v", packed)

	p := newPlugin(t, fragmentation, nil)
	seen(t, p, 1, 4, 1, 4)
	s, _ := scores(t, p, uniquePod("p", 1), nodes...)
	assert.Equal(t, []string{"five-free", "four-free"}, ranking(s), "scores %v", s)
}

// Under a mix of 1-GPU pods and pods of whole nodes, a 1-GPU pod fragments an empty node (7 GPUs
// no 8-GPU pod can use) and nothing on a partly used one: it packs, the fullest first.
func TestFragmentationPacksSmallPodsWhenWholeNodesAreAsked(t *testing.T) {
	p := newPlugin(t, fragmentation, nil)
	seen(t, p, 1, 1, 1, 1, 8)
	s, _ := scores(t, p, uniquePod("p", 1), gpuNode("empty", 8, 0), gpuNode("two", 8, 2), gpuNode("six", 8, 6))
	assert.Equal(t, []string{"six", "two", "empty"}, ranking(s), "scores %v", s)
	assert.Less(t, s["empty"], s["two"]-5*pointsPerFragmentedAccelerator/10, "the empty node costs more than packing can make up: %v", s)
}

// Before it has learnt any pod of a resource it packs as MostAllocated; a pod placed by hand is
// not learnt.
func TestFragmentationWithoutAMixPacks(t *testing.T) {
	p := newPlugin(t, fragmentation, nil)
	byHand := uniquePod("by-hand", 4)
	byHand.Spec.NodeName = "two"
	p.learnShape(byHand)
	assert.Nil(t, p.mix.shares(gpu))
	s, _ := scores(t, p, uniquePod("p", 1), gpuNode("empty", 8, 0), gpuNode("two", 8, 2), gpuNode("six", 8, 6))
	assert.Equal(t, []string{"six", "two", "empty"}, ranking(s), "scores %v", s)
	seen(t, p, 1)
	assert.Equal(t, map[int64]float64{1: 1}, p.mix.shares(gpu))
}

// A pod counts once however often it is scored, and old shapes fade as new pods come.
func TestShapeMixCountsEachPodOnceAndForgetsSlowly(t *testing.T) {
	m := newShapeMix()
	four := &demand{extended: map[corev1.ResourceName]int64{gpu: 4}}
	one := &demand{extended: map[corev1.ResourceName]int64{gpu: 1}}
	m.observe("a", four)
	m.observe("a", four)
	m.observe("b", one)
	shares := m.shares(gpu)
	assert.Len(t, shares, 2)
	assert.InDelta(t, 0.5, shares[4], 0.01, "a counts once")
	for i := range mixWindow {
		m.observe(types.UID(fmt.Sprint("one-", i)), one)
	}
	assert.Less(t, m.shares(gpu)[4], 0.002, "a 4-GPU pod among %d 1-GPU pods since fades", mixWindow)
	m.forget("a")
	m.observe("a", four)
	assert.Greater(t, m.shares(gpu)[4], 0.002, "a pod forgotten (deleted) and seen again counts again")
}

func TestExpectedFragmentation(t *testing.T) {
	mix := map[int64]float64{1: 0.5, 4: 0.25, 8: 0.25}
	assert.InDelta(t, 0.0, expectedFragmentation(8, mix), 1e-9, "8 free hold any shape")
	assert.InDelta(t, 0.25*5, expectedFragmentation(5, mix), 1e-9, "5 free are too few for an 8-GPU pod")
	assert.InDelta(t, 0.5*3, expectedFragmentation(3, mix), 1e-9, "3 free are too few for 4 or 8")
	assert.InDelta(t, 0.0, expectedFragmentation(0, mix), 1e-9)
}
