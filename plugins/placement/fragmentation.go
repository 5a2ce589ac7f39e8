package placement

import (
	"fmt"
	"math"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
)

// Fragmentation scoring (scoringStrategy Fragmentation) follows FGD ("Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC'23), for
// accelerators counted whole. A node's free accelerators are fragmented for a pod shape (the
// accelerators one pod asks for) when they are too few for it: they cannot hold it, though they
// count in the cluster's free total. The node's expected fragmentation weighs that by how often
// each shape comes (the mix). A pod goes where placing it grows the expected fragmentation least,
// or shrinks it most: on 8-GPU nodes under a mix of 1- and 8-GPU pods, a 1-GPU pod on an empty
// node makes 7 GPUs useless to the 8-GPU pods, and on a partly used one it fragments nothing new.
// Where MostAllocated keeps whole nodes whatever comes, this keeps the room the mix needs: under
// a mix of 1- and 4-GPU pods, a 1-GPU pod goes to the node with 5 free (leaving 4) rather than to
// the fuller one with 4 free (leaving 3, which no 4-GPU pod can use).

// mixWindow is about how many accelerator pods the mix remembers: each new pod's shape weighs 1,
// and what came before fades by 1/mixWindow a pod. Counting pods, not time, makes the mix the
// same at any pace of arrivals: a few hundred pods are most of a day's shapes on a small cluster
// and the last hour on a big one.
const mixWindow = 500

// shapeMix is the recent mix of pod shapes, per accelerator resource: the accelerators each pod
// asked for of it, weighted by how recently pods of that shape came. It learns each pod once,
// when it is created unscheduled (its extended resources) or first scored (its DRA devices): a
// pod that waits and is tried again does not count again, and a pod with a single feasible node,
// which kube-scheduler places without scoring, counts too.
type shapeMix struct {
	mu      sync.Mutex
	weights map[corev1.ResourceName]map[int64]float64
	seen    map[types.UID]struct{}
}

func newShapeMix() *shapeMix {
	return &shapeMix{weights: map[corev1.ResourceName]map[int64]float64{}, seen: map[types.UID]struct{}{}}
}

// observe adds the pod's shapes, once per pod.
func (m *shapeMix) observe(uid types.UID, d *demand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[uid]; ok {
		return
	}
	m.seen[uid] = struct{}{}
	for name, v := range d.extended {
		m.add(name, v)
	}
	for name, v := range d.devices {
		m.add(name, v)
	}
}

func (m *shapeMix) add(name corev1.ResourceName, shape int64) {
	w := m.weights[name]
	if w == nil {
		w = map[int64]float64{}
		m.weights[name] = w
	}
	for s := range w {
		w[s] *= 1 - 1.0/mixWindow
		if w[s] < 1e-3 {
			delete(w, s)
		}
	}
	w[shape]++
}

// learnShapes keeps the mix from the scheduler's pod informer: each pod created without a node
// adds its accelerator extended resources; each pod deleted is forgotten from the pods seen.
func (p *Placement) learnShapes(handle fwk.Handle) error {
	_, err := handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				p.learnShape(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.mix.forget(pod.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching pods for the mix of pod shapes: %w", err)
	}
	return nil
}

// learnShape adds a pod waiting for a node to the mix, by its accelerator extended resources.
// Pods placed by hand (a node given) are not the scheduler's to place.
func (p *Placement) learnShape(pod *corev1.Pod) {
	if pod.Spec.NodeName != "" {
		return
	}
	if requests := p.acceleratorRequests(pod); requests != nil {
		p.mix.observe(pod.UID, &demand{extended: requests})
	}
}

// forget drops a deleted pod from the pods seen (its shape stays in the mix, fading as others come).
func (m *shapeMix) forget(uid types.UID) {
	m.mu.Lock()
	delete(m.seen, uid)
	delete(m.seen, uid+"/devices")
	m.mu.Unlock()
}

// sharesOf is the mix of each resource the pod asks for (nil for one no pod asked for yet).
func (m *shapeMix) sharesOf(d *demand) map[corev1.ResourceName]map[int64]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[corev1.ResourceName]map[int64]float64, len(d.extended)+len(d.devices))
	for name := range d.extended {
		out[name] = m.sharesLocked(name)
	}
	for name := range d.devices {
		out[name] = m.sharesLocked(name)
	}
	return out
}

// shares is the mix of one resource as shares summing to 1 (nil before any pod asked for it).
func (m *shapeMix) shares(name corev1.ResourceName) map[int64]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sharesLocked(name)
}

func (m *shapeMix) sharesLocked(name corev1.ResourceName) map[int64]float64 {
	w := m.weights[name]
	total := 0.0
	for _, v := range w {
		total += v
	}
	if total == 0 {
		return nil
	}
	out := make(map[int64]float64, len(w))
	for s, v := range w {
		out[s] = v / total
	}
	return out
}

// expectedFragmentation is how many of free accelerators are, on average over the mix, too few
// for the pod that comes: all of them for shapes larger than free, none for the others (FGD's
// measure for tasks of whole devices).
func expectedFragmentation(free int64, mix map[int64]float64) float64 {
	out := 0.0
	for shape, share := range mix {
		if free < shape {
			out += share * float64(free)
		}
	}
	return out
}

// pointsPerFragmentedAccelerator is what the score takes off for each accelerator the placement
// is expected to fragment (and adds for each it un-fragments), from the middle of the range. A
// 1-GPU pod on an empty 8-GPU node, under a mix where one pod in five takes a whole node,
// fragments 1.4 GPUs: 14 points, 70 once weighted, against at most 10 points between the fullest
// and the emptiest node for packing, which breaks ties.
const pointsPerFragmentedAccelerator = 10

// packingPoints is the most the share of the node used adds, so that among placements that
// fragment alike the fullest node wins (best fit, as MostAllocated).
const packingPoints = 10

// fragmentationScore scores a node for a pod by how much the placement changes the node's
// expected fragmentation under the mixes (by resource, as PreScore read them), summed over the
// accelerators the pod asks for (names; entries with allocatable 0 are left out), with the share
// used after placing it as a tie-break. Without a mix yet (the first accelerator pods), it packs
// as MostAllocated does.
func fragmentationScore(mixes map[corev1.ResourceName]map[int64]float64, names []corev1.ResourceName, requested, allocated, allocatable []int64) int64 {
	grown, share := 0.0, int64(0)
	count, known := int64(0), false
	for i, name := range names {
		if allocatable[i] == 0 {
			continue
		}
		count++
		share += mostRequestedScore(requested[i], allocatable[i])
		mix := mixes[name]
		if mix == nil {
			continue
		}
		known = true
		before := expectedFragmentation(max(allocatable[i]-allocated[i], 0), mix)
		after := expectedFragmentation(max(allocatable[i]-requested[i], 0), mix)
		grown += after - before
	}
	if count == 0 {
		return 0
	}
	if !known {
		return mostAllocatedScorer(requested, allocated, allocatable)
	}
	score := float64(fwk.MaxScore-packingPoints)/2 - grown*pointsPerFragmentedAccelerator
	score = min(max(score, 0), float64(fwk.MaxScore-packingPoints))
	return int64(math.Round(score)) + (share/count)*packingPoints/fwk.MaxScore
}
