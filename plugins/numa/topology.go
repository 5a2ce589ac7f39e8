package numa

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	topologyv1alpha2 "github.com/tephra-dev/tephra/apis/topology/v1alpha2"
	"github.com/tephra-dev/tephra/internal/capacity"
)

// maxZones bounds the NUMA zones of a node the plugin considers, so that a set of zones fits a
// uint64 (kubelet's Topology Manager handles 8 unless told otherwise).
const maxZones = 64

// nodeTopology is what one version of a node's NodeResourceTopology says, parsed when it arrives
// and never changed: the next version replaces it.
type nodeTopology struct {
	policy   policy
	podScope bool
	// zones are the names of the node's NUMA zones (type Node) in the object's order, which
	// exporters keep in NUMA id order: the order in which kubelet tries them.
	zones []string
	// resources are those some zone lists; the node's other resources are not topology-managed.
	resources []corev1.ResourceName
	// alloc and avail hold zone z's allocatable and available amounts of resources[i] at
	// z*len(resources)+i, in the plugin's units.
	alloc, avail []int64
}

func parseTopology(nrt *topologyv1alpha2.NodeResourceTopology) *nodeTopology {
	t := &nodeTopology{}
	t.policy, t.podScope = policyOf(nrt)
	var zones []*topologyv1alpha2.Zone
	for i := range nrt.Zones {
		if zone := &nrt.Zones[i]; zone.Type == topologyv1alpha2.ZoneTypeNode && len(zones) < maxZones {
			zones = append(zones, zone)
			t.zones = append(t.zones, zone.Name)
			for _, res := range zone.Resources {
				if name := corev1.ResourceName(res.Name); !slices.Contains(t.resources, name) {
					t.resources = append(t.resources, name)
				}
			}
		}
	}
	width := len(t.resources)
	t.alloc, t.avail = make([]int64, len(zones)*width), make([]int64, len(zones)*width)
	for z, zone := range zones {
		for _, res := range zone.Resources {
			name := corev1.ResourceName(res.Name)
			at := z*width + slices.Index(t.resources, name)
			t.alloc[at], t.avail[at] = capacity.Amount(name, res.Allocatable), capacity.Amount(name, res.Available)
		}
	}
	return t
}

// policyOf reads the node's Topology Manager policy and scope from the object's attributes, or
// else from the deprecated topologyPolicies of older exporters, where one word says both
// (SingleNUMANodePodLevel, RestrictedContainerLevel, BestEffort, None, ...). A node that says
// nothing, or something unknown, has kubelet's default: none, container scope.
func policyOf(nrt *topologyv1alpha2.NodeResourceTopology) (policy, bool) {
	var name, scope string
	for _, attr := range nrt.Attributes {
		switch attr.Name {
		case topologyv1alpha2.AttributeTopologyManagerPolicy:
			name = attr.Value
		case topologyv1alpha2.AttributeTopologyManagerScope:
			scope = attr.Value
		}
	}
	if name == "" && len(nrt.TopologyPolicies) > 0 {
		old := nrt.TopologyPolicies[0]
		switch {
		case strings.HasPrefix(old, "SingleNUMANode"):
			name = string(policySingleNUMANode)
		case strings.HasPrefix(old, "Restricted"):
			name = string(policyRestricted)
		case strings.HasPrefix(old, "BestEffort"):
			name = string(policyBestEffort)
		}
		if scope == "" && strings.HasSuffix(old, "PodLevel") {
			scope = "pod"
		}
	}
	p, ok := parsePolicy(name)
	if !ok {
		p = policyNone
	}
	return p, scope == "pod"
}

// topologies holds what the plugin knows of every node that publishes a NodeResourceTopology:
// its latest version, and what pods reserved there that the exporter may not show yet. The lock
// is held only while reading or changing this state, never while calling the framework.
//
// Reservations. After a bind, kubelet admits the pod and the exporter republishes the node's
// object from its next sample of kubelet's state, seconds later; until then the object's
// available amounts do not count the pod, and a burst of pods would all be sent to the same
// zone. So Reserve subtracts what the pod takes from its zones, as Filter placed it, until one of:
//   - the pod is unreserved, deleted, or ends (Succeeded or Failed);
//   - the node's object is updated a second time after the reservation. The first update may come
//     from a sample taken before kubelet admitted the pod; the second was sampled at least one
//     full exporter cycle later, so its available amounts include the pod, and keeping the
//     reservation would count it twice.
type topologies struct {
	mu    sync.RWMutex
	nodes map[string]*nodeState
	// placedOn maps each pod that holds a reservation to its node.
	placedOn map[types.UID]string
}

type nodeState struct {
	topo            *nodeTopology
	resourceVersion string
	// updates counts the versions of the object seen after the first.
	updates uint64
	// pods are the reservations on the node; reserved is their sum, laid out as topo.avail.
	pods     map[types.UID]*reservation
	reserved []int64
}

// reservation is what a pod takes of its node's zones. Zones and resources are named, so that it
// outlives the version of the object it was made on.
type reservation struct {
	takes []take
	// update is the node's update count when the pod was reserved.
	update uint64
}

type take struct {
	zone     string
	resource corev1.ResourceName
	amount   int64
}

func newTopologies() *topologies {
	return &topologies{nodes: map[string]*nodeState{}, placedOn: map[types.UID]string{}}
}

// set records a version of a node's object, and drops the reservations it makes obsolete.
func (t *topologies) set(nrt *topologyv1alpha2.NodeResourceTopology) {
	topo := parseTopology(nrt)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.nodes[nrt.Name]
	switch {
	case s == nil:
		s = &nodeState{pods: map[types.UID]*reservation{}}
		t.nodes[nrt.Name] = s
	case nrt.ResourceVersion != "" && nrt.ResourceVersion == s.resourceVersion:
		return // the same version again, from a relist
	default:
		s.updates++
	}
	s.topo, s.resourceVersion = topo, nrt.ResourceVersion
	for uid, r := range s.pods {
		if s.updates-r.update >= 2 {
			delete(s.pods, uid)
			delete(t.placedOn, uid)
		}
	}
	s.sumReservations()
}

// remove forgets a node whose object was deleted: it is NUMA-unaware from now on.
func (t *topologies) remove(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.nodes[name]; s != nil {
		for uid := range s.pods {
			delete(t.placedOn, uid)
		}
		delete(t.nodes, name)
	}
}

// has says whether the node publishes its topology.
// none says whether no node publishes its topology.
func (t *topologies) none() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.nodes) == 0
}

func (t *topologies) has(name string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.nodes[name] != nil
}

// view copies what the pod sees of the node's zones into buf when it is large enough; found is
// false for a NUMA-unaware node.
func (t *topologies) view(name string, d *demand, buf []int64) (v view, found bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.nodes[name]
	if s == nil {
		return view{}, false
	}
	return s.view(d, buf), true
}

// reserve records what the pod takes on the node's zones, placed as Filter and Score placed it.
func (t *topologies) reserve(name string, uid types.UID, d *demand) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(uid)
	s := t.nodes[name]
	if s == nil {
		return
	}
	v := s.view(d, nil)
	before := slices.Clone(v.free)
	// The placement does not depend on the policy; best-effort places even what a stricter
	// policy would reject, should the zones have filled since Filter.
	v.assign(d, policyBestEffort)
	r := &reservation{update: s.updates}
	for z, zone := range s.topo.zones {
		for i, name := range d.names {
			if got := before[z*v.width+i] - v.free[z*v.width+i]; got > 0 {
				r.takes = append(r.takes, take{zone: zone, resource: name, amount: got})
			}
		}
	}
	if len(r.takes) > 0 {
		s.pods[uid] = r
		t.placedOn[uid] = name
		s.sumReservations()
	}
}

// release drops the pod's reservation, if it has one.
func (t *topologies) release(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(uid)
}

func (t *topologies) releaseLocked(uid types.UID) {
	name, ok := t.placedOn[uid]
	if !ok {
		return
	}
	delete(t.placedOn, uid)
	if s := t.nodes[name]; s != nil {
		delete(s.pods, uid)
		s.sumReservations()
	}
}

func (s *nodeState) sumReservations() {
	topo := s.topo
	s.reserved = make([]int64, len(topo.avail))
	for _, r := range s.pods {
		for _, tk := range r.takes {
			z, i := slices.Index(topo.zones, tk.zone), slices.Index(topo.resources, tk.resource)
			if z >= 0 && i >= 0 {
				s.reserved[z*len(topo.resources)+i] += tk.amount
			}
		}
	}
}

// view is what the pod sees of the node's zones now: available less reserved.
func (s *nodeState) view(d *demand, buf []int64) view {
	topo := s.topo
	v := view{policy: topo.policy, podScope: topo.podScope, zones: len(topo.zones), width: len(d.names)}
	if d.policy != "" {
		v.policy = d.policy
	}
	n := v.zones * v.width
	if cap(buf) < 2*n {
		buf = make([]int64, 2*n)
	}
	buf = buf[:2*n]
	clear(buf)
	v.free, v.alloc = buf[:n:n], buf[n:2*n]
	tw := len(topo.resources)
	for i, name := range d.names {
		j := slices.Index(topo.resources, name)
		if j < 0 || i >= 64 {
			continue
		}
		v.managed |= 1 << i
		for z := range v.zones {
			v.alloc[z*v.width+i] = topo.alloc[z*tw+j]
			v.free[z*v.width+i] = max(0, topo.avail[z*tw+j]-s.reserved[z*tw+j])
		}
	}
	return v
}
